"""Text metrics: exact match under a benchmark's convention, and edit similarity.

Edit similarity is 1 - Levenshtein(a, b) / max(len(a), len(b)) over characters, computed here
(insertions, deletions and substitutions all cost 1), on the same normalised texts exact match
compares, so that a similarity of 1.0 means an exact match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evaluation.benchmarks import Convention


def normalize(text: str, convention: Convention) -> str:
    if convention == "line":
        return text.strip()
    return " ".join(text.split())


def exact_match(completion: str, reference: str, convention: Convention) -> bool:
    return normalize(completion, convention) == normalize(reference, convention)


def levenshtein(a: str, b: str) -> int:
    # Common ends cost nothing; trimming them first keeps the quadratic part small.
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    a, b = a[start : len(a) - end], b[start : len(b) - end]
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def edit_similarity(completion: str, reference: str, convention: Convention) -> float:
    a, b = normalize(completion, convention), normalize(reference, convention)
    if not a and not b:
        return 1.0
    return 1.0 - levenshtein(a, b) / max(len(a), len(b))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
