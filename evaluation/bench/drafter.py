"""`python -m evaluation.bench.drafter`: could the canvas draft for the next-token head?

Self-speculative decoding would let the canvas write a guess from noise in a step or two and the head
check it in one pass, keeping the guess up to its first token that greedy left-to-right decoding would
not have written: an answer exactly AR's, faster when guesses agree with it for several tokens in a
row. This prints how many they agree for, per number of canvas steps, on a benchmark's rows as the
server plans them (no drafts of its own, no deadline).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import load_engine
from engine.local_engine import LocalEngine
from evaluation.benchmarks import BENCHMARKS, load_items
from evaluation.runner import EditorView

CANVAS = 16  # tokens: a single-line canvas


def agreeing(guess: tuple[int, ...], greedy: tuple[int, ...]) -> int:
    """Tokens of `guess` a verifying pass would keep: up to the first that greedy decoding did not write."""
    kept = 0
    while kept < min(len(guess), len(greedy)) and guess[kept] == greedy[kept]:
        kept += 1
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.drafter", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("benchmark", nargs="?", default="santacoder-fim", choices=sorted(BENCHMARKS))
    parser.add_argument("--language", default="py")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--steps", default="1,2,4", help="canvas steps to try, comma-separated")
    parser.add_argument("--model", default="default")
    parser.add_argument("--benchmarks", help="benchmark data folder (or $DGEMMA_BENCHMARKS)")
    args = parser.parse_args(argv)
    engine = load_engine(args.model, device="cpu", threads=1)
    if not isinstance(engine, LocalEngine):
        raise SystemExit(f"{args.model} does not run here")
    steps = [int(s) for s in args.steps.split(",")]
    options = Options(completion=CompletionOptions(latency_budget_ms=0, drafts=False, next_token_draft=False))
    registry = LanguageRegistry()
    kept: dict[int, list[int]] = {s: [] for s in steps}
    lengths = []
    for item in load_items(args.benchmark, args.limit, args.language, args.benchmarks):
        view = EditorView.of(item)
        snapshot = standalone(view.text, item.language, registry).snapshot()
        plan = prepare(snapshot, view.cursor, options, engine, time.monotonic())
        request = replace(plan.request, max_new_tokens=CANVAS, canvas_tokens=CANVAS, n_candidates=1)
        greedy = engine.infill(replace(request, decoder="autoregressive")).candidates[0].token_ids
        lengths.append(len(greedy))
        for count in steps:
            engine.reset_cache()
            guess = engine.infill(replace(request, max_steps=count)).candidates[0].token_ids
            kept[count].append(agreeing(guess, greedy))
        engine.reset_cache()
    print(f"{len(lengths)} rows, greedy answers {statistics.mean(lengths):.1f} tokens on average")
    for count in steps:
        print(
            f"canvas from noise, {count} step(s): agrees with greedy for {statistics.mean(kept[count]):.2f} "
            f"tokens on average (median {statistics.median(kept[count]):.0f}); the whole answer on "
            f"{sum(k >= n for k, n in zip(kept[count], lengths, strict=True))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
