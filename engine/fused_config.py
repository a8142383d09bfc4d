"""What the fused layers read of a checkpoint's text config, as transformers resolves it (its defaults,
rope parameters and rotary frequencies), kept beside the weights in `fused_config.json` so that a
server on a CPU loads the checkpoint without importing transformers (about a second of its start).

`FusedConfig.of` resolves a transformers text config; `write` saves it beside a checkpoint (the
trainer's export does); `read` returns it only while it still belongs to that folder's config.json.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FILE = "fused_config.json"
FORMAT = 2  # 2: the cache windows derived from the layer types, no longer saved


@dataclass(frozen=True)
class FusedConfig:
    hidden_size: int
    rms_norm_eps: float
    hidden_activation: str
    final_logit_softcapping: float | None
    top_k_experts: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]
    sliding_window: int | None
    vocab_size: int
    tie_word_embeddings: bool
    use_clipped_linears: bool
    attention_bias: bool
    use_bidirectional_attention: str | None
    enable_moe_block: bool
    rope_parameters: dict[str, Any]  # per layer type, as transformers resolved them
    # Per layer type: the rotary inverse frequencies and attention scaling (empty: a rope it cannot hold).
    rotary: dict[str, tuple[tuple[float, ...], float]]

    @property
    def cache_windows(self) -> tuple[int | None, ...]:
        """Per layer: its sliding window as the KV cache keeps it, None for full attention."""
        return tuple(
            self.sliding_window if kind == "sliding_attention" else None
            for kind in self.layer_types[: self.num_hidden_layers]
        )

    @classmethod
    def of(cls, text: Any) -> FusedConfig:
        """From a transformers text config (DiffusionGemmaTextConfig)."""
        from engine.rotary import inverse_frequencies, unsupported_rope

        rotary = {}
        if unsupported_rope(text) is None:
            rotary = {
                kind: (tuple(inverse.tolist()), float(scaling))
                for kind, (inverse, scaling) in inverse_frequencies(text).items()
            }
        return cls(
            hidden_size=text.hidden_size,
            rms_norm_eps=text.rms_norm_eps,
            hidden_activation=text.hidden_activation,
            final_logit_softcapping=text.final_logit_softcapping,
            top_k_experts=text.top_k_experts,
            num_hidden_layers=text.num_hidden_layers,
            layer_types=tuple(text.layer_types),
            sliding_window=getattr(text, "sliding_window", None),
            vocab_size=text.vocab_size,
            tie_word_embeddings=getattr(text, "tie_word_embeddings", True),
            use_clipped_linears=getattr(text, "use_clipped_linears", False),
            attention_bias=getattr(text, "attention_bias", False),
            use_bidirectional_attention=getattr(text, "use_bidirectional_attention", None),
            enable_moe_block=getattr(text, "enable_moe_block", True),
            rope_parameters=json.loads(json.dumps(text.rope_parameters)),
            rotary=rotary,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusedConfig:
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise ValueError(f"fields {sorted(set(data) ^ names)} differ from this engine's")
        return cls(
            **data
            | {
                "layer_types": tuple(data["layer_types"]),
                "rotary": {kind: (tuple(inv), float(scale)) for kind, (inv, scale) in data["rotary"].items()},
            }
        )


def _config_digest(folder: Path) -> str:
    return hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()


def write(folder: Path, text: Any) -> Path:
    """Save the fused config of transformers text config `text` beside `folder`'s config.json."""
    data = {"format": FORMAT, "config_sha256": _config_digest(folder), "config": asdict(FusedConfig.of(text))}
    path = folder / FILE
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def read(folder: Path) -> FusedConfig | None:
    """The fused config saved beside `folder`'s config.json; None without one, or when it was saved for
    another config.json or by another format (transformers then resolves the config again)."""
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT or data.get("config_sha256") != _config_digest(folder):
            logger.info("%s is stale (config.json changed): transformers reads the config", path)
            return None
        return FusedConfig.from_dict(data["config"])
    except (OSError, ValueError, TypeError, KeyError) as err:
        logger.warning("ignoring %s: %s", path, err)
        return None
