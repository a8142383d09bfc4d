"""A training run folder: its files, the resumable state in it, and snapshots that carry it on."""

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
SNAPSHOT_FILES = ("config.json", "tokenizer.json", "progress.json", "model.safetensors")


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
    """`progress` with its hours, derived from its seconds for what a person reads (snapshot, export);
    a run's own progress keeps only the seconds."""
    return progress | {
        "hours": round(progress["seconds"] / 3600, 3),  # wall time of the steps
        "cpu_hours": round(progress.get("cpu_seconds", 0.0) / 3600, 3),  # both cores counted
    }


def write_snapshot(run: Run, out: Path) -> None:
    """Pack a run into a folder small enough to commit: raw weights in bf16, progress, config, tokenizer."""
    out.mkdir(parents=True, exist_ok=True)
    weights = load_file(run.state / "model.safetensors")
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}, out / "model.safetensors")
    (out / "ema.safetensors").unlink(missing_ok=True)  # an older snapshot's EMA would outlive its weights
    progress = run.read_progress()
    for per_run in ("adam_steps", "cooldown", "rewarm"):  # the next run gets its own
        progress.pop(per_run, None)
    (out / "progress.json").write_text(json.dumps(with_hours(progress), indent=1))
    if run.validation_path.exists():  # the training curve goes on with the run
        (out / "valid.jsonl").write_text(run.validation_path.read_text())
    (out / "config.json").write_text(run.config_path.read_text())
    (out / "tokenizer.json").write_text(run.tokenizer_path.read_text())
    logger.info("snapshot of step %d in %s", progress["step"], out)


def seed_run_from_snapshot(run: Run, source: Path) -> None:
    """Copy a snapshot's config and tokenizer into a new run folder; weights load in `load_snapshot`."""
    missing = [name for name in SNAPSHOT_FILES if not (source / name).exists()]
    if missing:
        raise SystemExit(f"{source} is not a training snapshot: missing {', '.join(missing)}")
    for name in ("config.json", "tokenizer.json"):
        (run.folder / name).write_text((source / name).read_text())
    if (source / "valid.jsonl").exists():  # the curve so far, continued by this run
        run.validation_path.write_text((source / "valid.jsonl").read_text())


def load_snapshot(source: Path, model, cfg: TrainConfig) -> tuple[dict[str, torch.Tensor], dict]:
    """Load a snapshot's weights into `model`: (EMA, progress with a re-warmup from its step).

    The EMA starts from the raw weights, or from ema.safetensors in a snapshot that has one (older ones).
    Progress goes on from the snapshot's: steps, tokens, seconds and CPU seconds keep adding up.
    """
    weights = {k: v.float() for k, v in load_file(source / "model.safetensors").items()}
    depth = model.config.text_config.num_hidden_layers
    if layer_count(weights) < depth:
        weights = grow_layers(weights, depth)
    model.load_state_dict(weights, strict=False)
    if (source / "ema.safetensors").exists():
        ema = {k: v.float() for k, v in load_file(source / "ema.safetensors").items()}
    else:
        ema = {k: v.clone().float() for k, v in parameters(model).items()}
    progress = json.loads((source / "progress.json").read_text())
    for derived in ("hours", "cpu_hours"):  # written from the seconds by snapshot and export
        progress.pop(derived, None)
    progress["rewarm"] = {"from": progress["step"], "steps": max(1, cfg.warmup_steps // 3)}
    logger.info("started from the snapshot in %s at step %d", source, progress["step"])
    return ema, progress
