"""Exact and near-duplicate detection (MinHash over line shingles, banded LSH)."""

from __future__ import annotations

import hashlib
import zlib

import numpy as np


def normalized_lines(text: str) -> list[str]:
    """Whitespace-insensitive lines: what survives reformatting or re-indentation."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def exact_key(text: str) -> str:
    return hashlib.sha1("\n".join(normalized_lines(text)).encode("utf-8")).hexdigest()


class MinHashDeduper:
    """Near-duplicate detection with MinHash over shingles of k consecutive normalized lines,
    banded LSH to find candidates and a signature check to confirm them.

    Line shingles (not token shingles) because code copies differ by whole edited lines (a
    changed import, a version string, a renamed function) and lines are cheap to hash. With 64
    permutations in 16 bands of 4 a pair at Jaccard 0.8 becomes a candidate with probability
    > 0.999; candidates are kept only when the estimated Jaccard reaches `threshold`.
    """

    _PRIME = (1 << 61) - 1

    def __init__(self, num_perm: int = 64, bands: int = 16, shingle: int = 3, threshold: float = 0.8):
        if num_perm % bands:
            raise ValueError("num_perm must be a multiple of bands")
        rng = np.random.default_rng(20261202)
        self.a = rng.integers(1, 1 << 29, size=num_perm, dtype=np.uint64)
        self.b = rng.integers(0, 1 << 29, size=num_perm, dtype=np.uint64)
        self.bands = bands
        self.rows = num_perm // bands
        self.shingle = shingle
        self.threshold = threshold
        self.buckets: list[dict[bytes, int]] = [{} for _ in range(bands)]
        self.signatures: list[np.ndarray] = []

    def signature(self, text: str) -> np.ndarray:
        lines = normalized_lines(text)
        k = self.shingle
        grams = ["\n".join(lines[i : i + k]) for i in range(max(1, len(lines) - k + 1))]
        hashes = np.fromiter({zlib.crc32(g.encode("utf-8")) for g in grams}, dtype=np.uint64, count=-1)
        # a < 2**29 and x < 2**32 keep a*x + b below 2**61: no uint64 overflow.
        values = (self.a[:, None] * hashes[None, :] + self.b[:, None]) % np.uint64(self._PRIME)
        return values.min(axis=1)

    def add_if_new(self, text: str) -> bool:
        """Register the text unless it near-duplicates one already added; True if registered."""
        sig = self.signature(text)
        keys = [sig[i * self.rows : (i + 1) * self.rows].tobytes() for i in range(self.bands)]
        seen: set[int] = set()
        for band, key in enumerate(keys):
            other = self.buckets[band].get(key)
            if other is None or other in seen:
                continue
            seen.add(other)
            if float(np.mean(self.signatures[other] == sig)) >= self.threshold:
                return False
        idx = len(self.signatures)
        self.signatures.append(sig)
        for band, key in enumerate(keys):
            self.buckets[band].setdefault(key, idx)
        return True
