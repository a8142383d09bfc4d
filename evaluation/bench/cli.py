"""`dgemma-lsp bench [--quick] [--json OUT]`: replay typing sessions and print what they measured."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import time
from pathlib import Path

from dgemma_lsp.runtime.stats import percentile
from evaluation.bench.driver import BenchClient, SessionLog
from evaluation.bench.scripts import Pace, big_file, load_scripts
from training.progress import progress


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dgemma-lsp bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a short run (under a minute on a laptop CPU)")
    p.add_argument("--model", default="default")
    p.add_argument("--budget-ms", type=int, default=None, help="latencyBudgetMs (default: the server's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scripts", type=int, default=0, help="use only the first N scripts (0: --quick decides)")
    p.add_argument("--keys", type=int, default=0, help="type at most K keys per segment (0: --quick decides)")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="a workspace folder the server indexes from its start (python -m evaluation.bench.repository "
        "--assemble DIR makes one of 5,000 files)",
    )  # fmt: skip
    p.add_argument(
        "--plot", type=Path, metavar="OUT.png", help="latency histograms by mode and steps, as a PNG"
    )
    return p


def indexed(bench: BenchClient) -> str | None:
    """The server's line saying the workspace index is built (files and seconds), once it is."""
    return next((line for line in bench.log_lines if line.startswith("indexed ")), None)


def latency(samples: list, multi_line: bool) -> dict:
    values = [s.latency_ms for s in samples if s.multi_line == multi_line and s.latency_ms is not None]
    return {
        "n": len(values),
        "p50_ms": percentile(values, 50),
        "p95_ms": percentile(values, 95),
        "p99_ms": percentile(values, 99),
    }


async def run(args: argparse.Namespace) -> dict:
    scripts = load_scripts()
    scripts = scripts[: args.scripts or (3 if args.quick else len(scripts))]
    keys = args.keys or (10 if args.quick else None)
    # The scripts' languages turned on: the bench times the model in every one (the bundled model was
    # trained on three of them, and would otherwise answer the others with nothing, at once).
    completion: dict = {"languages": sorted({s.language_id for s in scripts})}
    if args.budget_ms is not None:
        completion["latencyBudgetMs"] = args.budget_ms
    options = {"completion": completion}
    rng = random.Random(args.seed)
    pace = Pace()
    bench = BenchClient()
    started = time.monotonic()
    await bench.start(args.model, options, [args.workspace] if args.workspace else [])
    try:
        first = scripts[0]
        bench.open("file:///bench/first", first.language_id, first.initial)
        from dgemma_lsp.documents.positions import LineIndex

        await bench.first_completion(
            "file:///bench/first", LineIndex(first.initial), first.segments[0].offset
        )
        first_completion_s = time.monotonic() - started
        indexing_at_first = args.workspace is not None and not indexed(bench)
        bench.close("file:///bench/first")
        if args.workspace:  # the sessions type beside a finished index: its steady cost, not its build's
            deadline = time.monotonic() + 600
            while not indexed(bench) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        await bench.stats(reset=True)

        logs: list[SessionLog] = []
        for script in progress(scripts, len(scripts), "typing sessions", "session"):
            logs.append(await bench.run(script, pace, rng, keys))
        server = await bench.stats(reset=True)
        await bench.run(big_file(scripts[0]), pace, rng, keys)
        server_big = await bench.stats(reset=True)
    finally:
        await bench.stop()

    samples = [s for log in logs for s in log.samples]
    answered = [s for s in samples if s.latency_ms is not None]
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "model": args.model,
        "quick": args.quick,
        "requests": len(samples),
        "answered": len(answered),
        "accepted": sum(log.accepted for log in logs),
        "cancelled_share": 1 - len(answered) / len(samples) if samples else None,
        "single_line": latency(samples, multi_line=False),
        "multi_line": latency(samples, multi_line=True),
        "overhead": server["overhead"],
        "sampler": server["sampler"],
        "overhead_5000_lines": server_big["overhead"],
        "steps_mean": server["steps_mean"],
        "draft_forwards_mean": server["draft_forwards_mean"],
        "steps": server["steps"],
        "latencies_ms": {
            mode: [round(s.latency_ms, 2) for s in answered if s.multi_line == (mode == "multi_line")]
            for mode in ("single_line", "multi_line")
        },
        "tokens_per_forward": server["tokens_per_forward"],
        "prompt_reuse": server["prompt_reuse"],
        "sources": server["sources"],
        "stop_reasons": server["stop_reasons"],
        "server_latency": {
            "single_line": server["single_line"],
            "multi_line": server["multi_line"],
            "model_answers": server["model_answers"],
        },
        "peak_rss_mb": server_big["peak_rss_mb"],
        "first_completion_s": round(first_completion_s, 2),
        "workspace": str(args.workspace) if args.workspace else None,
        "workspace_indexed": indexed(bench),  # the server's own line: files and seconds
        "indexing_at_first_completion": indexing_at_first,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _percentiles(block: dict) -> str:
    return " / ".join(_ms(block[k]) for k in ("p50_ms", "p95_ms", "p99_ms")) + f"  (n={block['n']})"


def table(figures: dict) -> str:
    overhead, big, sampler = figures["overhead"], figures["overhead_5000_lines"], figures["sampler"]
    model_answers = figures["server_latency"]["model_answers"]
    reuse = figures["prompt_reuse"]
    rows = [
        ("single-line latency p50 / p95 / p99 ms", _percentiles(figures["single_line"])),
        ("multi-line latency p50 / p95 / p99 ms", _percentiles(figures["multi_line"])),
        ("the model's answers alone (in the server)", _percentiles(model_answers)),
        ("requests cancelled or superseded", f"{figures['cancelled_share']:.0%} of {figures['requests']}"),
        ("server overhead p50 / p95 ms", f"{_ms(overhead['p50_ms'])} / {_ms(overhead['p95_ms'])}"),
        ("  on a 5,000-line file", f"{_ms(big['p50_ms'])} / {_ms(big['p95_ms'])}"),
        (
            "engine outside forward passes p50 / p95 ms",
            f"{_ms(sampler['p50_ms'])} / {_ms(sampler['p95_ms'])}",
        ),
        ("denoising steps (mean)", _ms(figures["steps_mean"])),
        ("next-token draft forwards (mean)", _ms(figures["draft_forwards_mean"])),
        ("tokens per forward pass", _ms(figures["tokens_per_forward"])),
        ("prompt tokens reused", "-" if reuse is None else f"{reuse:.0%}"),
        ("answers by source", ", ".join(f"{k} {v}" for k, v in sorted(figures["sources"].items()))),
        ("peak RSS", f"{figures['peak_rss_mb']:.0f} MB"),
        ("process start to first completion", f"{figures['first_completion_s']:.2f} s"),
    ]
    if figures.get("workspace"):
        rows.append(("workspace index", figures["workspace_indexed"] or "not done within 10 minutes"))
        still = figures["indexing_at_first_completion"]
        rows.append(("  still indexing at the first completion", "yes" if still else "no"))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["typing"]:
        from evaluation.typing_sessions.cli import main as typing_main

        return typing_main(argv[1:])
    args = parser().parse_args(argv)
    figures = asyncio.run(run(args))
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.plot:
        from evaluation.bench.plot import plot

        plot(figures, args.plot)
    return 0
