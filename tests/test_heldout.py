"""The held-out FIM set: its files load, its records are whole files cut at real syntactic units, its
sources are held out from training, and the copy baseline behaves."""

from __future__ import annotations

import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import PurePosixPath

import pytest

from evaluation.baselines import copy_completion, score_copy_baseline
from evaluation.benchmarks import Item, load_items
from evaluation.heldout.cuts import (
    ALL_KINDS,
    KINDS,
    LINES_PER_FILE,
    FileSyntax,
    candidate_cuts,
    line_cuts,
    positions,
)
from evaluation.heldout.records import DATA_DIR, OUTPUTS, HeldoutRecord, read_records
from evaluation.heldout.sources import ALL_SOURCES, SOURCES
from evaluation.heldout.syntax import parses_cleanly
from training.corpus.licenses import PERMISSIVE
from training.corpus.sources.debian import DEBIAN_SPECS
from training.corpus.sources.npm import NPM_PACKAGES
from training.corpus.sources.pypi import PYPI_PACKAGES

MINIMUM = {"python": 200, "python-calibration": 150, "typescript": 60, "lua": 60}


def all_records() -> Iterator[HeldoutRecord]:
    for name in OUTPUTS:
        yield from read_records(name)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def records() -> list[HeldoutRecord]:
    return list(all_records())


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_each_file_loads_as_a_benchmark_with_its_kinds(name):
    items = load_items("heldout", language=name, root="/nonexistent")  # ships in the repo
    assert len(items) >= MINIMUM[name]
    language, _ = OUTPUTS[name]
    assert {i.language for i in items} == {language}
    kinds = Counter(i.kind for i in items)
    assert set(kinds) == set(ALL_KINDS)
    drawn_together = len(items) - kinds["line"]
    for kind in KINDS:  # steered to 40/30/30
        assert 0.2 <= kinds[kind] / drawn_together <= 0.5, kinds
    assert 0.15 <= kinds["line"] / len(items) <= 0.3, kinds  # drawn on their own, on top
    assert all(i.single_line == (i.kind != "block") and i.check is None for i in items)
    assert load_items("heldout", limit=3, language=name)[0].id == items[0].id


def test_python_is_the_default_language_and_aliases_work():
    assert load_items("heldout", limit=2)[0].language == "python"
    assert load_items("heldout", limit=1, language="ts")[0].language == "typescript"
    with pytest.raises(ValueError):
        load_items("heldout", language="rust")


def test_the_set_stays_small():
    assert sum((DATA_DIR / f"{name}.jsonl").stat().st_size for name in OUTPUTS) < 6_000_000


def test_ids_are_unique_and_records_are_complete(records):
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids))
    sources = {s.id: s for s in SOURCES}
    for r in records:
        source = sources[r.source]
        assert (r.language, r.split) == (source.language, source.split)
        assert r.kind in ALL_KINDS
        assert r.license and all(part in PERMISSIVE for part in r.license.split(" AND "))
        assert any(ch.isalnum() for ch in r.middle)


def test_every_record_is_its_whole_file_cut_at_a_syntactic_unit(records):
    by_file: dict[tuple[str, str], list[HeldoutRecord]] = defaultdict(list)
    for r in records:
        by_file[(r.source, r.path)].append(r)
    for (_, path), cuts in by_file.items():
        text, language = cuts[0].text, cuts[0].language
        assert all(c.text == text for c in cuts), path  # one file, one text
        assert parses_cleanly(text, language, path), path  # the build kept clean parses only
        assert len(cuts) <= 3 + LINES_PER_FILE
        syntax = FileSyntax(text, language, path)
        offered = {(kind, c.start, c.end) for kind, found in candidate_cuts(syntax).items() for c in found}
        offered |= {("line", c.start, c.end) for c in line_cuts(syntax)}
        for c in cuts:
            start = len(c.prefix.encode())
            assert (c.kind, start, start + len(c.middle.encode())) in offered, c.id
            if c.kind == "block":
                assert 2 <= len(c.middle.strip("\n").splitlines()) <= 12
            else:
                assert "\n" not in c.middle
            if c.kind == "expression":
                assert c.suffix.split("\n", 1)[0].strip()  # code follows on the line
            if c.kind == "line":  # an emptied line: its indentation before the cursor, nothing after
                assert not c.prefix.rsplit("\n", 1)[-1].strip() and c.suffix[:1] in ("\n", "")


def test_report_and_calibration_sources_are_disjoint(records):
    splits: dict[str, set[str]] = defaultdict(set)
    for r in records:
        splits[r.split].add(r.source)
    assert splits["report"] and splits["calibration"]
    assert not splits["report"] & splits["calibration"]
    listed = {s.split: set() for s in SOURCES}
    for s in SOURCES:
        listed[s.split].add(s.name)
    assert not listed["report"] & listed["calibration"]


def test_no_heldout_source_is_a_training_source(records):
    training = {
        "pypi": {_norm(n) for n in PYPI_PACKAGES},
        "npm": set(NPM_PACKAGES),
        "debian": {spec.package for spec in DEBIAN_SPECS},
    }
    for source in ALL_SOURCES:  # the cross-file subset's own sources too
        name = _norm(source.name) if source.registry == "pypi" else source.name
        assert name not in training[source.registry], source.id
    # Nor CPython's standard library: no Python record comes from a stdlib module's tree.
    tops = {PurePosixPath(r.path).parts[0].removesuffix(".py") for r in records if r.language == "python"}
    assert not tops & set(sys.stdlib_module_names)


def test_positions_rebuild_the_file_and_follow_the_seed():
    lines = [f"def f{i}(a, b):\n    total = helper(a, b[{i}])\n    return total + {i}\n\n" for i in range(15)]
    text = "".join(lines)
    first = positions(text, "python", random.Random(7), Counter())
    again = positions(text, "python", random.Random(7), Counter())
    assert first == again and 1 <= len(first) <= 3
    for p in first:
        assert p.prefix + p.middle + p.suffix == text


# ---- the copy baseline -------------------------------------------------------------------------


def test_copy_baseline_completes_a_planted_repeat():
    prefix = "rows = load_rows(path, strict=True)\nprint(rows)\nother = load_rows("
    assert copy_completion(prefix, "\n", "rest_of_line") == "path, strict=True)"
    # The text the suffix already holds on the cursor's line is not proposed again.
    assert copy_completion(prefix, ")\n", "expression") == "path, strict=True"


def test_copy_baseline_copies_a_planted_block_body():
    earlier = "    def close(self):\n        self.flush()\n        self.closed = True\n\n"
    at_header_end = copy_completion(earlier + "    def close(self):", "\n", "block")
    assert at_header_end == "\n        self.flush()\n        self.closed = True"
    on_body_line = copy_completion(earlier + "    def close(self):\n        ", "\n", "block")
    assert on_body_line == "self.flush()\n        self.closed = True"


def test_copy_baseline_writes_an_emptied_line_from_the_line_after_an_earlier_match():
    earlier = "    total = compute(x)\n    check(total)\n\n"
    assert copy_completion(earlier + "    total = compute(x)\n    ", "\n", "line") == "check(total)"
    # The longest end of the line above that ends an earlier line: "(x)" is too short, "compute(x)" is not.
    assert copy_completion(earlier + "    other = compute(x)\n    ", "\n", "line") == "check(total)"
    assert copy_completion("alpha = 1\nbeta = 2\n", "\n", "line") == ""


def test_copy_baseline_is_empty_when_nothing_repeats():
    assert copy_completion("alpha = 1\nbeta = compute(", ")\n", "expression") == ""
    assert copy_completion("", "", "rest_of_line") == ""
    assert copy_completion("def f():\n    ", "\n", "block") == ""


def test_copy_baseline_is_scored_by_kind():
    prefix = "value = table.lookup(key)\nvalue = table.lookup("
    items = [
        Item("a", "python", prefix, "\n", "key)", True, kind="rest_of_line"),
        Item("b", "python", "x = 1\ny = ", "\n", "2", True, kind="rest_of_line"),
        Item("c", "python", "def f():", "\n", "\n    return 1", False, kind="block"),
    ]
    scores = {s.kind: s for s in score_copy_baseline(items)}
    assert list(scores) == ["block", "rest_of_line", "all"]
    assert scores["rest_of_line"].n == 2 and scores["rest_of_line"].exact_match == 0.5
    assert scores["block"].exact_match == 0.0 and scores["block"].proposed == 0.0
    assert scores["all"].n == 3
    assert 0.0 < scores["all"].edit_similarity < 1.0


# ---- the copy baseline with the repository: other files searched after the file's own text ----------


def test_the_copy_heuristic_finds_a_repeat_only_in_another_file():
    prefix = "def main():\n    rows = load_rows("
    other = "def helper(path):\n    rows = load_rows(path, strict=True)\n    return rows\n"
    assert copy_completion(prefix, ")\n", "expression") == ""
    assert copy_completion(prefix, ")\n", "expression", [other]) == "path, strict=True"
    assert copy_completion(prefix, "\n", "rest_of_line", ["unrelated = 1\n", other]) == "path, strict=True)"


def test_the_longest_match_wins_and_the_files_own_on_a_tie():
    prefix = "x = compute(a)\nresult = compute("
    assert copy_completion(prefix, "\n", "rest_of_line", ["y = compute(b)\n"]) == "a)"  # same key: own
    longer = "result = compute(b, c)\n"
    assert copy_completion(prefix, "\n", "rest_of_line", [longer]) == "b, c)"  # longer key: the other file


def test_block_and_line_proposals_come_from_another_file():
    other = (
        "    def close(self):\n        self.flush()\n        self.closed = True\n\n"
        "    total = compute(x)\n    check(total)\n"
    )
    assert copy_completion("class A:\n    def close(self):", "\n", "block", [other]) == (
        "\n        self.flush()\n        self.closed = True"
    )
    assert copy_completion("def f():\n    total = compute(x)\n    ", "\n", "line", [other]) == "check(total)"
    assert copy_completion("def f():\n    total = compute(x)\n    ", "\n", "line") == ""


def test_the_baseline_is_scored_with_each_rows_own_other_files():
    items = [
        Item("a", "python", "rows = load_rows(", "\n", "path)", True, kind="rest_of_line"),
        Item("b", "python", "rows = load_rows(", "\n", "path)", True, kind="rest_of_line"),
    ]
    others = {"a": ["x = load_rows(path)\n"], "b": ["nothing here\n"]}
    alone = {s.kind: s for s in score_copy_baseline(items)}
    with_repo = {s.kind: s for s in score_copy_baseline(items, others=lambda item: others[item.id])}
    assert alone["all"].exact_match == 0.0 and with_repo["all"].exact_match == 0.5
