"""`python -m evaluation.bench.prefill`: a prompt's cold prefill with the server's held heap, with or
without the allocation window the server opens for it, and the RSS that many of them leave.

Each prefill encodes the first N tokens of a source file of this repository into an empty prompt
cache, as opening a file or jumping far in one does. One way per process (`--way`), so that neither
inherits the other's heap: run them in turns.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

from dgemma_lsp.runtime.heap import hold_mmap_threshold
from engine import load_engine
from engine.local_engine import LocalEngine

SOURCE = Path(__file__).resolve().parents[2] / "engine" / "fused_model.py"
LENGTHS = (150, 300, 1000, 2000)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def cold_prefill_ms(engine: LocalEngine, ids: list[int]) -> float:
    engine.reset_cache()
    start = time.perf_counter()
    engine.prompt_cache.encode(ids)
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.prefill", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="default")
    parser.add_argument("--way", choices=("held", "window"), default="window")
    parser.add_argument("--repeat", type=int, default=7, help="timed prefills per length")
    parser.add_argument("--random", type=int, default=200, help="random-length prefills before reading RSS")
    args = parser.parse_args(argv)
    heap = hold_mmap_threshold()
    if heap is None:
        print("glibc's mmap threshold cannot be held here (another C library, or MALLOC_MMAP_THRESHOLD_ set)")
        return 1
    engine = load_engine(args.model, device="cpu", threads=1)
    if not isinstance(engine, LocalEngine):
        raise SystemExit(f"{args.model} does not run here")
    engine.use_allocation_window(heap.window if args.way == "window" else nullcontext)
    ids = engine.format.encode(SOURCE.read_text() * 3)
    times = {
        n: statistics.median(cold_prefill_ms(engine, ids[:n]) for _ in range(args.repeat)) for n in LENGTHS
    }
    rng = random.Random(0)
    for _ in range(args.random):
        cold_prefill_ms(engine, ids[: rng.randint(50, LENGTHS[-1])])
    print(
        f"{args.way}: cold prefill of {' / '.join(map(str, LENGTHS))} tokens, median of {args.repeat}: "
        f"{' / '.join(f'{times[n]:.1f}' for n in LENGTHS)} ms; RSS after {args.random} more of "
        f"50-{LENGTHS[-1]} tokens {rss_mb():.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
