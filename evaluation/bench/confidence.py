"""`python -m evaluation.bench.confidence`: how often a shown token is right, by the confidence the server
reports for it (`dgemma/confidence` dims the tokens below dgemma_lsp.inline.resolving.LOW_CONFIDENCE).

For held-out rows, the suggestion the pipeline shows (no deadline, so the figures do not depend on the
machine's load), each of its tokens scored by the value the server reads (the next-token head's where it
scored the text, else the canvas's): right when the suggestion up to the token's end is a prefix of what
the user would type, read up to the first wrong token. Prints the share right per band of confidence,
and below and above the threshold.
"""

from __future__ import annotations

import argparse
import itertools
import time

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.inline.resolving import LOW_CONFIDENCE
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import load_engine
from evaluation.benchmarks import load_items
from evaluation.runner import EditorView
from training.progress import progress

BANDS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.01)


def scored_tokens(text: str, reference: str, offsets: tuple[int, ...], values: tuple[float, ...]):
    """(confidence, right) for each token of a suggestion `text` up to its first wrong one (the tokens
    after it are wrong because of it, whatever the model thought of them)."""
    ends = (*offsets[1:], len(text))
    for end, value in zip(ends, values, strict=False):
        right = reference.startswith(text[:end])
        yield value, right
        if not right:
            return


def report(name: str, band: list[bool], total: int) -> None:
    """One line: a band's tokens, their share of all, and the share of them right."""
    if band:
        share, right = 100 * len(band) / total, 100 * sum(band) / len(band)
        print(f"  confidence {name}: {len(band)} tokens ({share:.0f}%), {right:.0f}% right")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.bench.confidence", description=__doc__)
    parser.add_argument("--model", default="default")
    parser.add_argument("--language", default="python")
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args(argv)
    engine = load_engine(args.model)
    registry = LanguageRegistry()
    options = Options(completion=CompletionOptions(latency_budget_ms=0))
    tokens: list[tuple[float, bool]] = []
    shown = 0
    items = load_items("heldout", args.rows, args.language)
    for item in progress(items, len(items), "rows"):
        view = EditorView.of(item)
        snapshot = standalone(view.text, item.language, registry).snapshot()
        engine.reset_cache()
        proposals = complete(snapshot, view.cursor, options, engine, time.monotonic()).proposals
        if not proposals:
            continue
        shown += 1
        best = proposals[0]
        values = best.evidence.head_confidence or best.evidence.confidence
        tokens.extend(scored_tokens(best.text, view.reference, best.evidence.offsets, values))
    print(f"{len(items)} rows, {shown} with a suggestion, {len(tokens)} tokens up to the first wrong one")
    for low, high in itertools.pairwise(BANDS):
        report(
            f"[{low:.1f}, {min(high, 1.0):.1f}{')' if high < 1 else ']'}",
            [r for v, r in tokens if low <= v < high],
            len(tokens),
        )
    report(f"below {LOW_CONFIDENCE}", [r for v, r in tokens if v < LOW_CONFIDENCE], len(tokens))
    report(f"at or above {LOW_CONFIDENCE}", [r for v, r in tokens if v >= LOW_CONFIDENCE], len(tokens))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
