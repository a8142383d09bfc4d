"""Precision against recall of the show-or-not decision and of the gate before it, on typing sessions.

    dgemma-lsp bench typing --eagerness eager --facts --json data/typing/report-eager.json
    python -m evaluation.typing_sessions curve data/typing/report-eager.json --plot curve.png

Every suggestion an eager session showed is a row, judged as the typist judged it (taken whole or in
part, or not). Each ranking is swept over its thresholds: the decision's score (the model's
decision.json, on the suggestion's facts) and the gate that decided before it, the suggestion's mean
confidence (the next-token head's for a row it drafted, as `min_next_token_confidence_percent` reads
it). Precision is the share of shown suggestions taken, recall the share of the takeable ones still
shown. The table gives each ranking's precision at the recall of the decision's `balanced` threshold.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dgemma_lsp.inline.decision import Decision, features_of
from engine.loading import read_decision
from evaluation.typing_sessions.fit import rows_of
from evaluation.typing_sessions.typist import judge


def gate_score(facts) -> float:
    """What the gate before the decision compared with its threshold."""
    evidence = facts.evidence
    values = evidence.head_confidence or evidence.confidence
    return sum(values) / len(values) if values else 0.0


def balanced_score(decision: Decision, facts) -> float:
    """What the decision compares with balanced's threshold."""
    return decision.score(decision.probability(features_of(facts)), len(facts.text), "balanced")


def sweep(scores: np.ndarray, taken: np.ndarray) -> list[tuple[float, float, float]]:
    """(threshold, recall, precision) for every distinct score, highest threshold first."""
    order = np.argsort(-scores)
    hits = np.cumsum(taken[order])
    shown = np.arange(1, len(order) + 1)
    total = max(1, int(taken.sum()))
    return [
        (float(scores[order[i]]), float(hits[i] / total), float(hits[i] / shown[i]))
        for i in range(len(order))
    ]


def precision_at(curve: list[tuple[float, float, float]], recall: float) -> float:
    """The best precision among the points whose recall reaches `recall`."""
    return max((p for _, r, p in curve if r >= recall), default=0.0)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.typing_sessions curve", description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="eager bench typing --facts JSON files")
    parser.add_argument(
        "--model", type=Path, default=Path("engine/default"), help="the decision.json's folder"
    )
    parser.add_argument("--plot", type=Path, metavar="OUT.png")
    args = parser.parse_args(argv)
    decision = Decision.from_json(read_decision(args.model))
    if decision is None:
        raise SystemExit(f"no decision.json in {args.model}")
    rows = rows_of(args.runs)
    taken = np.array([judge(r.facts.text, r.truth).verdict != "wrong" for r in rows], dtype=float)
    decided = np.array([balanced_score(decision, r.facts) for r in rows])
    gated = np.array([gate_score(r.facts) for r in rows])
    curves = {"decision": sweep(decided, taken), "mean confidence (the gate before)": sweep(gated, taken)}
    balanced = decision.thresholds.get("balanced", 0.0)
    shown = decided >= balanced
    recall = float((taken * shown).sum() / max(1, taken.sum()))
    print(f"{len(rows)} suggestions shown by eager sessions, {int(taken.sum())} taken ({taken.mean():.1%})")
    print(f"balanced (score >= {balanced}): recall {recall:.1%}, precision {taken[shown].mean():.1%}")
    for name, curve in curves.items():
        print(f"  {name}: precision {precision_at(curve, recall):.1%} at that recall")
    ratio = precision_at(curves["decision"], recall) / max(
        1e-9, precision_at(curves["mean confidence (the gate before)"], recall)
    )
    print(f"  ratio {ratio:.2f}x")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
        for name, curve in curves.items():
            ax.plot([r for _, r, _ in curve], [p for _, _, p in curve], label=name)
        ax.axvline(recall, color="grey", linestyle=":", label=f"balanced's recall ({recall:.0%})")
        ax.set(
            xlabel="recall (takeable suggestions still shown)",
            ylabel="precision (shown ones taken)",
            ylim=(0, 1),
        )
        ax.legend(fontsize=8)
        ax.set_title(" ".join(str(p) for p in args.runs), fontsize=8)
        fig.savefig(args.plot, dpi=110)
        plt.close(fig)
    return 0
