"""`python -m evaluation.bench.remote`: the remote engine against a real vLLM, timing and mechanics.

Without --url it serves the tiny random-weight test model with the cached vLLM of
scripts/install-vllm.sh (run it from a checkout: it uses tests/vllm_server.py); random weights, so it
measures the path, not the text. For each kind of request, one client and then several at once:
requests per second and p50/p95 latency; whether the pinned positions came back as they were sent (as
vLLM answered them, and as the engine returns them); the engine's own time per request beside its
HTTP round trips (writing and reading the JSON, the canvas rows, the candidates) and its /tokenize
round trips. Then superseded requests: how soon the engine gives up on them, and whether the server
works on them any further (its denoising-step counter in /metrics). Then a seed with every position
pinned and a one-step cap: the steps the server ran, and whether it came back as seeded.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dgemma_lsp.runtime.stats import percentile
from engine import CancelFlag, InfillRequest, RemoteSettings, load_engine
from engine import remote_engine as remote_module
from engine.remote_engine import RemoteEngine
from engine.remote_http import Call

PREFIX = "def variance(values):\n    m = mean(values)\n    return sum((v - m) ** 2 for v in values) / len("
SUFFIX = ")\n\n\ndef stdev(values):\n    return variance(values) ** 0.5\n"
SEED = "values.sort()\n"
STEPS = "vllm:diffusion_num_denoising_steps_total"
RUNNING = "vllm:num_requests_running"
Metric = Callable[[str], float]


def kinds() -> dict[str, InfillRequest]:
    """Plain (no seed); drafted with the anchor pinned (a completion); seeded with half its tokens pinned
    (a repair). Each asks for one canvas."""
    plain = InfillRequest(prefix=PREFIX, suffix=SUFFIX, language="python", max_new_tokens=16)
    return {
        "plain": plain,
        "draft+anchor": replace(plain, drafts=("values",), anchor=")"),
        "seed+pinned": replace(plain, seed_canvas=SEED, fixed_positions=(0, 2, 4), seed_noise=1.0),
    }


@dataclass
class Spy:
    """What the engines did, seen from inside: each batch of HTTP calls (its path, the time waited on
    the network and the server alone), and each pinned position as sent, as vLLM answered it, as the
    engine returned it."""

    batches: dict[int, list[tuple[str, float]]] = field(default_factory=dict)  # by engine
    pinned_sent: int = 0
    pinned_server: int = 0
    pinned_returned: int = 0
    pinned_engine: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, engine: RemoteEngine) -> None:
        http, real = engine.http, engine.http.calls
        mine = self.batches.setdefault(id(engine), [])

        def calls(batch: list[Call], *args, **kwargs):
            before = http.waited_s
            try:
                return real(batch, *args, **kwargs)
            finally:
                mine.append((batch[0].path, (http.waited_s - before) * 1000))

        http.calls = calls  # type: ignore[method-assign]

    def watch_pins(self) -> Callable[[], None]:
        real = remote_module.candidate

        def candidate(out, row, canvas, facts, pinned):
            made, ended = real(out, row, canvas, facts, pinned)
            with self.lock:
                for at in row.pinned:
                    if at < len(out.token_ids):  # every pinned position vLLM answered
                        self.pinned_sent += 1
                        self.pinned_server += out.token_ids[at] == row.seed[at]
                    if at < len(made.token_ids):  # those the engine returns (not the anchor: suffix text)
                        self.pinned_returned += 1
                        self.pinned_engine += made.token_ids[at] == row.seed[at]
            return made, ended

        remote_module.candidate = candidate
        return lambda: setattr(remote_module, "candidate", real)


@dataclass
class Figures:
    kind: str
    clients: int
    requests: int
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    pinned_as_sent_by_server: float | None  # share of pinned positions vLLM answered unchanged
    pinned_as_sent_by_engine: float | None  # of those the engine returns (the middle's), share unchanged
    engine_p50_ms: float  # the engine's own time per request beside its HTTP waits
    engine_p95_ms: float
    round_trips_per_request: float
    tokenize_p50_ms: float | None  # a /tokenize round trip (a new draft's ids), when there was one
    completion_p50_ms: float  # the completion round trip


def run_kind(engines: list[RemoteEngine], name: str, request: InfillRequest, count: int) -> Figures:
    """`count` infills of one kind, spread over the engines (a client each, all at once)."""
    spy = Spy()
    for engine in engines:
        spy.watch(engine)
    restore = spy.watch_pins()
    walls: list[tuple[float, float]] = []  # (wall ms, the engine's own ms beside its HTTP waits)

    def client(engine: RemoteEngine, offset: int) -> None:
        mine = spy.batches[id(engine)]
        for i in range(max(1, count // len(engines))):
            varied = replace(request, seed=offset + i)
            if request.drafts:  # a new draft each time, as typing makes: its ids come from /tokenize
                varied = replace(varied, drafts=(f"values{offset + i}",))
            first = len(mine)
            started = time.perf_counter()
            engine.infill(varied)
            wall = (time.perf_counter() - started) * 1000
            walls.append((wall, wall - sum(ms for _, ms in mine[first:])))

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(e, 1000 * i)) for i, e in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    restore()
    for engine in engines:
        del engine.http.calls  # the instance's spy: back to the class's method
    batches = [batch for mine in spy.batches.values() for batch in mine]
    tokenize = [ms for path, ms in batches if path == "/tokenize"]
    completion = [ms for path, ms in batches if path.startswith("/v1/")]
    own = [o for _, o in walls]
    return Figures(
        kind=name,
        clients=len(engines),
        requests=len(walls),
        requests_per_s=len(walls) / elapsed,
        p50_ms=percentile([w for w, _ in walls], 50),
        p95_ms=percentile([w for w, _ in walls], 95),
        pinned_as_sent_by_server=spy.pinned_server / spy.pinned_sent if spy.pinned_sent else None,
        pinned_as_sent_by_engine=spy.pinned_engine / spy.pinned_returned if spy.pinned_returned else None,
        engine_p50_ms=percentile(own, 50),
        engine_p95_ms=percentile(own, 95),
        round_trips_per_request=len(batches) / len(walls),
        tokenize_p50_ms=percentile(tokenize, 50) if tokenize else None,
        completion_p50_ms=percentile(completion, 50),
    )


@dataclass
class Cancelled:
    requests: int
    abandon_p50_ms: float  # from setting the cancel flag to the engine's return
    abandon_max_ms: float
    nothing_further: float  # share after which the server ran no more denoising steps


def run_cancellations(engine: RemoteEngine, metric: Metric, count: int) -> Cancelled:
    """Long requests superseded after a random wait: how soon the engine returns, and whether the server
    stops working on them (no request left running, then no denoising step for a second)."""
    rng = random.Random(0)
    abandon_ms: list[float] = []
    still = 0
    for i in range(count):
        cancel = CancelFlag()  # as the server's scheduler makes them: the engine's wait wakes when it is set
        marks: list[float] = []

        def supersede(flag: CancelFlag = cancel, at: list[float] = marks) -> None:
            at.append(time.perf_counter())
            flag.set()

        threading.Timer(rng.uniform(0.3, 1.5), supersede).start()
        request = InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16 * 12, seed=i, cancel=cancel)
        if engine.infill(request).stop_reason != "cancelled" or not marks:
            continue
        abandon_ms.append((time.perf_counter() - marks[0]) * 1000)
        deadline = time.monotonic() + 30
        while metric(RUNNING) > 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        steps = metric(STEPS)
        time.sleep(1.0)
        still += metric(STEPS) == steps
    return Cancelled(
        requests=len(abandon_ms),
        abandon_p50_ms=percentile(abandon_ms, 50) if abandon_ms else float("nan"),
        abandon_max_ms=max(abandon_ms, default=float("nan")),
        nothing_further=still / len(abandon_ms) if abandon_ms else float("nan"),
    )


@dataclass
class OneStep:
    requests: int
    server_steps_per_request: float
    exactly_as_seeded: float


def one_step(engine: RemoteEngine, metric: Metric, count: int) -> OneStep:
    """A seed whose every position is pinned, capped at one step: what was right comes back in one."""
    text = "m = mean(v)\n"  # shorter than the tiny model's canvas: one canvas holds it
    # Repair seeds are candidates the engine returned; here the seed's token texts are asked for.
    ids = engine._server_ids([text], InfillRequest(prefix=""))[text]
    engine._pieces[text] = engine._detokenized(list(ids), InfillRequest(prefix=""))
    steps, exact = [], 0
    for i in range(count):
        request = InfillRequest(prefix=PREFIX, suffix=SUFFIX, seed_canvas=text, max_steps=1, seed=i,
                                fixed_positions=tuple(range(len(ids))))  # fmt: skip
        before = metric(STEPS)
        result = engine.infill(request)
        steps.append(metric(STEPS) - before)
        exact += bool(result.candidates) and result.candidates[0].token_ids[: len(ids)] == ids
    return OneStep(count, statistics.mean(steps), exact / count)


def table(rows: list[Figures], cancelled: Cancelled, step: OneStep) -> str:
    lines = [
        "kind          clients  req/s  p50 ms  p95 ms  pinned as sent    engine ms   round   "
        "tokenize  completion",
        "                                             (vLLM / engine)   p50 / p95   trips   p50 ms    p50 ms",
    ]
    for r in rows:
        server = f"{r.pinned_as_sent_by_server:.0%}" if r.pinned_as_sent_by_server is not None else "-"
        returned = f"{r.pinned_as_sent_by_engine:.0%}" if r.pinned_as_sent_by_engine is not None else "-"
        pinned = f"{server} / {returned}"
        tokenize = f"{r.tokenize_p50_ms:.1f}" if r.tokenize_p50_ms is not None else "-"
        lines.append(
            f"{r.kind:<13} {r.clients:>7} {r.requests_per_s:>6.2f} {r.p50_ms:>7.0f} {r.p95_ms:>7.0f}  "
            f"{pinned:<16} {r.engine_p50_ms:>5.2f} / {r.engine_p95_ms:<5.2f} "
            f"{r.round_trips_per_request:>5.1f}  {tokenize:>8}  {r.completion_p50_ms:>9.0f}"
        )
    lines.append(
        f"superseded: {cancelled.requests} requests, abandoned {cancelled.abandon_p50_ms:.1f} ms p50 "
        f"({cancelled.abandon_max_ms:.1f} max) after the cancel flag; the server ran no further step "
        f"after {cancelled.nothing_further:.0%} of them"
    )
    lines.append(
        f"every position pinned, one-step cap: {step.server_steps_per_request:.2f} server steps per request, "
        f"{step.exactly_as_seeded:.0%} of {step.requests} exactly as seeded"
    )
    return "\n".join(lines)


def serve_tiny(folder: Path):
    """The tiny test model on the cached vLLM (tests/vllm_server.py), started and warmed up."""
    from tests.vllm_server import VllmServer, build_checkpoint, ensure_vllm

    launcher, why = ensure_vllm()
    if launcher is None:
        raise SystemExit(f"no vLLM: {why}")
    server = VllmServer(launcher, build_checkpoint(folder / "tiny"), folder / "vllm.log", api_key=None)
    server.start()
    server.warm_up()
    return server


def measure(url: str, requests: int, clients: int, cancellations: int) -> dict:
    from tests.vllm_server import read_metric

    def metric(name: str) -> float:
        return read_metric(url, name)

    engines = [load_engine(url, remote=RemoteSettings(timeout_s=600)) for _ in range(max(1, clients))]
    try:
        rows = []
        for name, request in kinds().items():
            rows.append(run_kind(engines[:1], name, request, requests))
            if clients > 1:
                rows.append(run_kind(engines, name, request, requests))
        return {
            "kinds": rows,
            "cancelled": run_cancellations(engines[0], metric, cancellations),
            "one_step": one_step(engines[0], metric, 5),
        }
    finally:
        for engine in engines:
            engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.remote", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--url", help="a running vLLM serving DiffusionGemma (default: start the tiny one)")
    parser.add_argument("--requests", type=int, default=20, help="requests per kind and pass")
    parser.add_argument("--clients", type=int, default=4, help="clients at once in the second pass")
    parser.add_argument("--cancellations", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dgemma-bench-remote-") as tmp:
        server = None if args.url else serve_tiny(Path(tmp))
        try:
            found = measure(args.url or server.url, args.requests, args.clients, args.cancellations)
        finally:
            if server is not None:
                server.stop()
    print(table(found["kinds"], found["cancelled"], found["one_step"]))
    if args.json:
        payload = {
            key: [asdict(r) for r in v] if isinstance(v, list) else asdict(v) for key, v in found.items()
        }
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
