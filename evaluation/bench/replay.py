"""`python -m evaluation.bench.replay`: the bench's typing sessions replayed key by key in one process,
a completion at every key with no deadline: the engine's time per keystroke, without the timing noise
of a live session (no gaps, no cancels, no answers reused), so that two engines compare run for run.

Each script (fixtures/bench) opens without its typed segments; each segment is typed key by key,
completed at every key through the server's pipeline with the prompt cache kept, as the server keeps it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

import torch

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.runtime.heap import hold_mmap_threshold
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import load_engine
from engine.api import Engine
from evaluation.bench.scripts import Script, load_scripts


@dataclass
class Replay:
    """What the engine took per keystroke."""

    request_ms: list[float] = field(default_factory=list)
    prefill_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)  # a denoising step, the sampler's math included
    steps: int = 0

    def summary(self) -> str:
        med = statistics.median
        return (
            f"{len(self.request_ms)} keystrokes: per request p50 {med(self.request_ms):.1f} ms, mean "
            f"{statistics.mean(self.request_ms):.1f} ms; prefill p50 {med(self.prefill_ms):.2f} ms; "
            f"denoising step p50 {med(self.step_ms):.2f} ms over {self.steps} steps"
        )


def replay(
    script: Script, engine: Engine, options: Options, registry: LanguageRegistry, into: Replay
) -> None:
    """Type `script`'s segments key by key, completing at each key."""
    text = script.initial
    for segment in script.segments:
        for typed in range(len(segment.text) + 1):
            cursor = segment.offset + typed
            current = text[: segment.offset] + segment.text[:typed] + text[segment.offset :]
            snapshot = standalone(current, script.language_id, registry).snapshot()
            started = time.perf_counter()
            result = complete(snapshot, cursor, options, engine).result
            into.request_ms.append((time.perf_counter() - started) * 1000)
            into.prefill_ms.append(result.timings.prefill_ms)
            if result.steps:
                into.step_ms.append(result.timings.canvas_ms / result.steps)
                into.steps += result.steps
        text = text[: segment.offset] + segment.text + text[segment.offset :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.replay", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    heap = hold_mmap_threshold()  # the server's heap, so the times are the server's
    engine = load_engine(args.model, device="cpu", threads=args.threads)
    if heap is not None:
        engine.use_allocation_window(heap.window)
    options = Options(completion=CompletionOptions(latency_budget_ms=0))
    registry = LanguageRegistry()
    scripts = load_scripts()
    replay(scripts[0], engine, options, registry, Replay())  # warm, not counted
    engine.reset_cache()
    total = Replay()
    for script in scripts:
        replay(script, engine, options, registry, total)
    print(f"threads {torch.get_num_threads()}; {len(scripts)} scripts; {total.summary()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
