"""Write a run's weights as a checkpoint folder the engine loads, with its training record."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.sampler import SamplerSettings
from engine.tokenizer import load_tokenizer
from training.checkpoint import new_model, save_checkpoint
from training.run_state import Run, with_hours
from training.shapes import shape_by_name

logger = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp32": None}


def export(run: Run, out: Path, raw: bool = False, dtype: str = "bf16") -> None:
    """The EMA weights (or the raw ones) in `dtype`, plus training.json: progress, config, which weights."""
    cfg = json.loads(run.config_path.read_text())
    tokenizer = load_tokenizer(run.tokenizer_path)
    model = new_model(shape_by_name(cfg["shape"]), tokenizer)
    weights = load_file(run.state / ("model.safetensors" if raw else "ema.safetensors"))
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    save_checkpoint(model.eval(), tokenizer, out, settings=shipped_sampler_settings(), dtype=DTYPES[dtype])
    progress = run.read_progress()
    (out / "training.json").write_text(
        json.dumps(
            {k: v for k, v in with_hours(progress).items() if k != "adam_steps"}
            | {"config": cfg, "weights": "raw" if raw else "ema"},
            indent=1,
        )
    )
    logger.info("exported step %d to %s", progress["step"], out)


def shipped_sampler_settings() -> SamplerSettings:
    """Sampler defaults written into an exported model's generation config: few steps for CPU latency
    (through the server's pipeline 4 steps scored as 8 did; engine/default's model card has the figures)."""
    return SamplerSettings(max_steps=4, entropy_bound=0.1, t_max=0.6, t_min=0.2)
