"""`python -m evaluation.bench.resolving`: how soon a slow completion shows its canvas, over stdio.

Builds the slow random-weight model of the released architecture (tests/slow_model.py: run it from a
checkout) unless --model names one, starts the real server with a client that declares dgemma/resolving,
and asks for completions where the typing scripts of `dgemma-lsp bench` type (at the start of each
segment and halfway through it), one at a time, with no deadline and no drafts (--drafts keeps them):
every answer of random weights then runs all its denoising steps. Prints p50 / p95 of the time from
the request to the first dgemma/resolving and to the answer, the partials per answer and the gaps
between them. Then, in this process, a single-line completion through the pipeline at the demo cursor
with the same options, and what an observer due at every step adds to a step (the sampler's softmax
over the canvas, the report of the most confident row).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import LineIndex
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import execute
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.runtime.options import parse_options
from dgemma_lsp.runtime.stats import percentile
from engine import load_engine
from engine.api import CanvasStep
from evaluation.bench.driver import BenchClient
from evaluation.bench.profile import DEMO
from evaluation.bench.scripts import load_scripts

RESOLVING = "dgemma/resolving"
OPTIONS = {"completion": {"latencyBudgetMs": 0, "drafts": False, "nextTokenDraft": False}}


@dataclass
class Timed:
    sent: float
    partials: list[float] = field(default_factory=list)  # arrival times
    answered: float | None = None


class ResolvingClient(BenchClient):
    """The bench's client, declaring dgemma/resolving and noting when each partial comes, by request."""

    def __init__(self) -> None:
        super().__init__()
        self.timed: dict[str, Timed] = {}

        @self.client.feature(RESOLVING)
        def on_partial(params) -> None:
            timed = self.timed.get(params.requestId)
            if timed is not None:
                timed.partials.append(time.monotonic())

    def experimental(self) -> dict:
        return {"dgemma": {"status": True, RESOLVING.removeprefix("dgemma/"): True}}

    async def timed_request(self, uri: str, lines: LineIndex, offset: int) -> Timed:
        msg_id, future = self.request(uri, lines, offset)
        timed = self.timed[msg_id] = Timed(sent=time.monotonic())
        await asyncio.wait_for(future, 600)
        timed.answered = time.monotonic()
        return timed


def figures(samples: list[Timed]) -> dict:
    """p50 / p95 (ms) of the time to the first partial and to the answer; partials and their gaps."""
    first = [1000 * (s.partials[0] - s.sent) for s in samples if s.partials]
    answer = [1000 * (s.answered - s.sent) for s in samples if s.answered is not None]
    gaps = [1000 * (b - a) for s in samples for a, b in zip(s.partials, s.partials[1:], strict=False)]
    return {
        "requests": len(samples),
        "with_partials": len(first),
        "first_partial_p50_ms": percentile(first, 50),
        "first_partial_p95_ms": percentile(first, 95),
        "answer_p50_ms": percentile(answer, 50),
        "answer_p95_ms": percentile(answer, 95),
        "partials_per_answer": sum(len(s.partials) for s in samples) / max(1, len(samples)),
        "gap_p50_ms": percentile(gaps, 50),
    }


async def run(model: str, limit: int, drafts: bool = False) -> list[Timed]:
    """Each script opened; at each segment's start and halfway through it, one completion, awaited
    (`drafts`: with the server's drafts, which random weights may keep after a step or two)."""
    scripts = load_scripts()
    client = ResolvingClient()
    completion = {"latencyBudgetMs": 0} if drafts else dict(OPTIONS["completion"])
    completion["languages"] = sorted({s.language_id for s in scripts})  # the slow model knows none
    await client.start(model, {"completion": completion})
    samples: list[Timed] = []
    try:
        for script in scripts:
            uri = f"file:///bench/{script.name}"
            lines, version = LineIndex(script.initial), 1
            client.open(uri, script.language_id, script.initial)
            await client.first_completion(uri, lines, script.segments[0].offset, timeout=600)
            for segment in script.segments:
                half = len(segment.text) // 2
                for start, end in ((0, half), (half, len(segment.text))):
                    if len(samples) < limit:
                        samples.append(await client.timed_request(uri, lines, segment.offset + start))
                    version += 1
                    lines = client.insert(
                        uri, version, lines, segment.offset + start, segment.text[start:end]
                    )
            client.close(uri)
    finally:
        await client.stop()
    return samples


class EveryStep:
    """An observer due at every step that keeps nothing: what observing costs the engine itself."""

    def due(self) -> bool:
        return True

    def __call__(self, step: CanvasStep) -> None:
        pass


def engine_figures(model: str, repeat: int = 12) -> dict:
    """A single-line completion through the pipeline at the demo cursor (median wall time), and the CPU
    time per denoising step it adds to be observed at every step (runs with and without the observer
    alternating; CPU time, which other programs on the machine disturb far less than wall time)."""
    engine = load_engine(model)
    text = DEMO.read_text()
    snapshot = standalone(text, "python", LanguageRegistry()).snapshot()
    options, _ = parse_options(OPTIONS)
    plan = prepare(snapshot, text.index("return \n") + len("return "), options, engine, 0.0)
    watched_plan = replace(plan, request=replace(plan.request, observer=EveryStep()))
    cpu: dict[bool, list[float]] = {False: [], True: []}
    walls, steps = [], 0
    for index in range(2 * repeat + 1):
        observed = index % 2 == 1
        engine.reset_cache()
        started, cpu_started = time.perf_counter(), time.process_time()
        steps = execute(watched_plan if observed else plan, engine).result.steps
        if index == 0:
            continue  # warm-up
        cpu[observed].append(1000 * (time.process_time() - cpu_started))
        if not observed:
            walls.append(1000 * (time.perf_counter() - started))
    plain, watched = statistics.median(cpu[False]), statistics.median(cpu[True])
    return {
        "completion_p50_ms": statistics.median(walls),
        "completion_cpu_ms": plain,
        "steps": steps,
        "observed_step_extra_cpu_ms": (watched - plain) / max(1, steps),
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.bench.resolving", description=__doc__)
    parser.add_argument("--model", help="a checkpoint folder (default: the slow random-weight model, built)")
    parser.add_argument("--requests", type=int, default=48, help="at most this many completions")
    parser.add_argument("--drafts", action="store_true", help="keep the server's drafts (default: none)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dgemma-slow-") as folder:
        model = args.model
        if model is None:
            from tests.slow_model import build_slow_checkpoint

            started = time.monotonic()
            model = str(build_slow_checkpoint(Path(folder)))
            print(f"built the slow model in {time.monotonic() - started:.1f} s")
        samples = asyncio.run(run(model, args.requests, args.drafts))
        engine = engine_figures(model)
    result = figures(samples)
    print(
        f"{result['requests']} completions, {result['with_partials']} with partials; first dgemma/resolving "
        f"p50 / p95 {_ms(result['first_partial_p50_ms'])} / {_ms(result['first_partial_p95_ms'])} ms; "
        f"answer {_ms(result['answer_p50_ms'])} / {_ms(result['answer_p95_ms'])} ms; "
        f"{result['partials_per_answer']:.1f} partials per answer, {_ms(result['gap_p50_ms'])} ms apart "
        f"(p50, as this client read them)"
    )
    print(
        f"in this process: a single-line completion at the demo cursor {engine['completion_p50_ms']:.0f} ms "
        f"({engine['completion_cpu_ms']:.0f} ms of CPU, {engine['steps']} steps); observed at every step, "
        f"a step takes {engine['observed_step_extra_cpu_ms']:+.2f} ms more CPU"
    )
    if args.json:
        dump = {"figures": result, "engine": engine, "samples": [asdict(s) for s in samples]}
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
