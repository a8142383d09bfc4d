"""The corpus on disk: JSONL shards per split and language, and the split of each file."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

SHARD_BYTES = 64 * 1024 * 1024


def split_of(path: str, valid_fraction: float) -> str:
    """Deterministic by file path: a rebuild puts every file in the same split."""
    bucket = int(hashlib.sha1(path.encode("utf-8")).hexdigest()[:8], 16) % 10_000
    return "valid" if bucket < valid_fraction * 10_000 else "train"


class ShardWriter:
    """JSONL shards `<split>/<language>-NNNNN.jsonl`, written as .tmp until committed."""

    def __init__(self, out: Path, split: str, language: str, shard_bytes: int = SHARD_BYTES):
        self.dir = out / split
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = language
        self.shard_bytes = shard_bytes
        self.paths: list[Path] = []
        self._fh: io.TextIOWrapper | None = None
        self._size = 0

    def write(self, record: dict[str, str]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if self._fh is None or self._size >= self.shard_bytes:
            self._open_next()
        assert self._fh is not None
        self._fh.write(line)
        self._size += len(line.encode("utf-8"))

    def _open_next(self) -> None:
        if self._fh is not None:
            self._fh.close()
        path = self.dir / f"{self.prefix}-{len(self.paths):05d}.jsonl.tmp"
        self.paths.append(path)
        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 (kept open across writes)
        self._size = 0

    def commit(self) -> list[str]:
        """Close, replace this language's previous shards, return the new shard names."""
        if self._fh is not None:
            self._fh.close()
        for old in self.dir.glob(f"{self.prefix}-*.jsonl"):
            old.unlink()
        names = []
        for tmp in self.paths:
            final = tmp.with_suffix("")
            tmp.rename(final)
            names.append(f"{self.dir.name}/{final.name}")
        return names
