"""The H200 measurement script runs end to end on CPU with a tiny config (issue: prepared, not run, here)."""

from __future__ import annotations

import json

import torch

from evaluation.gpu_bench import RELEASED_TEXT, active_parameters, build, main


def test_released_shape_has_the_published_parameter_counts():
    model = build(tiny=False, device="meta", dtype=torch.bfloat16)  # shapes only, no memory
    total = sum(p.numel() for p in model.parameters())
    assert 25.0e9 < total < 25.5e9  # "about 25.2B parameters"
    assert 3.7e9 < active_parameters(model) < 3.9e9  # "3.8B active"
    assert model.config.get_text_config().num_hidden_layers == RELEASED_TEXT["num_hidden_layers"] == 30


def test_tiny_run_counts_what_each_path_returned_and_reports_medians_with_their_spread(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--prompt-tokens", "32", "--ar-tokens", "8", "--canvas", "32", "--steps", "2,4",
            "--repeats", "2", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(out.read_text())
    paths = {(p["path"], p["steps"]): p for p in figures["paths"]}
    assert set(paths) == {
        ("ours", 2),
        ("ours", 4),
        ("generate", 2),
        ("generate", 4),
        ("autoregressive", None),
    }
    for (name, _), path in paths.items():
        assert path["tokens"] == (8 if name == "autoregressive" else 32)  # what the path returned
        assert path["runs"] == 2 and path["min_ms"] <= path["median_ms"] <= path["max_ms"]
        # tokens over the median time: a rate no run can beat by more than its own spread
        assert path["tokens_per_s"] <= path["tokens"] / (path["min_ms"] / 1000) + 1e-6
        if path["tokens_per_s_no_prefill"] is not None:
            assert path["tokens_per_s_no_prefill"] > path["tokens_per_s"]
    assert "tok/s without prefill" in capsys.readouterr().out
