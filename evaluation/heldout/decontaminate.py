"""Drop held-out files that share a run of 8 significant lines with a training-corpus file.

The fingerprints are training.corpus's own (normalised significant lines, 8-line windows, 64-bit
hashes), so "held out" means the same thing the corpus builder means by "not in a benchmark".
The corpus is streamed once; a corpus file is hashed only when it holds a run of 8 lines that all
occur somewhere in the held-out files, which leaves a few hundred of the 10^4 files to hash.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from training.corpus.decontaminate import DECONTAM_SHINGLE, significant_lines, window_shingles

log = logging.getLogger(__name__)

DEFAULT_CORPUS = Path("data/corpus/train")  # the training README's corpus folder, from the checkout


@dataclass
class Decontamination:
    """Which held-out files a corpus file overlaps, and what was read."""

    hits: dict[str, str] = field(default_factory=dict)  # held-out key -> first corpus path seen
    corpus_files: int = 0
    corpus_shards: list[str] = field(default_factory=list)


def corpus_shards(paths: Iterable[Path]) -> list[Path]:
    """JSONL shards: files as given, folders searched for *.jsonl."""
    shards: list[Path] = []
    for path in paths:
        shards.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return shards


def _has_run(flags: list[bool], length: int) -> bool:
    run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        if run >= length:
            return True
    return False


def decontaminate(heldout: dict[str, str], shards: list[Path]) -> Decontamination:
    """Find the held-out files (key -> text) that overlap any file of the corpus shards."""
    owners: dict[int, set[str]] = {}
    known_lines: set[str] = set()
    for key, text in heldout.items():
        lines = significant_lines(text)
        known_lines.update(lines)
        for shingle in window_shingles(lines):
            owners.setdefault(shingle, set()).add(key)
    result = Decontamination(corpus_shards=[s.name for s in shards])  # names: no machine's folders
    for shard in shards:
        with shard.open(encoding="utf-8") as rows:
            for row in rows:
                if not row.strip():
                    continue
                record = json.loads(row)
                result.corpus_files += 1
                lines = significant_lines(record.get("text", ""))
                if not _has_run([line in known_lines for line in lines], DECONTAM_SHINGLE):
                    continue
                for shingle in window_shingles(lines) & owners.keys():
                    for key in owners[shingle]:
                        result.hits.setdefault(key, str(record.get("path", shard)))
    log.info(
        "decontamination: %d corpus files read, %d held-out files hit", result.corpus_files, len(result.hits)
    )
    return result
