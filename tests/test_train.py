"""The trainer, end to end on a tiny config: tokenizer, a few steps, resume, export, load."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from engine import InfillRequest, load_engine
from engine.prompts import FimFormat
from engine.tokenizer import load_tokenizer
from evaluation.benchmarks import BENCHMARKS, heldout
from evaluation.runner import run_eval
from training.cli import main
from training.completion_check import CHECK_SET, MODEL_ALONE
from training.config import TrainConfig
from training.data import Document, DocumentMix, choose_span, examples
from training.objective import canvas_weights
from training.trainer import learning_rate

FIXTURES = Path(__file__).parent.parent / "fixtures"


def corpus(folder: Path) -> Path:
    """A corpus folder in the corpus builder's format, from fixture sources (never benchmark code)."""
    (folder / "train").mkdir(parents=True)
    rows = [
        {
            "path": str(p),
            "language": "python",
            "source": "fixtures",
            "license": "PSF-2.0",
            "text": p.read_text(),
        }
        for p in sorted(FIXTURES.rglob("*.py"))
    ]
    (folder / "train" / "python-00000.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def test_train_resume_export_and_load(tmp_path):
    data, run = corpus(tmp_path / "corpus"), tmp_path / "run"
    main(["tokenizer", "--corpus", str(data), "--run", str(run), "--vocab-size", "512", "--sample-mb", "1"])
    common = [
        "run",
        "--corpus",
        str(data),
        "--run",
        str(run),
        "--shape",
        "tiny",
        "--batch-size",
        "2",
        "--threads",
        "1",
    ]
    main([*common, "--steps", "3", "--log-every", "1"])
    progress = json.loads((run / "state" / "progress.json").read_text())
    assert progress["step"] == 3 and progress["tokens"] > 0
    log = (run / "train.log").read_text()
    assert "step 3 diff" in log
    # Resumes: the step count goes on; its canvases now learn the model's own greedy continuation.
    main([*common, "--steps", "2", "--log-every", "1", "--set", "distill_share=1"])
    assert json.loads((run / "state" / "progress.json").read_text())["step"] == 5
    assert json.loads((run / "config.json").read_text())["distill_share"] == 1.0
    main(["export", "--run", str(run), "--out", str(tmp_path / "model")])
    exported = tmp_path / "model"
    assert json.loads((exported / "training.json").read_text())["step"] == 5
    assert not list(exported.glob("*.bin")) and list(exported.glob("*.safetensors"))
    engine = load_engine(str(exported), device="cpu")
    result = engine.infill(InfillRequest(prefix="def f(x):\n    return ", suffix="\n", max_new_tokens=8))
    assert result.steps >= 1
    branch = tmp_path / "cooldown"
    shutil.copytree(run, branch)  # a cooldown runs on a copy; the stable run goes on from step 5
    main([*common[:4], str(branch), *common[5:], "--cooldown-steps", "3", "--log-every", "1"])
    progress = json.loads((branch / "state" / "progress.json").read_text())
    assert progress["step"] == 8 and progress["cooldown"] == {"from": 5, "steps": 3}
    main([*common[:4], str(branch), *common[5:], "--log-every", "1"])  # a finished cooldown stays finished
    assert json.loads((branch / "state" / "progress.json").read_text())["step"] == 8


def test_validation_completes_held_out_positions_as_the_exported_model_would(tmp_path):
    data, run = corpus(tmp_path / "corpus"), tmp_path / "run"
    shutil.copytree(data / "train", data / "valid")  # validation documents (their loss is not checked)
    main(["tokenizer", "--corpus", str(data), "--run", str(run), "--vocab-size", "512", "--sample-mb", "1"])
    main(
        ["run", "--corpus", str(data), "--run", str(run), "--shape", "tiny", "--batch-size", "2"]
        + ["--threads", "1", "--steps", "1", "--validate-every-tokens", "1e9", "--completion-rows", "3"]
    )  # one step, validated after it: the weights checked are the weights saved
    rows = [json.loads(line) for line in (run / "valid.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["completion_rows"] == 3
    assert "model alone on 3 held-out positions" in (run / "train.log").read_text()
    main(["export", "--run", str(run), "--out", str(tmp_path / "model"), "--raw"])
    engine = load_engine(str(tmp_path / "model"), device="cpu")
    items = list(heldout(Path(), CHECK_SET))[:3]
    report = run_eval(engine, BENCHMARKS["heldout"], items, MODEL_ALONE, language=CHECK_SET)
    exported, left_to_right = report.summaries[0], report.summaries[1]
    assert (exported.decoder, left_to_right.decoder) == ("diffusion", "autoregressive")
    assert (exported.exact_match, exported.edit_similarity) == (
        rows[0]["completion_em"],
        pytest.approx(rows[0]["completion_es"], abs=1e-9),
    )
    assert (left_to_right.exact_match, left_to_right.edit_similarity) == (
        rows[0]["completion_ar_em"],
        pytest.approx(rows[0]["completion_ar_es"], abs=1e-9),
    )


def test_a_new_run_goes_on_from_an_exported_model(tmp_path):
    # A run folder does not outlive its session: the next run starts from the shipped model
    # (engine/default), its weights, config, tokenizer and progress; fresh optimizer moments.
    data, run = corpus(tmp_path / "corpus"), tmp_path / "run"
    main(["tokenizer", "--corpus", str(data), "--run", str(run), "--vocab-size", "512", "--sample-mb", "1"])
    common = ["--corpus", str(data), "--shape", "tiny", "--batch-size", "2", "--threads", "1"]
    main(["run", "--run", str(run), *common, "--steps", "3"])
    shipped = tmp_path / "shipped"
    main(["export", "--run", str(run), "--out", str(shipped), "--dtype", "fp32"])
    record = json.loads((shipped / "training.json").read_text())
    assert record["step"] == 3 and record["cpu_hours"] == round(record["cpu_seconds"] / 3600, 3)

    fresh = tmp_path / "next-session"
    start = ["run", "--run", str(fresh), *common, "--from-model", str(shipped)]
    main([*start, "--max-tokens", str(record["tokens"])])  # no step yet: the state it starts from
    ema = load_file(fresh / "state" / "ema.safetensors")
    exported_ema = load_file(run / "state" / "ema.safetensors")
    assert ema.keys() == exported_ema.keys()
    assert all(torch.equal(ema[k], v) for k, v in exported_ema.items())  # fp32 export: exactly the EMA
    main([*start, "--steps", "2"])
    progress = json.loads((fresh / "state" / "progress.json").read_text())
    assert progress["step"] == 5 and progress["rewarm"]["from"] == 3
    for key in ("tokens", "seconds", "cpu_seconds", "canvas_tokens"):  # CPU hours keep adding up
        assert progress[key] > record[key], key
    assert "hours" not in progress and "cpu_hours" not in progress  # derived, not carried stale
    main(["export", "--run", str(fresh), "--out", str(tmp_path / "exported")])
    exported = json.loads((tmp_path / "exported" / "training.json").read_text())
    assert exported["cpu_hours"] == round(progress["cpu_seconds"] / 3600, 3)  # not the start's
    assert exported["hours"] == round(progress["seconds"] / 3600, 3)
    assert (fresh / "tokenizer.json").read_text() == (run / "tokenizer.json").read_text()
    assert json.loads((fresh / "config.json").read_text()) == record["config"]
    main([*start, "--steps", "1"])
    assert json.loads((fresh / "state" / "progress.json").read_text())["step"] == 6  # its own state wins
    with pytest.raises(SystemExit, match="not a model exported"):
        main(["run", "--run", str(tmp_path / "x"), *common, "--from-model", str(tmp_path / "corpus")])


def test_learning_rate_warms_up_holds_and_cools_down_to_a_tenth():
    cfg = TrainConfig(lr=1e-3, warmup_steps=10)
    assert learning_rate(cfg, 0) == pytest.approx(1e-4)
    assert learning_rate(cfg, 5000) == pytest.approx(1e-3)
    cooldown = {"from": 5000, "steps": 100}
    assert learning_rate(cfg, 5000, cooldown) == pytest.approx(1e-3)
    assert learning_rate(cfg, 5050, cooldown) == pytest.approx(5.5e-4)
    assert learning_rate(cfg, 5100, cooldown) == pytest.approx(1e-4)
    rewarm = {"from": 5000, "steps": 10}  # restarted from a snapshot: fresh moments, short warmup
    assert learning_rate(cfg, 5000, rewarm=rewarm) == pytest.approx(1e-4)
    assert learning_rate(cfg, 5020, rewarm=rewarm) == pytest.approx(1e-3)


def test_the_eos_fill_weighs_less_than_the_middle():
    target = torch.tensor([[5, 6, 1, 1, 1]])
    assert canvas_weights(target, eos=1, tail_weight=0.1)[0].tolist() == pytest.approx([1, 1, 1, 0.1, 0.1])


def test_examples_follow_the_fim_layout_and_end_their_middle_with_eos(tiny_engine):
    fmt: FimFormat = tiny_engine.format
    text = (FIXTURES / "tiny_model" / "corpus_textwrap.py").read_text()
    stream = examples(
        DocumentMix([Document(text, "python")]), fmt, random.Random(0), prompt_budget=128, canvas=16
    )
    for _ in range(20):
        example = next(stream)
        assert len(example.target) == 16
        assert example.prompt[1] == fmt.special.fim_suffix and fmt.special.fim_middle in example.prompt
        assert len(example.prompt) <= 128 + 4 * 16 + 4
        if example.middle_rest[-1] == fmt.special.eos and len(example.middle_rest) <= 16:
            assert fmt.special.eos in example.target  # a middle that ends in this canvas says so


def test_spans_look_like_editor_completions():
    doc = Document("def f(x):\n    if x:\n        return 1\n    return 2\n", "python")
    rng = random.Random(1)
    for kind in ("rest_of_line", "lines", "block", "brackets"):
        span = choose_span(doc, rng, kind)
        assert span is not None and 0 <= span.start < span.end <= len(doc.text), kind
    block = choose_span(doc, random.Random(3), "block")
    assert doc.text[block.start : block.end].strip().startswith(("if x:", "return 1"))


def test_a_language_mix_draws_languages_by_weight_not_by_file_count():
    documents = [Document(f"x = {i}\n", "python") for i in range(95)]
    documents += [Document(f"local x = {i}\n", "lua") for i in range(5)]
    rng = random.Random(0)
    by_file = [DocumentMix(documents).draw(rng).language for _ in range(4000)]
    weighted = DocumentMix(documents, {"python": 0.5, "lua": 0.5})
    by_weight = [weighted.draw(rng) for _ in range(4000)]
    assert by_file.count("lua") / 4000 == pytest.approx(0.05, abs=0.015)
    assert [d.language for d in by_weight].count("lua") / 4000 == pytest.approx(0.5, abs=0.03)
    assert len({d.text for d in by_weight if d.language == "lua"}) == 5  # every Lua file is drawn
    only_python = DocumentMix(documents, {"python": 1.0, "lua": 0.0})
    assert {only_python.draw(rng).language for _ in range(200)} == {"python"}
    with pytest.raises(ValueError, match="no weight for lua"):
        DocumentMix(documents, {"python": 1.0})
    with pytest.raises(ValueError, match="no documents: typescript"):
        DocumentMix(documents, {"python": 1.0, "lua": 1.0, "typescript": 0.5})


def test_language_weights_are_set_on_a_run_and_kept_in_its_config():
    cfg = TrainConfig().with_overrides({"language_weights": "python=0.5, typescript=0.3,lua=0.2"})
    assert cfg.language_weights == {"python": 0.5, "typescript": 0.3, "lua": 0.2}
    assert TrainConfig.from_json(cfg.to_json()) == cfg
    assert TrainConfig().language_weights == {}  # a new run draws by file, as runs before it did
    for bad in ("python", "python=lots", "=0.5", "lua=-1"):
        with pytest.raises(SystemExit, match="language weight"):
            TrainConfig().with_overrides({"language_weights": bad})


def test_tokenizer_has_the_special_tokens_at_fixed_ids(tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir / "tokenizer.json")
    assert [tokenizer.token_to_id(t) for t in ("<pad>", "<eos>", "<bos>")] == [0, 1, 2]
