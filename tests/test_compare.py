"""The ship check's paired comparison, on eval JSONs written the way `dgemma-lsp eval --json` writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.compare import CompareError, compare, load_rows, main
from evaluation.metrics import edit_similarity
from evaluation.runner import EvalOptions, EvalReport, RowResult, Scored

REFERENCE = "return total / len(values)"


def _scored(text: str) -> Scored:
    return Scored(
        text=text, offered=bool(text), origin="next_token" if text else "", mode="single_line",
        tokens=len(text.split()), stop_reason="eos", exact=text == REFERENCE,
        edit_similarity=edit_similarity(text, REFERENCE, "line") if text else 0.0, passed=None, execution="",
        steps=1, draft_forwards=0, tokens_per_forward=1.0, latency_ms=1.0, engine_ms=1.0, prefill_ms=0.5,
    )  # fmt: skip


def _write(path: Path, language: str, texts: list[str], kinds: list[str] | None = None) -> Path:
    rows = [
        RowResult(
            id=f"{language}/{i}",
            kind=kinds[i] if kinds else "",
            reference=REFERENCE,
            completions={"diffusion": _scored(text)},
        )
        for i, text in enumerate(texts)
    ]
    report = EvalReport(
        benchmark="heldout", language=language, model={}, options=EvalOptions(), network_block="", rows=rows
    )
    path.write_text(json.dumps(report.to_json()))
    return path


def test_a_candidate_right_on_rows_the_shipped_model_missed_is_better_beyond_noise(tmp_path):
    kinds = ["line", "block"] * 20
    base = _write(tmp_path / "base.json", "python", ["return total"] * 40, kinds)
    new = _write(tmp_path / "new.json", "python", [REFERENCE] * 30 + ["return total"] * 10, kinds)

    found = compare(load_rows([base]), load_rows([new]))

    overall = found[0]
    assert (overall.group, overall.n, overall.better, overall.worse) == ("all", 40, 30, 0)
    assert overall.exact_match.base == 0.0 and overall.exact_match.new == 0.75
    assert overall.edit_similarity.low > 0 and overall.edit_similarity.verdict == "better"
    assert [c.group for c in found] == ["all", "block", "line"]
    assert sum(c.n for c in found[1:]) == 40


def test_rows_that_trade_places_are_within_noise_and_a_row_not_shown_scores_zero(tmp_path):
    base = _write(tmp_path / "base.json", "python", [REFERENCE, ""] * 20)
    new = _write(tmp_path / "new.json", "python", ["", REFERENCE] * 20)

    (overall,) = compare(load_rows([base]), load_rows([new]))

    assert overall.edit_similarity.base == overall.edit_similarity.new == 0.5
    assert overall.edit_similarity.low < 0 < overall.edit_similarity.high
    assert overall.edit_similarity.verdict == "within noise"
    assert (overall.better, overall.worse) == (20, 20)


def test_pooled_sets_are_reported_each_on_its_own_too(tmp_path):
    base = [
        _write(tmp_path / "bp.json", "python", ["return"] * 5),
        _write(tmp_path / "bl.json", "lua", ["return"] * 3),
    ]
    new = [
        _write(tmp_path / "nl.json", "lua", [REFERENCE] * 3),
        _write(tmp_path / "np.json", "python", ["return"] * 5),
    ]

    found = {c.group: c for c in compare(load_rows(base), load_rows(new))}

    assert found["all"].n == 8
    assert found["heldout lua"].n == 3 and found["heldout lua"].edit_similarity.new == 1.0
    assert found["heldout python"].edit_similarity.verdict == "within noise"


def test_files_of_different_rows_or_not_eval_json_are_refused_clearly(tmp_path, capsys):
    base = _write(tmp_path / "base.json", "python", ["return"] * 4)
    other = _write(tmp_path / "other.json", "lua", ["return"] * 4)
    junk = tmp_path / "junk.json"
    junk.write_text('{"rows": [{"id": "x"}]}')

    with pytest.raises(CompareError, match="4 only in base, 4 only in new"):
        compare(load_rows([base]), load_rows([other]))
    with pytest.raises(CompareError, match=r"junk\.json: not an eval JSON"):
        load_rows([junk])
    with pytest.raises(CompareError, match="appears twice"):
        load_rows([base, base])

    assert main(["--base", str(base), "--new", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    assert main(["--base", str(base), "--new", str(base)]) == 0
    assert "| all | 4 | 0.0% -> 0.0%" in capsys.readouterr().out
