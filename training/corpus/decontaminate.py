"""Decontamination: an index of the evaluation programs that a corpus file must not overlap."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from training.corpus.dedup import normalized_lines

DECONTAM_SHINGLE = 8  # consecutive significant lines
DECONTAM_MIN_LINE = 8  # characters; shorter lines ("}", "else:", "return x") are too common
DECONTAM_LONG_LINE = 50  # characters; a line this long is nearly a fingerprint
DECONTAM_MIN_SNIPPET = 120  # characters a short program needs before it is indexed whole
# A shingle found in this many distinct benchmark programs is boilerplate (a license header, the
# MultiPL-E Java imports), not evidence: indexing it would flag every file with the same header.
DECONTAM_GENERIC_DF = 5


# Import blocks are sorted boilerplate that unrelated files share (8 java.io imports in a row).
_IMPORT_LINE = re.compile(r"^(?:import|from \S+ import|#\s*include|#import|using|package)\b")


def significant_lines(text: str) -> list[str]:
    return [
        line
        for line in normalized_lines(text)
        if len(line) >= DECONTAM_MIN_LINE and not _IMPORT_LINE.match(line)
    ]


def _hash64(text: str) -> int:
    # 64 bits: with ~10^5 benchmark shingles and ~10^7 corpus windows, 32-bit hashes would
    # collide hundreds of times and drop innocent files.
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def window_shingles(lines: list[str]) -> set[int]:
    """Hashes of every run of DECONTAM_SHINGLE significant lines; a short program whole."""
    k = DECONTAM_SHINGLE
    if len(lines) >= k:
        return {_hash64("\n".join(lines[i : i + k])) for i in range(len(lines) - k + 1)}
    if len(lines) >= 3 and sum(map(len, lines)) >= DECONTAM_MIN_SNIPPET:
        return {_hash64("\n".join(lines))}
    return set()


def long_line_hashes(lines: list[str]) -> set[int]:
    return {_hash64(line) for line in lines if len(line) >= DECONTAM_LONG_LINE}


# Benchmarks built from HumanEval, whose prompts (signature + docstring) get copied on their own.
# SAFIM's programs are ordinary repository files: their long lines are shared with much real code
# (e.g. BERT layers), so only runs of lines count there.
LONG_LINE_BENCHMARKS = frozenset({"human-eval-infilling", "santacoder-fim", "cody-humaneval"})


@dataclass
class BenchmarkIndex:
    """Fingerprints of every benchmark program (and of the held-out FIM set, named HELDOUT, indexed
    like a benchmark without HumanEval's long-line rule). A corpus file is contaminated when it shares a run
    of 8 significant lines (or a whole short program) with one, or at least two long lines of a
    HumanEval-derived one: that rule catches a prompt (signature and docstring) copied alone."""

    windows: dict[int, str] = field(default_factory=dict)  # shingle -> benchmark name
    long_lines: dict[int, str] = field(default_factory=dict)
    widths: set[int] = field(default_factory=lambda: {DECONTAM_SHINGLE})  # window sizes indexed
    programs: int = 0

    @classmethod
    def from_texts(cls, texts: dict[str, Iterable[str]]) -> BenchmarkIndex:
        return cls.from_programs((name, text) for name, items in texts.items() for text in items)

    @classmethod
    def from_folder(cls, folder: Path, heldout: Path | None = None) -> BenchmarkIndex:
        """The benchmarks in `folder`, and the project's held-out FIM set when `heldout` is a folder."""
        programs = benchmark_programs(folder)
        if heldout is not None and heldout.is_dir():
            programs = chain(programs, heldout_programs(heldout))
        return cls.from_programs(programs)

    @classmethod
    def from_programs(cls, programs: Iterable[tuple[str, str]]) -> BenchmarkIndex:
        """Index distinct programs; infill variants of one program (same full text) count once."""
        index = cls()
        owner: dict[int, str] = {}
        window_df: Counter[int] = Counter()
        line_df: Counter[int] = Counter()
        seen: set[int] = set()
        for name, text in programs:
            lines = significant_lines(text)
            key = _hash64("\n".join(lines))  # variants differ in blank lines and indentation
            if key in seen:
                continue
            seen.add(key)
            index.programs += 1
            if 3 <= len(lines) < DECONTAM_SHINGLE:
                index.widths.add(len(lines))
            longs = long_line_hashes(lines) if name in LONG_LINE_BENCHMARKS else set()
            for table, df, hashes in (
                (index.windows, window_df, window_shingles(lines)),
                (index.long_lines, line_df, longs),
            ):
                for h in hashes:
                    df[h] += 1
                    owner.setdefault(h, name)
                    table[h] = owner[h]
        for table, df in ((index.windows, window_df), (index.long_lines, line_df)):
            for h, n in df.items():
                if n >= DECONTAM_GENERIC_DF:
                    del table[h]
        return index

    def hit(self, text: str) -> str | None:
        """Name of the benchmark this file overlaps, or None."""
        lines = significant_lines(text)
        for width in sorted(self.widths, reverse=True):
            for i in range(len(lines) - width + 1):
                if (name := self.windows.get(_hash64("\n".join(lines[i : i + width])))) is not None:
                    return name
        matched = [self.long_lines[h] for h in long_line_hashes(lines) if h in self.long_lines]
        return matched[0] if len(matched) >= 2 else None


def _read_jsonl(path: Path) -> Iterator[dict[str, object]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _s(row: dict[str, object], key: str) -> str:
    value = row.get(key)
    return value if isinstance(value, str) else ""


def _program(benchmark: str, row: dict[str, object]) -> str:
    """The whole original program of one benchmark row (prefix + middle + suffix, with tests)."""
    if benchmark == "human-eval-infilling":
        return _s(row, "prompt") + _s(row, "canonical_solution") + _s(row, "suffix") + "\n" + _s(row, "test")
    if benchmark == "safim":
        return _s(row, "eval_prompt").replace("{{completion}}", _s(row, "ground_truth"))
    if benchmark == "santacoder-fim":
        parts = (_s(row, "prompt"), _s(row, "canonical_solution"), _s(row, "suffix"), _s(row, "tests"))
        return "\n".join(parts)
    return _s(row, "prefix") + _s(row, "middle") + _s(row, "suffix") + "\n" + _s(row, "test")


BENCHMARKS = ("human-eval-infilling", "safim", "santacoder-fim", "cody-humaneval")


def benchmark_programs(folder: Path) -> Iterator[tuple[str, str]]:
    """(benchmark, program) for every row of every benchmark file in the folder."""
    for benchmark in BENCHMARKS:
        for path in sorted((folder / benchmark).glob("*.jsonl*")):
            for row in _read_jsonl(path):
                yield benchmark, _program(benchmark, row)


HELDOUT = "heldout"  # the name its hits have in the manifest


def heldout_programs(folder: Path) -> Iterator[tuple[str, str]]:
    """(HELDOUT, prefix + middle + suffix) for every record of every *.jsonl below the folder."""
    for path in sorted(folder.rglob("*.jsonl")):
        for row in _read_jsonl(path):
            yield HELDOUT, _s(row, "prefix") + _s(row, "middle") + _s(row, "suffix")
