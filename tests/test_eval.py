"""The evaluation harness: loaders, metrics, sandboxed execution, AR decoding, the CLI end to end."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import torch

from engine import InfillRequest, load_engine
from engine.autoregressive import decode_autoregressive
from evaluation import cli
from evaluation.benchmarks import BENCHMARKS_ENV, Item, load_items
from evaluation.execute import check_completion, network_isolation
from evaluation.metrics import edit_similarity, exact_match, levenshtein, mean, percentile
from evaluation.runner import EditorView, EvalOptions, server_options

# ---- loaders -----------------------------------------------------------------------------------


def test_santacoder_rows_put_the_cursor_on_the_missing_line():
    first, second = load_items("santacoder-fim", limit=2, language="py")
    assert first.id == "humaneval-HumanEval_75_is_multiply_prime.json-L24"
    assert first.language == "python"
    assert first.prefix.endswith("        return True\n    else:\n")
    assert first.suffix == "\n\n"
    assert first.middle == "        return False"
    assert first.single_line and first.check is None and first.max_new_tokens == 48
    assert second.language == "python"
    js = load_items("santacoder-fim", limit=1, language="js")[0]
    assert js.id == "humaneval-HumanEval_109_move_one_ball.json-L36"
    assert (js.language, js.middle) == ("javascript", "    }")


def test_humaneval_rows_carry_their_tests():
    single = load_items("humaneval-single", limit=1)[0]
    assert single.id == "SingleLineInfilling/HumanEval/0/L0"
    assert single.middle == "    for idx, elem in enumerate(numbers):\n"
    assert single.suffix.startswith("        for idx2, elem2 in enumerate(numbers):\n")
    assert single.check.kind == "humaneval" and single.check.entry_point == "has_close_elements"
    assert "def check(candidate):" in single.check.test
    multi = load_items("humaneval-multi", limit=3)
    assert [m.id for m in multi] == [f"MultiLineInfilling/HumanEval/0/L0_L{i}" for i in range(3)]
    assert not multi[0].single_line and multi[0].max_new_tokens == 128


def test_safim_keeps_python_rows_split_at_the_placeholder():
    rows = load_items("safim-block", limit=2)
    assert [r.id for r in rows] == ["block_completion_000016", "block_completion_000017"]
    first = rows[0]
    assert first.middle == "continue"
    assert first.prefix.endswith("    if i in graph[i]:\n        ")
    assert first.suffix.startswith("\n    val = start[i]\n")
    assert "\r" not in first.prefix + first.suffix
    assert first.check.kind == "stdio"
    assert first.check.cases[0].stdin == "4 3\n1 2 3\n1 3 2\n4 1 2"
    assert first.check.cases[0].outputs == ("0 3 2 2",)


def test_cody_rows_are_single_or_multi_line():
    rows = load_items("cody")
    assert len(rows) == 96
    assert sum(r.single_line for r in rows) == 48
    first = rows[0]
    assert first.id == "human-eval-infill-single-line/4"
    assert first.middle == "mean = sum(numbers) / len(numbers)"
    assert first.check.kind == "module" and "from generated import" in first.check.test


def test_benchmark_folder_comes_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "cody-humaneval").mkdir()
    row = {"id": "x/1", "kind": "human-eval-infill-multi-line", "prefix": "a", "suffix": "c", "middle": "b"}
    (tmp_path / "cody-humaneval" / "cody_humaneval_infill.jsonl").write_text(json.dumps(row | {"test": ""}))
    monkeypatch.setenv(BENCHMARKS_ENV, str(tmp_path))
    [item] = load_items("cody")
    assert (item.id, item.prefix, item.middle, item.single_line) == ("x/1", "a", "b", False)
    with pytest.raises(FileNotFoundError):
        load_items("cody", root=tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_items("nope")


# ---- metrics and post-processing ----------------------------------------------------------------


def test_exact_match_conventions():
    assert exact_match("  return x  ", "return x", "line")
    assert not exact_match("return  x", "return x", "line")
    assert exact_match("a  +\n  b\n", "a + b", "whitespace")
    assert not exact_match("a+b", "a + b", "whitespace")


def test_edit_similarity():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("abcdef", "abXdef") == 1
    assert edit_similarity("kitten", "sitting", "whitespace") == pytest.approx(1 - 3 / 7)
    assert edit_similarity("same", "same", "line") == 1.0
    assert edit_similarity("", "", "line") == 1.0
    assert edit_similarity("abc", "", "line") == 0.0


def test_percentile_and_mean():
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 50) == 5.0
    assert percentile(values, 95) == 10.0
    assert percentile([], 50) is None
    assert mean([1.0, 2.0]) == 1.5 and mean([]) is None


def _item(prefix: str, middle: str, suffix: str) -> Item:
    return Item(id="t", language="python", prefix=prefix, suffix=suffix, middle=middle, single_line=True)


def test_a_row_becomes_the_document_an_editor_holds():
    # A whole missing line: the editor shows an empty line there, and the reference loses its break.
    gap = EditorView.of(_item("def f():\n", "    y = 1\n", "    return y\n"))
    assert (gap.text, gap.cursor, gap.reference) == ("def f():\n\n    return y\n", 9, "    y = 1")
    assert (
        gap.program(_item("def f():\n", "", "    return y\n"), "    y = 1")
        == "def f():\n    y = 1\n    return y\n"
    )
    # Inside a line: prefix and suffix as they are.
    inline = EditorView.of(_item("    return [x for x in s", " if x", "]\n"))
    assert (inline.text, inline.cursor, inline.reference) == ("    return [x for x in s]\n", 24, " if x")


# ---- execution ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval_item() -> Item:
    return load_items("humaneval-single", limit=1)[0]


def test_correct_humaneval_solution_passes(humaneval_item):
    assert check_completion(humaneval_item, humaneval_item.middle).status == "passed"


def test_wrong_humaneval_solution_fails(humaneval_item):
    result = check_completion(humaneval_item, "    for idx, elem in enumerate(numbers[:1]):\n")
    assert (result.passed, result.status) == (False, "failed")
    assert "AssertionError" in result.detail


def test_endless_program_times_out(humaneval_item):
    started = time.monotonic()
    endless = "    while True:\n        pass\n" + humaneval_item.middle
    result = check_completion(humaneval_item, endless, timeout=1)
    assert (result.passed, result.status) == (False, "timeout")
    assert time.monotonic() - started < 5


def test_program_memory_is_limited(humaneval_item):
    greedy = "    bytearray(4 << 30)\n" + humaneval_item.middle
    result = check_completion(humaneval_item, greedy)
    assert result.status == "failed" and "MemoryError" in result.detail


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    return server


def test_program_cannot_open_a_connection(humaneval_item):
    # The solution is correct apart from connecting to a live local port: only the block makes it fail.
    with _listener() as server:
        port = server.getsockname()[1]
        connect = f"    __import__('socket').create_connection(('127.0.0.1', {port}))\n"
        result = check_completion(humaneval_item, connect + humaneval_item.middle)
        assert (result.passed, result.status) == (False, "failed")
        assert "network access is disabled" in result.detail
        with pytest.raises(TimeoutError):
            server.accept()


@pytest.mark.skipif(not network_isolation(), reason="no network namespace on this machine")
def test_network_namespace_stops_raw_sockets_too(humaneval_item):
    with _listener() as server:
        port = server.getsockname()[1]
        raw = f"    __import__('_socket').socket().connect(('127.0.0.1', {port}))\n"
        result = check_completion(humaneval_item, raw + humaneval_item.middle)
        assert result.status == "failed" and "OSError" in result.detail
        with pytest.raises(TimeoutError):
            server.accept()


def test_module_and_stdio_checks():
    cody = load_items("cody", limit=1)[0]
    assert check_completion(cody, cody.middle).passed
    assert not check_completion(cody, "mean = 0").passed
    safim = load_items("safim-block", limit=1)[0]
    assert check_completion(safim, safim.middle).passed
    wrong = check_completion(safim, "print(0)\n        continue")
    assert wrong.status == "failed" and "wrong output" in wrong.detail


# ---- autoregressive decoding ---------------------------------------------------------------------


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    yield 1
    torch.set_num_threads(before)


class ForcedLogits:
    """Wraps the head: from call `eos_at` on EOS wins; before it (and always when None) EOS loses."""

    def __init__(self, head, eos: int, eos_at: int | None) -> None:
        self.head, self.eos, self.eos_at, self.calls = head, eos, eos_at, 0

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        logits = self.head(hidden).clone()
        logits[..., self.eos] = 1e4 if self.eos_at is not None and self.calls >= self.eos_at else -1e4
        return logits


REQUEST = InfillRequest(
    prefix="def add(a, b):\n    return ", suffix="\n", language="python", max_new_tokens=5
)


def _engine_with_head(model_dir: Path, threads: int, eos_at: int | None):
    engine = load_engine(str(model_dir), device="cpu", threads=threads)
    eos = next(iter(engine.format.eos_ids))
    engine.backbone.next_token_logits = ForcedLogits(engine.backbone.next_token_logits, eos, eos_at)
    return engine


def test_ar_decoding_stops_at_eos(tiny_model_dir, one_thread):
    engine = _engine_with_head(tiny_model_dir, one_thread, eos_at=3)
    result = decode_autoregressive(engine, REQUEST)
    assert result.stop_reason == "eos"
    assert len(result.candidates[0].token_ids) == 2
    assert result.steps == 3 and result.tokens_per_forward == 1.0


def test_ar_decoding_stops_at_max_tokens_and_keeps_the_cache_in_step(tiny_model_dir, one_thread):
    engine = _engine_with_head(tiny_model_dir, one_thread, eos_at=None)
    result = decode_autoregressive(engine, REQUEST)
    tokens = list(result.candidates[0].token_ids)
    assert result.stop_reason == "max_tokens"
    assert len(tokens) == 5 and result.steps == 5 and result.tokens_per_forward == 1.0
    # The last token is never fed back; everything before it is in the cache and recorded.
    prompt = engine.prompt_ids(REQUEST)
    assert engine.prompt_cache.tokens == prompt + tokens[:-1]
    assert engine.prompt_cache.cache.get_seq_length() == len(prompt) + 4


def test_ar_decoding_with_the_kv_cache_matches_recomputing_everything(tiny_model_dir, one_thread):
    engine = load_engine(str(tiny_model_dir), device="cpu", threads=one_thread)
    request = InfillRequest(prefix="x = [1, 2", suffix="]\n", language="python", max_new_tokens=8)
    result = decode_autoregressive(engine, request)
    sequence, expected = engine.prompt_ids(request), []
    with torch.inference_mode():
        for _ in range(request.max_new_tokens):
            hidden = engine.backbone.encode(torch.tensor([sequence]), engine.backbone.new_cache())
            token = int((engine.backbone.next_token_logits(hidden[0, -1]) + engine.bias).argmax())
            if token in engine.format.eos_ids:
                break
            expected.append(token)
            sequence.append(token)
    assert list(result.candidates[0].token_ids) == expected


# ---- the CLI end to end --------------------------------------------------------------------------

COMPLETION_KEYS = {
    "text", "offered", "origin", "mode", "tokens", "stop_reason", "exact", "edit_similarity", "passed",
    "execution",
    "steps", "draft_forwards", "tokens_per_forward", "latency_ms", "engine_ms", "prefill_ms",
}  # fmt: skip


def _run_cli(tiny_model_dir: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "eval.json"
    argv = ["humaneval-single", "--limit", "2", "--model", str(tiny_model_dir), "--device", "cpu"]
    assert cli.main([*argv, "--threads", "1", "--budget-ms", "0", "--json", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_eval_end_to_end_diffusion_only(tiny_model_dir, tmp_path, one_thread, capsys):
    report = _run_cli(tiny_model_dir, tmp_path)
    table = capsys.readouterr().out
    assert "humaneval-single" in table and "diffusion" in table and "autoregressive" not in table
    assert report["benchmark"] == "humaneval-single" and report["speed"] is None
    assert [s["decoder"] for s in report["summaries"]] == ["diffusion", "copy"]  # the no-model baseline
    summary = report["summaries"][0]
    assert summary["n"] == 2 and summary["pass_at_1"] == 0.0 and summary["exact_match"] == 0.0
    assert summary["p50_ms"] <= summary["p95_ms"] and 0 <= summary["offered"] <= 1
    ids = [row["id"] for row in report["rows"]]
    assert ids == ["SingleLineInfilling/HumanEval/0/L0", "SingleLineInfilling/HumanEval/0/L1"]
    for row in report["rows"]:
        completion = row["completions"]["diffusion"]
        assert set(completion) == COMPLETION_KEYS
        assert completion["passed"] is False and completion["execution"] in ("failed", "timeout")
        # The cursor sits on the empty line a whole-line gap leaves, the body going on below it: one line.
        assert completion["mode"] == "single_line" and completion["tokens"] <= 32
        assert completion["offered"] == bool(completion["text"])
        assert not row["reference"].endswith("\n")


def test_eval_end_to_end_compare_ar(tiny_model_dir, tmp_path, one_thread, capsys):
    report = _run_cli(tiny_model_dir, tmp_path, "--compare-ar", "--max-steps", "4")
    assert "autoregressive" in capsys.readouterr().out
    assert [s["decoder"] for s in report["summaries"]] == ["diffusion", "autoregressive", "copy"]
    assert report["summaries"][1]["tokens_per_forward"] == 1.0
    assert report["options"]["max_steps"] == 4
    for row in report["rows"]:
        diffusion, ar = row["completions"]["diffusion"], row["completions"]["autoregressive"]
        assert diffusion["steps"] <= 4 * 6 + 6  # 96 tokens: six canvases of 16; a repair pass of 6
        assert diffusion["draft_forwards"] <= 16  # a next-token draft fills at most the first canvas
        assert ar["stop_reason"] in ("eos", "max_tokens") and ar["tokens"] <= 96
        ended = ar["stop_reason"] == "eos"
        assert ar["steps"] == ar["tokens"] + ended
        assert all(0 < c["prefill_ms"] < c["engine_ms"] for c in (diffusion, ar))
    speed = report["speed"]
    assert set(speed) == {
        "rows", "min_tokens", "max_tokens", "diffusion_tokens_per_s", "autoregressive_tokens_per_s", "ratio",
        "diffusion_decode_tokens_per_s", "autoregressive_decode_tokens_per_s", "decode_ratio",
    }  # fmt: skip
    assert (speed["min_tokens"], speed["max_tokens"]) == (4, 64)
    if speed["rows"]:
        ratio = speed["diffusion_tokens_per_s"] / speed["autoregressive_tokens_per_s"]
        assert speed["ratio"] == pytest.approx(ratio)
        # Without the prefill each decoder is faster than with it, by its rows' own prefill time
        assert speed["diffusion_decode_tokens_per_s"] > speed["diffusion_tokens_per_s"]
        assert speed["autoregressive_decode_tokens_per_s"] > speed["autoregressive_tokens_per_s"]


def test_the_model_alone_drafts_for_itself_and_copies_nothing(tiny_model_dir, tmp_path, one_thread):
    alone = server_options(EvalOptions(context_drafts=False), "diffusion").completion
    assert not alone.drafts and alone.next_token_draft  # its own head drafts for its canvas
    nothing = server_options(EvalOptions(drafts=False), "diffusion").completion
    assert not nothing.drafts and not nothing.next_token_draft  # the canvas from noise
    report = _run_cli(tiny_model_dir, tmp_path, "--no-context-drafts")
    assert report["options"]["context_drafts"] is False and report["options"]["next_token_draft"] is True
    origins = {row["completions"]["diffusion"]["origin"] for row in report["rows"]}
    assert not origins & {"lookup", "structure"}
