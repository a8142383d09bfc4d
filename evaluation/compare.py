"""`python -m evaluation.compare --base A.json --new B.json`: is one model better than another on the
same rows, beyond what chance moves?

A model replaces the shipped one only when it wins on the report sets, and two nearly equal weight
versions move a held-out set's edit similarity by a few hundredths. So this pairs the two eval JSONs
row by row (several files on each side pool their rows, e.g. the three held-out languages) and gives
each difference of means a paired bootstrap interval: a difference counts only when its interval
excludes zero.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DECODER = "diffusion"
CONFIDENCE = 0.95


class CompareError(ValueError):
    """The files cannot be compared row by row (missing, malformed, or not the same rows)."""


@dataclass(frozen=True)
class RowScore:
    """One row's shown completion, scored as the eval wrote it (nothing shown: the empty text's scores)."""

    kind: str
    source: str  # the set it came from: "heldout python", "santacoder-fim py"
    exact: bool
    edit_similarity: float


@dataclass(frozen=True)
class Difference:
    """New minus base over the same rows: the means, and a paired bootstrap interval of the difference."""

    base: float
    new: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return "better"
        if self.high < 0:
            return "worse"
        return "within noise"


@dataclass(frozen=True)
class Comparison:
    """How a group of rows moved from base to new."""

    group: str  # "all", a set or a row kind
    n: int
    exact_match: Difference
    edit_similarity: Difference
    better: int  # rows whose edit similarity rose
    worse: int


def load_rows(paths: Sequence[Path], decoder: str = DECODER) -> dict[str, RowScore]:
    """Rows by id from one or more eval JSONs (`dgemma-lsp eval ... --json`), pooled."""
    rows: dict[str, RowScore] = {}
    for path in paths:
        try:
            report = json.loads(path.read_text())
            source = f"{report['benchmark']} {report['language']}"
            for row in report["rows"]:
                shown = row["completions"][decoder]
                if row["id"] in rows:
                    raise CompareError(f"{path}: row {row['id']} appears twice on one side")
                rows[row["id"]] = RowScore(
                    kind=row.get("kind") or "",
                    source=source,
                    exact=bool(shown["exact"]),
                    edit_similarity=float(shown["edit_similarity"]),
                )
        except OSError as error:
            raise CompareError(f"{path}: {error.strerror}") from error
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise CompareError(f"{path}: not an eval JSON with {decoder!r} rows ({error!r})") from error
    return rows


def paired_difference(
    base: Sequence[float], new: Sequence[float], resamples: int, rng: random.Random
) -> Difference:
    """Means of both, and the central CONFIDENCE interval of mean(new - base) over resampled rows."""
    diffs = [b - a for a, b in zip(base, new, strict=True)]
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - CONFIDENCE) / 2
    return Difference(
        base=sum(base) / n,
        new=sum(new) / n,
        low=means[int(tail * (resamples - 1))],
        high=means[int((1 - tail) * (resamples - 1))],
    )


def compare(
    base: dict[str, RowScore], new: dict[str, RowScore], resamples: int = 2000, seed: int = 0
) -> list[Comparison]:
    """All rows, then each set (when several are pooled) and each row kind: the same rows on both
    sides, or a CompareError."""
    if base.keys() != new.keys():
        only_base, only_new = len(base.keys() - new.keys()), len(new.keys() - base.keys())
        raise CompareError(f"not the same rows: {only_base} only in base, {only_new} only in new")
    if not base:
        raise CompareError("no rows to compare")
    if resamples < 1:
        raise CompareError(f"resamples must be at least 1, not {resamples}")
    rng = random.Random(seed)
    ids = sorted(base)
    sources = sorted({base[i].source for i in ids})
    kinds = sorted({base[i].kind for i in ids if base[i].kind})
    groups = [("all", ids)]
    if len(sources) > 1:
        groups += [(source, [i for i in ids if base[i].source == source]) for source in sources]
    groups += [(kind, [i for i in ids if base[i].kind == kind]) for kind in kinds]
    found = []
    for group, members in groups:
        before, after = [base[i] for i in members], [new[i] for i in members]
        found.append(
            Comparison(
                group=group,
                n=len(members),
                exact_match=paired_difference(
                    [float(r.exact) for r in before], [float(r.exact) for r in after], resamples, rng
                ),
                edit_similarity=paired_difference(
                    [r.edit_similarity for r in before], [r.edit_similarity for r in after], resamples, rng
                ),
                better=sum(b.edit_similarity > a.edit_similarity for a, b in zip(before, after, strict=True)),
                worse=sum(b.edit_similarity < a.edit_similarity for a, b in zip(before, after, strict=True)),
            )
        )
    return found


def render(comparisons: Sequence[Comparison]) -> str:
    """A markdown table: each group's EM and ES before and after, the interval and the verdict."""
    lines = [
        "| rows | n | EM base -> new (95% interval of the difference) | ES base -> new (95% interval) "
        "| rows better / worse | ES verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in comparisons:
        em, es = c.exact_match, c.edit_similarity
        lines.append(
            f"| {c.group} | {c.n} | {em.base:.1%} -> {em.new:.1%} ({em.low:+.1%} .. {em.high:+.1%}) "
            f"| {es.base:.3f} -> {es.new:.3f} ({es.low:+.3f} .. {es.high:+.3f}) "
            f"| {c.better} / {c.worse} | {es.verdict} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.compare", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--base", type=Path, nargs="+", required=True, help="eval JSONs of the shipped model")
    parser.add_argument("--new", type=Path, nargs="+", required=True, help="eval JSONs of the candidate")
    parser.add_argument("--decoder", default=DECODER, help="which decoder's completions (default: diffusion)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default: 2000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        comparisons = compare(
            load_rows(args.base, args.decoder), load_rows(args.new, args.decoder), args.resamples, args.seed
        )
    except CompareError as error:
        print(f"evaluation.compare: {error}", file=sys.stderr)
        return 2
    print(render(comparisons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
