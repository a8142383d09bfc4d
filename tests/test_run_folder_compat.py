"""A run folder in the layout of the old `python -m engine.train` resumes under `python -m training`."""

from __future__ import annotations

import json
import shutil

import torch
from safetensors.torch import load_file, save_file

from engine.tokenizer import load_tokenizer
from tests.test_train import corpus
from training.checkpoint import new_model
from training.cli import main
from training.shapes import shape_by_name

# config.json as engine/train.py wrote it before the objective flags existed (the campaign's own).
OLD_CONFIG = {
    "shape": "tiny",
    "batch_size": 2,
    "prompt_budgets": [128, 256],
    "canvas_lengths": [16],
    "lr": 0.002,
    "warmup_steps": 300,
    "weight_decay": 0.1,
    "ar_weight": 0.5,
    "self_conditioning_rate": 0.5,
    "min_noise": 0.02,
    "ema_decay": 0.999,
    "eos_tail_weight": 0.1,
    "bf16": False,
    "seed": 0,
}


def old_run_folder(folder, tokenizer_path):
    """Written file by file, the way engine/train.py's Run.save laid a run out: no new code involved."""
    state = folder / "state"
    state.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(OLD_CONFIG, indent=1))
    shutil.copy(tokenizer_path, folder / "tokenizer.json")
    model = new_model(shape_by_name("tiny"), load_tokenizer(tokenizer_path), seed=1)
    weights = {name: p.detach().contiguous() for name, p in model.named_parameters()}
    save_file(weights, state / "model.safetensors")
    save_file({k: v * 0.5 for k, v in weights.items()}, state / "ema.safetensors")
    moments = {f"{k}.exp_avg": torch.full_like(v, 1e-3) for k, v in weights.items()}
    moments |= {f"{k}.exp_avg_sq": torch.full_like(v, 1e-6) for k, v in weights.items()}
    save_file(moments, state / "optimizer.safetensors")
    progress = {"step": 7, "tokens": 1000, "seconds": 2.5, "canvas_tokens": 64, "cpu_seconds": 2.0}
    (state / "progress.json").write_text(json.dumps(progress | {"adam_steps": dict.fromkeys(weights, 7.0)}))
    (folder / "valid.jsonl").write_text(
        json.dumps({"step": 7, "tokens": 1000, "ar": 6.0, "canvas": 5.0}) + "\n"
    )
    (folder / "train.log").write_text("2026-12-03 10:00:00,000 step 7 diff 5.000 ar 6.000\n")
    return weights, moments


def test_an_old_run_folder_resumes_unchanged(tiny_model_dir, tmp_path):
    data, run = corpus(tmp_path / "corpus"), tmp_path / "run"
    shutil.copytree(data / "train", data / "valid")
    weights, moments = old_run_folder(run, tiny_model_dir / "tokenizer.json")
    flags = ["--corpus", str(data), "--run", str(run), "--threads", "1", "--lr", "0.5", "--log-every", "1"]

    main(["run", *flags, "--max-tokens", "1000"])  # already there: loads and saves the state back
    state = run / "state"
    assert all(torch.equal(load_file(state / "model.safetensors")[k], v) for k, v in weights.items())
    assert all(torch.equal(load_file(state / "ema.safetensors")[k], v * 0.5) for k, v in weights.items())
    assert load_file(state / "optimizer.safetensors").keys() == moments.keys()
    progress = json.loads((state / "progress.json").read_text())
    assert progress["step"] == 7 and set(progress["adam_steps"].values()) == {7.0}

    main(["run", *flags, "--steps", "1", "--validate-every-tokens", "1"])
    progress = json.loads((state / "progress.json").read_text())
    assert progress["step"] == 8 and progress["tokens"] > 1000 and progress["canvas_tokens"] > 64
    assert progress["seconds"] > 2.5 and progress["cpu_seconds"] > 2.0
    assert set(progress["adam_steps"].values()) == {7.0, 8.0}  # the vision tower gets no gradient
    assert json.loads((run / "config.json").read_text()) == OLD_CONFIG  # the run keeps its config
    log = (run / "train.log").read_text().splitlines()
    assert log[0].endswith("step 7 diff 5.000 ar 6.000") and "resumed at step 7" in log[1]
    assert "step 8 diff" in log[-2]
    rows = [json.loads(line) for line in (run / "valid.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [7, 8]
