"""What the show-or-not decision costs on the hot path: facts, features and probability of one
suggestion, at held-out cursors, with the model's shipped decision.

    python -m evaluation.bench.decision [--model engine/default] [--rows 300]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.decision import Decision, decide
from dgemma_lsp.inline.evidence import Evidence
from dgemma_lsp.inline.habits import History
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.runtime.stats import percentile
from engine.loading import read_decision
from evaluation.heldout.records import read_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.bench.decision", description=__doc__)
    parser.add_argument(
        "--model", type=Path, default=Path("engine/default"), help="a folder with decision.json"
    )
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    decision = Decision.from_json(read_decision(args.model))
    if decision is None:
        raise SystemExit(f"no decision.json in {args.model}")
    registry = LanguageRegistry()
    rng = random.Random(0)
    cases = []
    for record in list(read_records("python"))[: args.rows]:
        text = record.prefix + record.suffix
        context = build_context(
            text, len(record.prefix), count_tokens=lambda s: len(s) // 4 + 1, spec=registry.spec("python")
        )
        shown = record.middle.split("\n", 1)[0][:48] or "x"
        offsets = tuple(range(0, len(shown), 4))
        evidence = Evidence(tuple(rng.random() for _ in offsets), offsets, steps=2)
        cases.append((context, Proposal(shown, context.cursor, 0.5, "lookup", evidence)))
    history = History("typed_over", 0.2, 3)
    times = []
    for _ in range(args.repeats):
        for context, proposal in cases:
            started = time.perf_counter()
            decide((proposal,), context, history, decision, "balanced", "model")
            times.append((time.perf_counter() - started) * 1e6)
    print(f"decision of one suggestion, {len(times)} timed at {len(cases)} held-out Python cursors:")
    p50, p95, p99 = (percentile(times, q) for q in (50, 95, 99))
    print(f"  p50 {p50:.1f} us, p95 {p95:.1f} us, p99 {p99:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
