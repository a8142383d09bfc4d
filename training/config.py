"""A run's training configuration: what config.json holds, with the defaults of a new run."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace

OVERRIDABLE = {
    "ar_weight", "canvas_weight", "canvas_from_tokens", "canvas_ramp_tokens", "draft_share", "lr",
    "self_conditioning_rate", "self_conditioning_scaled", "eos_tail_weight", "accumulate", "batch_size",
    "noise_power", "added_lr_scale", "added_gate_lr_scale", "language_weights",
    "distill_share", "context_share",
}  # fmt: skip


@dataclass
class TrainConfig:
    shape: str = "small"
    batch_size: int = 16
    prompt_budgets: tuple[int, ...] = (128, 256, 384, 512)
    canvas_lengths: tuple[int, ...] = (16, 32)
    lr: float = 2e-3
    warmup_steps: int = 300
    weight_decay: float = 0.1
    ar_weight: float = 0.5
    self_conditioning_rate: float = 0.5
    min_noise: float = 0.02
    # A canvas's noise rate is min_noise + (1 - min_noise) * u ** noise_power, u uniform: 1 trains every
    # rate alike; above 1 leans towards the low rates of a draft's canvas and of late denoising steps.
    noise_power: float = 1.0
    ema_decay: float = 0.999
    # Canvas positions after the middle's EOS (the EOS fill) weigh this much in the loss: at full
    # weight they are most of every canvas, and the model learned to answer EOS first (2026-12-02).
    eos_tail_weight: float = 0.1
    bf16: bool = True
    seed: int = 0
    # The objective: ar_weight * next-token loss + canvas weight * diffusion loss, where the canvas
    # weight is 0 before `canvas_from_tokens` and ramps to `canvas_weight` over `canvas_ramp_tokens`.
    # With weight 0 the decoder does not run at all (an AR-first curriculum's first phase).
    canvas_weight: float = 1.0
    canvas_from_tokens: int = 0
    canvas_ramp_tokens: int = 0
    optimizer: str = "adamw"  # or "muon": Muon on hidden matrices, AdamW on the rest
    accumulate: int = 1  # batches per optimizer step
    # Share of first canvases whose noise starts from a draft made by the server's own lookup on the
    # training file (right, partly right or wrong) instead of the target: the model learns when to
    # keep a draft and when to rewrite it.
    draft_share: float = 0.0
    # Share of batches whose canvases learn the model's own greedy next-token continuation instead of
    # the real middle (`training/distill.py`): a canvas that writes in a step or two what the head would.
    distill_share: float = 0.0
    # Self-conditioning on temperature-scaled logits (T drawn from the shipped sampler's range), as the
    # sampler feeds them at inference (transformers' reference does the same); False: raw logits.
    self_conditioning_scaled: bool = False
    # Layers a growth added (`training/growth.py`), and the multiples of the learning rate their weights
    # and their post-norm gates train at: AdamW moves a weight by about the rate per step, too slow for a
    # copy to become a layer of its own or for a nearly shut gate to open.
    added_layers: tuple[int, ...] = ()
    added_lr_scale: float = 1.0
    added_gate_lr_scale: float = 1.0
    # How often each language's documents are drawn (`python=0.5,lua=0.2,...`); empty: by file, the
    # corpus's own mix. Every training language needs a weight.
    language_weights: dict[str, float] = field(default_factory=dict)
    # Share of examples whose prompt carries the other files of their package, retrieved as the server's
    # workspace index retrieves them (`training/repository.py`): the model learns to read that context.
    context_share: float = 0.0

    def with_overrides(self, overrides: dict[str, str]) -> TrainConfig:
        """This config with objective fields changed (`--set`); the model's shape cannot change."""
        changes = {}
        for key, text in overrides.items():
            if key not in OVERRIDABLE:
                raise SystemExit(f"--set {key}: only {', '.join(sorted(OVERRIDABLE))} can change in a run")
            kind = type(getattr(self, key))
            if kind is dict:
                changes[key] = parse_weights(text)
            elif kind is bool:
                changes[key] = text.lower() in ("1", "true", "yes")
            else:
                changes[key] = kind(float(text)) if kind in (int, float) else text
        return replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """Fields a run written by an older trainer lacks take their defaults."""
        saved = json.loads(text)
        saved["prompt_budgets"] = tuple(saved["prompt_budgets"])
        saved["canvas_lengths"] = tuple(saved["canvas_lengths"])
        saved["added_layers"] = tuple(saved.get("added_layers", ()))
        return cls(**saved)


def parse_weights(text: str) -> dict[str, float]:
    """`python=0.5,lua=0.2` as a mapping; a clear exit on anything else."""
    weights = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"language weight {item!r}: expected NAME=NUMBER") from None
        if weights[name.strip()] < 0 or not name.strip():
            raise SystemExit(f"language weight {item!r}: expected a language and a weight of 0 or more")
    return weights
