"""Rotary position tables per layer type, as `DiffusionGemmaTextRotaryEmbedding` computes them, without
transformers' modeling module (whose import is most of a server's start).

The inverse frequencies come from the same places the module takes them: its own formula for the
`default` type, transformers' rope initialisers for the others, each over the config resolved for that
layer type. Types whose tables change with the sequence length (dynamic, longrope) are not handled
here: `SUPPORTED_TYPES` says which are.
"""

from __future__ import annotations

from typing import Any

import torch

SUPPORTED_TYPES = ("default", "proportional")


def unsupported_rope(text_config: Any) -> str | None:
    """Why these tables cannot stand in for the model's rotary embedding (None: they can)."""
    for layer_type in sorted(set(text_config.layer_types)):
        params = text_config.rope_parameters[layer_type]
        if params is None or params.get("rope_type") not in SUPPORTED_TYPES:
            return f"rope type {params and params.get('rope_type')} on {layer_type} layers"
    return None


def _default_inverse_frequencies(config: Any, layer_type: str) -> torch.Tensor:
    """The module's `compute_default_rope_parameters`, without its (unused) attention factor."""
    params = config.rope_parameters[layer_type]
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(dim * params.get("partial_rotary_factor", 1.0))
    return 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))


def inverse_frequencies(text_config: Any) -> dict[str, tuple[torch.Tensor, float]]:
    """Per layer type of a transformers text config: the inverse frequencies and attention scaling."""
    reason = unsupported_rope(text_config)
    if reason:
        raise ValueError(f"unsupported rotary embedding: {reason}")
    frequencies: dict[str, tuple[torch.Tensor, float]] = {}
    for layer_type in sorted(set(text_config.layer_types)):
        rope_type = text_config.rope_parameters[layer_type]["rope_type"]
        config = text_config.per_layer_config[layer_type]
        if rope_type == "default":
            inverse, scaling = _default_inverse_frequencies(config, layer_type), 1.0
        else:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            inverse, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, None, layer_type=layer_type)
        frequencies[layer_type] = (inverse.float(), scaling)
    return frequencies


class RotaryTables:
    """cos and sin at given positions for each layer type, from `FusedConfig.rotary`."""

    def __init__(
        self, rotary: dict[str, tuple[tuple[float, ...], float]], device: torch.device | str = "cpu"
    ) -> None:
        if not rotary:
            raise ValueError("unsupported rotary embedding: no frequencies resolved for it")
        self.frequencies = {
            kind: (torch.tensor(inverse, dtype=torch.float, device=device), scaling)
            for kind, (inverse, scaling) in rotary.items()
        }

    def __call__(self, positions: torch.Tensor, layer_type: str, dtype: torch.dtype):
        """cos and sin at `positions` ([B, T]) -> two [B, T, D] tensors in `dtype`."""
        inverse, scaling = self.frequencies[layer_type]
        freqs = positions[..., None].float() * inverse
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)
