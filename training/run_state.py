"""A training run folder: its files, the resumable state in it, and a start from an exported model."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from training.config import TrainConfig
from training.growth import grow_layers, layer_count

logger = logging.getLogger(__name__)

OPTIMIZER_BUFFERS = ("exp_avg", "exp_avg_sq", "momentum_buffer")
MODEL_FILES = ("config.json", "tokenizer.json", "training.json")  # what `export` writes beside the weights
# What a run's progress carries on from an exported model's training.json.
PROGRESS_KEYS = ("step", "tokens", "seconds", "cpu_seconds", "canvas_tokens")


class Run:
    """A training run folder: tokenizer.json, config.json, state/ (resumable), train.log, valid.jsonl."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.state = folder / "state"

    @property
    def tokenizer_path(self) -> Path:
        return self.folder / "tokenizer.json"

    @property
    def config_path(self) -> Path:
        return self.folder / "config.json"

    @property
    def log_path(self) -> Path:
        return self.folder / "train.log"

    @property
    def validation_path(self) -> Path:
        return self.folder / "valid.jsonl"

    def has_state(self) -> bool:
        return (self.state / "progress.json").exists()

    def read_config(self) -> TrainConfig | None:
        return TrainConfig.from_json(self.config_path.read_text()) if self.config_path.exists() else None

    def write_config(self, cfg: TrainConfig) -> None:
        self.config_path.write_text(cfg.to_json())

    def read_progress(self) -> dict:
        return json.loads((self.state / "progress.json").read_text())

    def append_validation(self, row: dict) -> None:
        with self.validation_path.open("a") as out:
            out.write(json.dumps(row) + "\n")

    def save(self, model, ema: dict[str, torch.Tensor], optimizer, progress: dict) -> None:
        tmp = self.folder / "state.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        save_file(parameters(model), tmp / "model.safetensors")
        save_file(ema, tmp / "ema.safetensors")
        names = {id(p): n for n, p in model.named_parameters()}
        moments, steps = {}, {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                state = optimizer.state.get(p)
                if state:
                    for key in OPTIMIZER_BUFFERS:
                        if key in state:
                            moments[f"{names[id(p)]}.{key}"] = state[key]
                    steps[names[id(p)]] = float(state["step"])
        save_file(moments, tmp / "optimizer.safetensors")
        (tmp / "progress.json").write_text(json.dumps({**progress, "adam_steps": steps}, indent=1))
        if self.state.exists():
            old = self.folder / "state.old"
            self.state.rename(old)
            tmp.rename(self.state)
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        else:
            tmp.rename(self.state)

    def load(self, model, optimizer) -> tuple[dict[str, torch.Tensor], dict]:
        model.load_state_dict(load_file(self.state / "model.safetensors"), strict=False)
        ema = load_file(self.state / "ema.safetensors")
        progress = self.read_progress()
        moments = load_file(self.state / "optimizer.safetensors")
        for name, p in model.named_parameters():
            buffers = {
                key: moments[f"{name}.{key}"] for key in OPTIMIZER_BUFFERS if f"{name}.{key}" in moments
            }
            if buffers:
                optimizer.state[p] = {"step": torch.tensor(progress["adam_steps"][name]), **buffers}
        return ema, progress


def parameters(model) -> dict[str, torch.Tensor]:
    """Trainable weights by name, each shared (tied) tensor once: what safetensors can store."""
    return {name: p.detach().contiguous() for name, p in model.named_parameters()}


def with_hours(progress: dict) -> dict:
    """`progress` with its hours, derived from its seconds for what a person reads (the export);
    a run's own progress keeps only the seconds."""
    return progress | {
        "hours": round(progress["seconds"] / 3600, 3),  # wall time of the steps
        "cpu_hours": round(progress.get("cpu_seconds", 0.0) / 3600, 3),  # both cores counted
    }


def seed_run_from_model(run: Run, source: Path) -> None:
    """Copy an exported model's training config and tokenizer into a new run folder; its weights load in
    `load_model`. This is how a run whose folder was lost goes on: from the shipped weights."""
    missing = [name for name in MODEL_FILES if not (source / name).exists()]
    if missing:
        raise SystemExit(
            f"{source} is not a model exported by `python -m training export`: missing {', '.join(missing)}"
        )
    record = json.loads((source / "training.json").read_text())
    run.config_path.write_text(json.dumps(record["config"], indent=1))
    run.tokenizer_path.write_text((source / "tokenizer.json").read_text())


def load_model(source: Path, model, cfg: TrainConfig) -> tuple[dict[str, torch.Tensor], dict]:
    """Load an exported model's weights into `model`: (EMA, progress with a re-warmup from its step).

    The EMA starts at the loaded weights; progress goes on from the export's training.json, so steps,
    tokens, seconds and CPU seconds keep adding up across runs.
    """
    from transformers import DiffusionGemmaForBlockDiffusion

    exported = DiffusionGemmaForBlockDiffusion.from_pretrained(source, dtype=torch.float32)
    weights = {k: v.clone() for k, v in parameters(exported).items()}
    depth = model.config.text_config.num_hidden_layers
    if layer_count(weights) < depth:
        weights = grow_layers(weights, depth)
    model.load_state_dict(weights, strict=False)
    ema = {k: v.clone().float() for k, v in parameters(model).items()}
    record = json.loads((source / "training.json").read_text())
    progress = {key: record[key] for key in PROGRESS_KEYS if key in record}
    progress["rewarm"] = {"from": progress["step"], "steps": max(1, cfg.warmup_steps // 3)}
    logger.info("started from the model in %s at step %d", source, progress["step"])
    return ema, progress
