"""`python -m evaluation.bench.profile`: where a single-line completion's time goes, operation by operation.

Runs the server's pipeline on a fixed cursor (fixtures/demo/stats.py, after `return ` in variance)
and prints torch.profiler's table of operators by self CPU time, with the time per denoising step,
the sampler's own math apart from the model's forward passes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import load_engine

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "stats.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.profile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeat", type=int, default=20, help="timed completions")
    parser.add_argument("--rows", type=int, default=25, help="operators listed")
    parser.add_argument("--no-drafts", action="store_true")
    parser.add_argument(
        "--single-line-canvas", type=int, help="tokens per canvas (default: the server's; 0: the model's)"
    )
    args = parser.parse_args(argv)
    engine = load_engine(args.model, device="cpu")
    text = DEMO.read_text()
    cursor = text.index("return \n") + len("return ")
    snapshot = standalone(text, "python", LanguageRegistry()).snapshot()
    canvas = {} if args.single_line_canvas is None else {"canvas_tokens_single_line": args.single_line_canvas}
    options = Options(completion=CompletionOptions(latency_budget_ms=0, drafts=not args.no_drafts, **canvas))
    complete(snapshot, cursor, options, engine)  # warm
    walls, steps, forward = [], [], []
    for _ in range(args.repeat):
        engine.reset_cache()
        started = time.perf_counter()
        done = complete(snapshot, cursor, options, engine)
        walls.append((time.perf_counter() - started) * 1000)
        steps.append(done.result.steps)
        forward.append(done.result.timings.forward_ms)
    per_step = [(w - 0) / s for w, s in zip(walls, steps, strict=True) if s]
    print(
        f"completion p50 {statistics.median(walls):.1f} ms, {statistics.median(steps):.0f} steps, "
        f"{statistics.median(per_step):.2f} ms per step (wall, all included), "
        f"forward passes {statistics.median(forward):.1f} ms, threads {torch.get_num_threads()}"
    )
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            engine.reset_cache()
            complete(snapshot, cursor, options, engine)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
