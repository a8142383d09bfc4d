"""The H200 measurement script runs end to end on CPU with a tiny config (issue: prepared, not run, here)."""

from __future__ import annotations

import json

import torch

from evaluation.gpu_bench import RELEASED_TEXT, STEP_COUNTS, active_parameters, build, main


def test_released_shape_has_the_published_parameter_counts():
    model = build(tiny=False, device="meta", dtype=torch.bfloat16)  # shapes only, no memory
    total = sum(p.numel() for p in model.parameters())
    assert 25.0e9 < total < 25.5e9  # "about 25.2B parameters"
    assert 3.7e9 < active_parameters(model) < 3.9e9  # "3.8B active"
    assert model.config.get_text_config().num_hidden_layers == RELEASED_TEXT["num_hidden_layers"] == 30


def test_tiny_run_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert main(["--tiny", "--prompt-tokens", "64", "--ar-tokens", "8", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["prefill_tokens_per_s"] > 0 and figures["autoregressive_tokens_per_s"] > 0
    assert sorted(int(k) for k in figures["ours_tokens_per_s"]) == list(STEP_COUNTS)
    assert all(v > 0 for v in figures["generate_tokens_per_s"].values())
    assert "ours vs autoregressive" in capsys.readouterr().out
