"""`python -m evaluation.bench.profile`: where a single-line completion's time goes, operation by operation.

Runs the server's pipeline on a fixed cursor (fixtures/demo/stats.py, after `return ` in variance)
and prints torch.profiler's table of operators by self CPU time, with the time per denoising step,
the sampler's own math apart from the model's forward passes. `--decoders both` times the fused
layers (the prefill and the decoder's steps) against transformers' modules in turns in one process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.runtime.heap import hold_mmap_threshold
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import load_engine
from engine.api import InfillResult
from engine.backbone import Backbone, ModuleBackbone

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "stats.py"


@dataclass
class Run:
    wall_ms: float
    result: InfillResult


def summary(runs: list[Run]) -> str:
    """Completion wall time, steps, and a denoising step's cost inside the decoder's forward pass and
    with the sampler's math (next-token draft forwards and the prefill apart)."""
    med = statistics.median
    steps = [max(run.result.steps, 1) for run in runs]
    timings = [run.result.timings for run in runs]
    decoder = [t.step_forward_ms / s for t, s in zip(timings, steps, strict=True)]
    with_sampler = [t.canvas_ms / s for t, s in zip(timings, steps, strict=True)]
    return (
        f"completion p50 {med(r.wall_ms for r in runs):.1f} ms, {med(steps):.0f} steps, "
        f"{med(r.result.draft_forwards for r in runs):.0f} next-token draft forwards, prefill "
        f"{med(t.prefill_ms for t in timings):.1f} ms, per step: decoder forward "
        f"{med(decoder):.2f} ms, with the sampler {med(with_sampler):.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.profile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeat", type=int, default=20, help="timed completions")
    parser.add_argument("--rows", type=int, default=25, help="operators listed")
    parser.add_argument(
        "--no-drafts", action="store_true", help="every canvas from noise (no lookup or next-token draft)"
    )
    parser.add_argument(
        "--single-line-canvas", type=int, help="tokens per canvas (default: the server's; 0: the model's)"
    )
    parser.add_argument(
        "--decoders",
        choices=("fused", "reference", "both"),
        default="fused",
        help="prefill and steps through the fused layers, transformers' modules, or both in turns",
    )
    args = parser.parse_args(argv)
    heap = hold_mmap_threshold()  # the server's heap, so the times are the server's
    engine = load_engine(args.model, device="cpu")
    if heap is not None:
        engine.use_allocation_window(heap.window)
    text = DEMO.read_text()
    cursor = text.index("return \n") + len("return ")
    snapshot = standalone(text, "python", LanguageRegistry()).snapshot()
    canvas = {} if args.single_line_canvas is None else {"canvas_tokens_single_line": args.single_line_canvas}
    options = Options(
        completion=CompletionOptions(
            latency_budget_ms=0, drafts=not args.no_drafts, next_token_draft=not args.no_drafts, **canvas
        )
    )
    names = ["fused", "reference"] if args.decoders == "both" else [args.decoders]
    decoders = {"fused": engine.backbone}
    if "reference" in names:
        decoders["reference"] = transformers_modules(engine)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for name in names:
        use(engine, decoders[name])
        complete(snapshot, cursor, options, engine)  # warm
    for _ in range(args.repeat):  # in turns, so that a change in the machine's load hits both alike
        for name in names:
            use(engine, decoders[name])
            engine.reset_cache()
            started = time.perf_counter()
            result = complete(snapshot, cursor, options, engine).result
            runs[name].append(Run((time.perf_counter() - started) * 1000, result))
    print(
        f"threads {torch.get_num_threads()}; medians of {args.repeat} completions, "
        "prompt cache reset before each"
    )
    for name, rows in runs.items():
        print(f"{name:9s} {summary(rows)}")
    for name in names:  # operators of 5 completions, everything in the pipeline included
        use(engine, decoders[name])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(5):
                engine.reset_cache()
                complete(snapshot, cursor, options, engine)
        events = prof.key_averages()
        calls = sum(event.count for event in events)
        print(f"\n{name}: {calls} operator calls in 5 completions")
        print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


def transformers_modules(engine) -> Backbone:
    """The engine's checkpoint as transformers' model class, in the same dtype."""
    from transformers import DiffusionGemmaForBlockDiffusion

    model = DiffusionGemmaForBlockDiffusion.from_pretrained(
        engine.info.source, dtype=getattr(torch, engine.info.dtype), local_files_only=True
    )
    return ModuleBackbone(model)


def use(engine, backbone: Backbone) -> None:
    """The engine's prefill and steps through `backbone`."""
    engine.backbone = engine.prompt_cache.backbone = backbone


if __name__ == "__main__":
    raise SystemExit(main())
