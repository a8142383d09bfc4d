"""Fit the show-or-not decision on typing sessions, and choose each eagerness' point on its curve.

    dgemma-lsp bench typing --split fit --eagerness eager --facts --json data/typing/fit.json
    python -m evaluation.typing_sessions fit data/typing/fit.json --out engine/default/decision.json

Every suggestion the server considered in those sessions (with `--facts` it sends what the decision
reads of each) is a row: its features as the server computes them (`dgemma_lsp.inline.decision`),
and whether the typist took it, whole or in part. For each sure-part threshold (the suggestion cut
before the token where confidence drops, and judged again as cut), an L2-regularised logistic
regression is fitted; the probabilities each eagerness is judged by come from fits that left the
row's package out (so the chosen points are not the fit's own optimism). A point is a score
threshold, the score the probability weighted up by the characters a suggestion shows (the value
weight, VALUE_GRID: what the precision given a share of the code written asks to rank by). `balanced`
takes the most precise point that keeps at least BALANCED_CHARS of the characters taken suggestions
wrote when everything was shown; `quiet` the point with the most characters whose precision reaches
QUIET_PRECISION. The weights are written unstandardised: the server's decision is a dot product.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgemma_lsp.inline.decision import FEATURE_NAMES, VALUE_CHARS, Facts, features_of, sure_length
from evaluation.typing_sessions.typist import judge

SURE_GRID = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)
VALUE_GRID = (0.0, 0.02, 0.05, 0.1)  # what each character written adds to a suggestion's score
THRESHOLD_GRID = tuple(round(0.02 * i, 2) for i in range(1, 50))
PENALTIES = (1.0, 3.0, 10.0, 30.0, 100.0)  # L2 strengths tried (per row, on standardised features)
BALANCED_CHARS = 0.92  # of eager's characters written, at least, where balanced chooses its point
QUIET_PRECISION = 0.6


@dataclass(frozen=True)
class Row:
    """One considered suggestion: its facts, the code that followed it, and its session."""

    facts: Facts
    truth: str
    group: str  # its workspace folder (the package), for leave-one-package-out fits
    region_chars: int  # the characters of its region (for shares of the code written)
    region: str


@dataclass(frozen=True)
class Judged:
    features: np.ndarray
    taken: bool
    chars: int
    whole: bool
    length: int  # characters it shows


def rows_of(paths: list[Path]) -> list[Row]:
    """Every considered suggestion of the typing sessions in `paths` (bench typing --facts JSON)."""
    rows = []
    for path in paths:
        record = json.loads(path.read_text())
        for region in record["regions"]:
            group = region["region"].split("/", 1)[0]
            for pause in region["pauses"]:
                for message in pause["considered"]:
                    for item in message["items"]:
                        facts = Facts.from_json(item["facts"])
                        rows.append(Row(facts, pause["truth"], group, region["chars"], region["region"]))
    return rows


def judged(rows: list[Row], sure: float) -> list[Judged]:
    """Each row cut to its sure part at `sure` and judged as the typist would."""
    out = []
    for row in rows:
        facts = row.facts
        length = sure_length(facts.text, facts.evidence, sure)
        if length < len(facts.text):
            facts = facts.head(length)
        taken = judge(facts.text, row.truth)
        vector = np.array([features_of(facts).get(name, 0.0) for name in FEATURE_NAMES])
        out.append(
            Judged(vector, taken.verdict != "wrong", taken.chars, taken.verdict == "whole", len(facts.text))
        )
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, penalty: float) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression (Newton's method), on `x` as given."""
    n, d = x.shape
    design = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    ridge = np.full(d + 1, penalty)
    ridge[-1] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(design @ w, -30, 30)))
        grad = design.T @ (p - y) / n + ridge * w / n
        hess = (design * (p * (1 - p))[:, None]).T @ design / n + np.diag(ridge / n) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-7:
            break
    return w[:-1], float(w[-1])


@dataclass(frozen=True)
class Standardised:
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray) -> Standardised:
        scale = x.std(axis=0)
        return cls(x.mean(axis=0), np.where(scale > 1e-9, scale, 1.0))

    def apply(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean) / self.scale

    def unstandardise(self, w: np.ndarray, b: float) -> tuple[np.ndarray, float]:
        """The same model on raw features: what the server computes."""
        return w / self.scale, b - float(np.sum(w * self.mean / self.scale))


def fitted(x: np.ndarray, y: np.ndarray, penalty: float) -> tuple[np.ndarray, float]:
    """A logistic fit on standardised `x`, returned as weights on raw features."""
    standard = Standardised.of(x)
    w, b = fit_logistic(standard.apply(x), y, penalty)
    return standard.unstandardise(w, b)


def probabilities(w: np.ndarray, b: float, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(x @ w + b, -30, 30)))


def out_of_package(rows: list[Row], data: list[Judged], penalty: float) -> np.ndarray:
    """Each row's probability from a fit on the other packages' rows."""
    x = np.stack([d.features for d in data])
    y = np.array([d.taken for d in data], dtype=float)
    groups = np.array([r.group for r in rows])
    out = np.zeros(len(rows))
    for group in sorted(set(groups)):
        held = groups == group
        w, b = fitted(x[~held], y[~held], penalty)
        out[held] = probabilities(w, b, x[held])
    return out


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


@dataclass(frozen=True)
class Point:
    """What showing only the suggestions whose score reaches `threshold` would give (sure part `sure`,
    score the probability weighted by `value` per character)."""

    sure: float
    value: float
    threshold: float
    shown: int
    precision: float  # taken of shown
    whole: float  # taken whole of shown
    recall: float  # of the suggestions taken when all are shown (at sure 0), those still shown and taken
    chars: float  # characters the taken ones wrote, per character of the regions


def scores(p: np.ndarray, data: list[Judged], value: float) -> np.ndarray:
    """The decision's score of each row (`Decision.score`)."""
    length = np.minimum([d.length for d in data], VALUE_CHARS)
    return p * (1.0 + value * length)


def curve(
    sure: float, value: float, data: list[Judged], p: np.ndarray, region_chars: float, takeable: int
) -> list[Point]:
    """The points of one sure-part threshold and value weight, one per score threshold (the probability
    grid, scaled by the scores' spread where the value weight raises them above 1)."""
    score = scores(p, data, value)
    taken = np.array([d.taken for d in data])
    whole = np.array([d.whole for d in data])
    chars = np.array([d.chars for d in data], dtype=float)
    points = []
    scale = 1.0 + value * VALUE_CHARS / 2
    for threshold in (0.0, *(round(t * scale, 3) for t in THRESHOLD_GRID)):
        shown = score >= threshold
        count = int(shown.sum())
        if not count:
            break
        points.append(
            Point(
                sure=sure,
                value=value,
                threshold=threshold,
                shown=count,
                precision=float(taken[shown].mean()),
                whole=float(whole[shown].mean()),
                recall=float((taken & shown).sum() / takeable) if takeable else 0.0,
                chars=float(chars[shown].sum() / region_chars),
            )
        )
    return points


def region_characters(rows: list[Row]) -> float:
    return float(sum({r.region: r.region_chars for r in rows}.values()))


def choose(points: list[Point], eager_chars: float) -> dict[str, Point]:
    """Each eagerness' point: balanced keeps BALANCED_CHARS of eager's characters at the best
    precision; quiet the most characters at QUIET_PRECISION or better (else the most precise)."""
    keeping = [p for p in points if p.chars >= BALANCED_CHARS * eager_chars] or [
        max(points, key=lambda p: p.chars)
    ]
    balanced = max(keeping, key=lambda p: (p.precision, p.chars))
    precise = [p for p in points if p.precision >= QUIET_PRECISION and p.shown >= 20]
    quiet = max(precise, key=lambda p: p.chars) if precise else max(points, key=lambda p: p.precision)
    return {"balanced": balanced, "quiet": quiet}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.typing_sessions fit", description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="bench typing --facts JSON files (the fit split)")
    parser.add_argument("--out", type=Path, help="the decision.json to write (beside the model's weights)")
    parser.add_argument(
        "--model", default="engine/default", help="the model the sessions ran (for the record)"
    )
    parser.add_argument("--sure", type=float, help="the sure-part threshold (default: chosen on the curve)")
    parser.add_argument("--value", type=float, help="balanced's value weight per character (default: chosen)")
    parser.add_argument("--quiet-value", type=float, default=0.0, help="quiet's value weight per character")
    parser.add_argument("--balanced", type=float, help="balanced's least score (default: chosen)")
    parser.add_argument("--quiet", type=float, help="quiet's least score (default: chosen)")
    args = parser.parse_args(argv)
    rows = rows_of(args.runs)
    if not rows:
        raise SystemExit("no considered suggestions in those runs: type them with --facts")
    region_chars = region_characters(rows)
    base = judged(rows, 0.0)
    takeable = sum(d.taken for d in base)
    print(
        f"{len(rows)} suggestions from {len({r.region for r in rows})} regions, "
        f"{takeable} taken when all shown"
    )
    curves: dict[tuple[float, float], list[Point]] = {}
    fits: dict[float, float] = {}
    data_at: dict[float, list[Judged]] = {}
    balanced_values = VALUE_GRID if args.value is None else (args.value,)
    values = sorted({*balanced_values, args.quiet_value})
    for sure in SURE_GRID if args.sure is None else sorted({0.0, args.sure}):
        data = data_at[sure] = base if sure == 0 else judged(rows, sure)
        y = np.array([d.taken for d in data], dtype=float)
        held = {penalty: out_of_package(rows, data, penalty) for penalty in PENALTIES}
        losses = {penalty: log_loss(p, y) for penalty, p in held.items()}
        fits[sure] = min(losses, key=losses.get)
        for value in values:
            curves[sure, value] = curve(sure, value, data, held[fits[sure]], region_chars, takeable)
        every = curves[sure, values[0]][0]
        print(
            f"sure {sure:.1f}: penalty {fits[sure]}, held-out log loss {losses[fits[sure]]:.4f}; "
            f"all shown: precision {every.precision:.1%}, chars {every.chars:.1%}"
        )
    eager = curves[0.0, values[0]][0]
    if args.sure is None or args.value is None:
        pool = [
            p
            for (s, v), points in curves.items()
            if args.sure in (None, s) and v in balanced_values
            for p in points
        ]
        best = choose(pool, eager.chars)["balanced"]
        sure, value = best.sure, best.value
    else:
        sure, value = args.sure, args.value
    chosen = {
        "balanced": choose(curves[sure, value], eager.chars)["balanced"],
        "quiet": choose(curves[sure, args.quiet_value], eager.chars)["quiet"],
    }
    for name, fixed, weight in (("balanced", args.balanced, value), ("quiet", args.quiet, args.quiet_value)):
        if fixed is not None:
            chosen[name] = min(curves[sure, weight], key=lambda p, t=fixed: abs(p.threshold - t))
    for name, point in chosen.items():
        print(
            f"{name}: sure {point.sure}, value {point.value}, threshold {point.threshold}: precision "
            f"{point.precision:.1%}, whole {point.whole:.1%}, chars {point.chars:.1%} "
            f"(eager {eager.chars:.1%}), recall {point.recall:.1%}"
        )
    if args.out:
        data = data_at[sure]
        x = np.stack([d.features for d in data])
        y = np.array([d.taken for d in data], dtype=float)
        w, b = fitted(x, y, fits[sure])
        record = {
            "weights": {name: round(float(v), 6) for name, v in zip(FEATURE_NAMES, w, strict=True) if v != 0},
            "bias": round(b, 6),
            "thresholds": {
                "balanced": args.balanced if args.balanced is not None else chosen["balanced"].threshold,
                "quiet": args.quiet if args.quiet is not None else chosen["quiet"].threshold,
            },
            "sure": {name: sure for name in chosen},
            "value": {name: point.value for name, point in chosen.items()},
            "model": args.model,
            "fitted_on": {
                "runs": [str(path) for path in args.runs],
                "suggestions": len(rows),
                "regions": len({r.region for r in rows}),
                "packages": sorted({r.group for r in rows}),
                "penalty": fits[sure],
            },
            "estimated": {"eager": _point(eager), **{name: _point(p) for name, p in chosen.items()}},
            "command": "python -m evaluation.typing_sessions fit " + " ".join(argv),
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def _point(point: Point) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in point.__dict__.items()}
