"""The latency benchmark: its typing scripts, and one short real run against the tiny model."""

from __future__ import annotations

import json
import platform

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.runtime.options import CompletionOptions, Options
from evaluation.bench.cli import main
from evaluation.bench.drafter import agreeing
from evaluation.bench.drafter import main as drafter_main
from evaluation.bench.prefill import main as prefill_main
from evaluation.bench.replay import Replay, replay
from evaluation.bench.scripts import END, TYPE, big_file, load_scripts, parse_script


def test_typing_every_segment_in_order_rebuilds_the_file():
    for script in load_scripts():
        text = script.initial
        for segment in script.segments:
            text = text[: segment.offset] + segment.text + text[segment.offset :]
        marked = (script.initial, script.name)
        assert TYPE not in text and END not in text, marked
        original = (load_scripts.__globals__["FIXTURES"] / script.name).read_text()
        assert text == original.replace(TYPE, "").replace(END, "")


def test_parse_script_offsets():
    script = parse_script("x.py", "python", f"a{TYPE}bc{END}d{TYPE}e{END}f")
    assert script.initial == "adf"
    assert [(s.offset, s.text) for s in script.segments] == [(1, "bc"), (4, "e")]


def test_big_file_has_five_thousand_lines_and_types_in_its_middle():
    big = big_file(load_scripts()[0])
    lines = big.initial.count("\n")
    assert 4500 <= lines <= 5500
    assert lines * 0.4 < big.initial[: big.segments[0].offset].count("\n") < lines * 0.6
    text = big.initial
    for segment in big.segments:  # every segment, typed in the middle copy only
        text = text[: segment.offset] + segment.text + text[segment.offset :]
    script = load_scripts()[0]
    copies = big.initial.count(script.initial)
    assert len(big.segments) == len(script.segments) and text.count(_typed(script)) == 1
    assert text.index(_typed(script)) == (copies // 2) * len(script.initial)
    assert text.replace(_typed(script), script.initial) == big.initial


def _typed(script):
    text = script.initial
    for segment in script.segments:
        text = text[: segment.offset] + segment.text + text[segment.offset :]
    return text


def test_a_short_benchmark_run_reports_every_figure(tiny_model_dir, tmp_path, capsys):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = [
        "--model",
        str(tiny_model_dir),
        "--scripts",
        "1",
        "--keys",
        "4",
        "--json",
        str(out),
        "--plot",
        str(png),
    ]
    code = main(argv)
    assert code == 0
    figures = json.loads(out.read_text())
    for key in ("p50_ms", "p95_ms"):
        assert figures["single_line"][key] is not None and figures["single_line"][key] > 0
    assert figures["requests"] >= 4 and figures["answered"] >= 1
    assert figures["overhead"]["p50_ms"] >= 0 and figures["overhead_5000_lines"]["p50_ms"] >= 0
    assert figures["tokens_per_forward"] > 0 and 0 <= figures["prompt_reuse"] <= 1
    assert figures["peak_rss_mb"] > 50 and figures["first_completion_s"] > 0
    assert "single-line latency" in capsys.readouterr().out
    assert sum(n for _, n in figures["steps"]) >= 1 and len(figures["latencies_ms"]["single_line"]) >= 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000  # a picture


def test_a_replay_completes_at_every_key_of_every_segment(tiny_engine):
    script = parse_script("t.py", "python", f"def f(x):\n    return {TYPE}x + 1{END}\n\n{TYPE}y = 2{END}\n")
    figures = Replay()
    options = Options(completion=CompletionOptions(latency_budget_ms=0))
    replay(script, tiny_engine, options, LanguageRegistry(), figures)
    keys = sum(len(segment.text) + 1 for segment in script.segments)  # before the first key and after each
    assert len(figures.request_ms) == len(figures.prefill_ms) == keys == 12
    assert figures.steps >= len(figures.step_ms) > 0 and min(figures.step_ms) > 0
    assert "12 keystrokes" in figures.summary()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the held heap is glibc's")
def test_the_prefill_benchmark_prints_both_ways(tiny_model_dir, capsys, monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    for way in ("held", "window"):
        assert (
            prefill_main(["--model", str(tiny_model_dir), "--way", way, "--repeat", "1", "--random", "2"])
            == 0
        )
        line = capsys.readouterr().out
        assert (
            line.startswith(f"{way}: cold prefill of 150 / 300 / 1000 / 2000 tokens")
            and "RSS after 2 more" in line
        )


def test_the_drafter_benchmark_counts_the_tokens_a_verifying_pass_keeps(tiny_model_dir, capsys):
    assert agreeing((1, 2, 3, 4), (1, 2, 9, 4)) == 2 and agreeing((1, 2), (1, 2, 3)) == 2
    assert agreeing((), (1,)) == 0
    model = ["--model", str(tiny_model_dir)]
    assert drafter_main(["heldout", "--language", "python", "--limit", "2", "--steps", "1,2", *model]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 rows, greedy answers") and "1 step(s): agrees with greedy for" in out
    assert "2 step(s)" in out
