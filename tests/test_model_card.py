"""The model card is written from the files commands produced, figures included."""

from __future__ import annotations

import json
import shutil

from training.model_card import main


def test_card_quotes_training_data_and_eval_files(tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    config = {
        "shape": "tiny",
        "batch_size": 4,
        "prompt_budgets": [64],
        "canvas_lengths": [16],
        "lr": 0.001,
        "ar_weight": 0.5,
        "self_conditioning_rate": 0.5,
        "min_noise": 0.02,
        "ema_decay": 0.99,
    }
    (model / "training.json").write_text(
        json.dumps(
            {"step": 1234, "tokens": 5_600_000, "seconds": 7200, "canvas_tokens": 99, "config": config}
        )
    )
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    manifest = {
        "languages": {
            "python": {
                "files": {"train": 10},
                "bytes": {"train": 3e6},
                "licenses": {"MIT": {"bytes": 2e6}, "PSF-2.0": {"bytes": 1e6}},
            }
        }
    }
    (corpus / "MANIFEST.json").write_text(json.dumps(manifest))
    run = {
        "benchmark": "santacoder-fim",
        "language": "py",
        "command": "dgemma-lsp eval santacoder-fim --limit 300",
        "summaries": [
            {
                "decoder": "diffusion",
                "n": 300,
                "exact_match": 0.2,
                "edit_similarity": 0.55,
                "pass_at_1": None,
                "tokens_per_forward": 4.5,
                "p50_ms": 41.0,
                "p95_ms": 90.0,
            }
        ],
        "speed": {
            "ratio": 2.5,
            "diffusion_tokens_per_s": 250.0,
            "autoregressive_tokens_per_s": 100.0,
            "rows": 200,
        },
    }
    (tmp_path / "eval.json").write_text(json.dumps(run))
    assert main(["--model", str(model), "--corpus", str(corpus), "--eval", str(tmp_path / "eval.json")]) == 0
    text = (model / "MODEL_CARD.md").read_text()
    assert "Steps: 1,234; tokens read by the encoder: 5,600,000" in text and "2.00 hours" in text
    assert "| python | 10 | 3 | MIT 2, PSF-2.0 1 |" in text
    assert "| santacoder-fim (py) | diffusion | 300 | 20.0% | 0.55 | - | - | - | 4.50 | 41 | 90 |" in text
    assert "2.50x" in text and "`dgemma-lsp eval santacoder-fim --limit 300` -> `eval.json`" in text


def test_card_draws_the_training_curve_and_names_the_recipe(tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    config = {
        "shape": "tiny", "batch_size": 16, "prompt_budgets": [128], "canvas_lengths": [16, 32], "lr": 0.002,
        "ar_weight": 0.5, "self_conditioning_rate": 0.5, "min_noise": 0.02, "ema_decay": 0.999, "bf16": True,
        "optimizer": "muon", "canvas_weight": 1.0, "canvas_from_tokens": 20_000_000,
        "canvas_ramp_tokens": 1_000_000, "draft_share": 0.3, "self_conditioning_scaled": True,
    }  # fmt: skip
    training = {
        "step": 9000,
        "tokens": 26_000_000,
        "seconds": 18000,
        "cpu_seconds": 30000,
        "canvas_tokens": 5,
    }
    (model / "training.json").write_text(json.dumps(training | {"config": config}))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    one_file = {"files": {"train": 1}, "bytes": {"train": 1e6}, "licenses": {"MIT": {"bytes": 1e6}}}
    languages = {"python": one_file, "typescript": one_file, "lua": one_file}
    (corpus / "MANIFEST.json").write_text(json.dumps({"languages": languages}))
    rows = [
        {"tokens": t, "seconds": t / 1000, "cpu_seconds": t / 800, "ar": 5 - t / 1e7, "canvas": 6.0}
        for t in (1e6, 2e7)
    ]
    rows[1] |= {"completion_rows": 100, "completion_em": 0.01, "completion_es": 0.12}  # --completion-rows
    rows[1] |= {"completion_ar_em": 0.05, "completion_ar_es": 0.25}
    curve = tmp_path / "valid.jsonl"
    curve.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    changes = tmp_path / "changes.md"
    changes.write_text("Muon instead of AdamW: it learned faster per token.\n")
    args = ["--model", str(model), "--corpus", str(corpus), "--curve", str(curve), "--changes", str(changes)]
    assert main(args) == 0
    text = (model / "MODEL_CARD.md").read_text()
    assert (model / "training-curve.png").read_bytes()[:4] == b"\x89PNG" and "![validation loss" in text
    assert (
        "AR-first curriculum" in text
        and "first 20,000,000 tokens" in text
        and "30% of first canvases" in text
    )
    assert "Muon" in text and "bf16 autocast" in text and "8.33 CPU hours" in text
    assert text.index("## Training curve") < text.index("## Data")
    assert "first 100 held-out calibration positions" in text and "ES 0.120" in text
    assert "next-token head alone, left to right: EM 0.050, ES 0.250" in text
    assert text.index("## What changed\n\nMuon instead of AdamW") < text.index("## Training")
    assert "Trained on Python only so far" in text
    assert main([*args, "--languages", "python,typescript,lua"]) == 0
    assert "Trained on Python, TypeScript and Lua only so far" in (model / "MODEL_CARD.md").read_text()
