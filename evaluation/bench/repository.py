"""`python -m evaluation.bench.repository`: the workspace index on a large repository: how long the
server's indexer takes to build it in the background, how much memory it holds, and what a completion
pays for it (retrieval for a new cursor, retrieval while typing, the cross-file lookup draft), as the
server runs them: imported files are parsed on the indexer's thread, so no completion waits for that.

Without --folder it assembles a repository of --files real Python files, copied from this interpreter's
standard library and the environment's site-packages (the same files on every run of one setup).

Two runs of the real server with a workspace folder instead: `--loop-stalls DIR` runs `dgemma-lsp bench
--quick --workspace DIR` (in the current folder's checkout) with every event-loop callback of the server
timed, and prints the longest; `--flood DIR` asks for completions idle and while the server takes one
watched-files notification of --events events, and prints their latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tracemalloc
from pathlib import Path

from lsprotocol import types
from tree_sitter import Parser

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import LineIndex
from dgemma_lsp.inline.lookup import MAX_KEY, Haystack, continuations
from dgemma_lsp.repository.files import FileReader
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import Indexer, index_folder
from dgemma_lsp.repository.retrieval import Definitions, DocumentRetrieval
from dgemma_lsp.repository.service import new_index, rules_of
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.stats import percentile

CURSORS = 200
# Loaded into the server (as sitecustomize) by --loop-stalls: times each event-loop callback and each call
# of planning.related_code (retrieval, as the event loop calls it), and at exit writes them, with the
# callbacks over 5 ms and what they ran, to $DGEMMA_LOOP_STALLS.
LOOP_TIMER = """
import asyncio.events, atexit, json, os, sys, time
if "--stdio" in sys.argv:
    from pygls.protocol.json_rpc import JsonRPCProtocol
    _run, _handle = asyncio.events.Handle._run, JsonRPCProtocol.handle_message
    _times, _slow, _doing, _related, _wrapped = [], [], [], [], []
    def _timed_related(related):
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return related(*args, **kwargs)
            finally:
                _related.append(time.perf_counter() - began)
        return timed
    def _timed(handle):
        planning = sys.modules.get("dgemma_lsp.inline.planning")
        if planning is not None and not _wrapped:
            planning.related_code = _timed_related(planning.related_code)
            _wrapped.append(planning)
        began, _doing[:] = time.perf_counter(), []
        try:
            return _run(handle)
        finally:
            took = time.perf_counter() - began
            _times.append(took)
            if took > 0.005:
                _slow.append((round(took * 1000, 1), ", ".join(_doing) or repr(handle)[:120]))
    def _handled(protocol, message):
        _doing.append(str(getattr(message, "method", None) or "a response"))
        return _handle(protocol, message)
    asyncio.events.Handle._run, JsonRPCProtocol.handle_message = _timed, _handled
    @atexit.register
    def _write():
        with open(os.environ["DGEMMA_LOOP_STALLS"], "w") as out:
            times, related = [round(t * 1000, 3) for t in _times], [round(t * 1000, 3) for t in _related]
            server = sys.modules["dgemma_lsp"].__file__
            json.dump({"times_ms": times, "slow": _slow, "related_ms": related, "server": server}, out)
"""
PROBE = "def build_summary(rows):\n    total = 0\n    for row in rows:\n        total += "
TYPED = "row.value * 2 + offset "


def assemble(out: Path, files: int) -> Path:
    """A repository of `files` Python files from the standard library and site-packages, in a stable order."""
    sources = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    taken = 0
    for source in sources:
        for path in sorted(source.rglob("*.py")):
            if taken >= files:
                return out
            if "site-packages" in path.relative_to(source).parts or path.stat().st_size > 200_000:
                continue  # the standard library's own copy of site-packages, and the largest files
            target = out / ("lib" if source == sources[0] else "packages") / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            taken += 1
    return out


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 1e6


def build(folder: Path, options: Options, registry: LanguageRegistry) -> tuple[RepositoryIndex, dict]:
    """The index as the server builds it (its indexer thread, in the background), timed until idle."""
    gc.collect()
    before = rss_mb()
    reader = FileReader(rules_of(options, registry))
    index = new_index(options, reader)
    started = time.monotonic()
    indexer = Indexer(index, registry, reader)
    indexer.add_folder(folder)
    indexer.idle(timeout=3600)
    seconds = time.monotonic() - started
    indexer.close()
    indexer.join()
    gc.collect()
    stats = index.stats()
    return index, {
        "files": stats.files,
        "text_mb": round(stats.bytes / 1e6, 1),
        "windows": stats.windows,
        "terms": stats.terms,
        "build_s": round(seconds, 1),
        "rss_growth_mb": round(rss_mb() - before, 1),
    }


def traced_mb(folder: Path, options: Options, registry: LanguageRegistry) -> float:
    """What the index's structures hold, as tracemalloc counts it (a second build, traced)."""
    tracemalloc.start()
    index = new_index(options, FileReader(rules_of(options, registry)))
    index_folder(index, registry, rules_of(options, registry), folder)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return round(held / 1e6, 1)


def completion_costs(index: RepositoryIndex, registry: LanguageRegistry, seed: int) -> dict:
    """Retrieval and the lookup draft's cross-file search at random cursors of the repository's files."""
    rng = random.Random(seed)
    files = [f for f in index.files() if f.windows > 2]
    parser = Parser(registry.grammar("python"))
    pending: list = []  # as in the server, imported files are parsed on the indexer's thread: not timed
    definitions = Definitions(registry, later=lambda work: pending.append(work) or True)
    cold, typing, lookup = [], [], []
    for _ in range(CURSORS):
        file = rng.choice(files)
        text = index.text_of(file)
        lines = text.split("\n")
        row = rng.randrange(10, len(lines))
        cursor = len("\n".join(lines[:row])) + 1 + len(lines[row]) // 2
        source = text.encode()
        tree = parser.parse(source)
        retrieval = DocumentRetrieval(
            index, definitions, file.absolute, file.root, lambda f=file: frozenset({f.absolute})
        )
        started = time.perf_counter()
        related = retrieval.related(text, source, cursor, "python", tree, 384, len)
        cold.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        retrieval.related(text, source, cursor, "python", tree, 384, len)  # the next keystroke's
        typing.append((time.perf_counter() - started) * 1000)
        haystacks = [Haystack(text, cursor - 1, cursor), *(Haystack(t) for t in related.lookup_texts)]
        started = time.perf_counter()
        continuations(text[max(0, cursor - MAX_KEY) : cursor], haystacks, 1, 1)
        lookup.append((time.perf_counter() - started) * 1000)
        while pending:
            pending.pop()()
    return {
        name: {"p50_ms": round(percentile(values, 50), 3), "p95_ms": round(percentile(values, 95), 3)}
        for name, values in (
            ("retrieval_new_cursor", cold),
            ("retrieval_typing", typing),
            ("lookup_draft", lookup),
        )
    }


def loop_stalls(folder: Path) -> dict:
    """`dgemma-lsp bench --quick --workspace folder`, with the server's event-loop callbacks timed (and
    the bench's own figures)."""
    with tempfile.TemporaryDirectory(prefix="dgemma-loop-") as scratch:
        (Path(scratch) / "sitecustomize.py").write_text(LOOP_TIMER)
        out = Path(scratch) / "stalls.json"
        env = {**os.environ, "DGEMMA_LOOP_STALLS": str(out)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (scratch, os.environ.get("PYTHONPATH")) if p)
        figures = Path(scratch) / "bench.json"
        bench = [sys.executable, "-m", "dgemma_lsp", "bench", "--quick", "--workspace", str(folder)]
        subprocess.run([*bench, "--json", str(figures)], env=env, check=True, stdout=subprocess.DEVNULL)
        found, typed = json.loads(out.read_text()), json.loads(figures.read_text())
    times, related = sorted(found["times_ms"]), found["related_ms"]
    outside_start = [ms for ms, doing in found["slow"] if doing not in ("initialize", "shutdown")]
    return {
        "server": found["server"],
        "callbacks": len(times),
        "longest_ms": times[-1],
        "p99_ms": round(percentile(times, 99), 3),
        "over_1ms": sum(t > 1 for t in times),
        "over_10ms": sum(t > 10 for t in times),
        "longest_but_start_and_end_ms": max(outside_start, default=0.0),
        "retrieval_on_the_loop": {  # planning.related_code, called from prepare on the event loop
            "calls": len(related),
            "p50_ms": round(percentile(related, 50), 3),
            "p95_ms": round(percentile(related, 95), 3),
            "max_ms": max(related, default=0.0),
        },
        "slowest": sorted(found["slow"], reverse=True)[:8],  # (ms, the messages handled in it)
        "bench": {key: typed[key] for key in ("single_line", "multi_line", "overhead", "workspace_indexed")},
    }


async def timed_completions(bench, uri: str, lines: LineIndex, count: int) -> tuple[LineIndex, list[float]]:
    """`count` completions, each after one more character typed at the end of the document (ms)."""
    taken = []
    for n in range(count):
        lines = bench.insert(uri, n + 2, lines, len(lines.text), TYPED[n % len(TYPED)])
        started = time.monotonic()
        _, answer = bench.request(uri, lines, len(lines.text))
        await answer
        taken.append((time.monotonic() - started) * 1000)
    return lines, taken


async def flood(folder: Path, events: int, samples: int) -> dict:
    """Completions idle, then while the server takes one notification of `events` watched-file events."""
    from evaluation.bench.cli import indexed
    from evaluation.bench.driver import BenchClient

    bench = BenchClient()
    await bench.start("default", {}, [folder])
    try:
        uri, lines = "file:///bench/flood.py", LineIndex(PROBE)
        bench.open(uri, "python", PROBE)
        await bench.first_completion(uri, lines, len(PROBE))
        while not indexed(bench):
            await asyncio.sleep(0.2)
        lines, idle = await timed_completions(bench, uri, lines, samples)
        changes = [
            types.FileEvent(
                uri=(folder / "generated" / f"file_{n}.py").as_uri(), type=types.FileChangeType.Created
            )
            for n in range(events)
        ]
        with tempfile.TemporaryDirectory(prefix="dgemma-after-") as after:
            started = time.monotonic()
            bench.client.workspace_did_change_watched_files(
                types.DidChangeWatchedFilesParams(changes=changes)
            )
            lines, during = await timed_completions(bench, uri, lines, samples)
            answered_s = time.monotonic() - started
            bench.client.workspace_did_change_workspace_folders(
                types.DidChangeWorkspaceFoldersParams(
                    event=types.WorkspaceFoldersChangeEvent(
                        added=[types.WorkspaceFolder(uri=Path(after).as_uri(), name="after")], removed=[]
                    )
                )
            )
            while sum(line.startswith("indexed ") for line in bench.log_lines) < 2:
                await asyncio.sleep(0.05)
            through_s = time.monotonic() - started
    finally:
        await bench.stop()

    def summary(values: list[float]) -> dict:
        return {"p50_ms": round(percentile(values, 50), 1), "p95_ms": round(percentile(values, 95), 1),
                "max_ms": round(max(values), 1)}  # fmt: skip

    return {
        "events": events,
        "idle": summary(idle),
        "during": summary(during),
        "during_answered_in_s": round(answered_s, 1),
        "events_taken_in_s": round(through_s, 1),  # till a folder added after them was indexed
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.bench.repository", description=__doc__)
    parser.add_argument("--folder", type=Path, help="a repository to index (default: one assembled here)")
    parser.add_argument("--files", type=int, default=5000, help="files of the assembled repository")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--assemble", type=Path, metavar="OUT", help="only write the repository to OUT (for bench)"
    )
    parser.add_argument("--loop-stalls", type=Path, metavar="DIR", help="time the server's event loop")
    parser.add_argument("--flood", type=Path, metavar="DIR", help="completions during a watched-files flood")
    parser.add_argument("--events", type=int, default=100_000, help="events of the --flood notification")
    parser.add_argument("--samples", type=int, default=40, help="completions idle and during the --flood")
    args = parser.parse_args(argv)
    if args.assemble:
        assemble(args.assemble, args.files)
        return 0
    if args.loop_stalls or args.flood:
        if args.loop_stalls:
            found = loop_stalls(args.loop_stalls.resolve())
        else:
            found = asyncio.run(flood(args.flood.resolve(), args.events, args.samples))
        print(json.dumps(found, indent=1))
        if args.json:
            args.json.write_text(json.dumps(found, indent=1))
        return 0
    registry, options = LanguageRegistry(), Options()
    with tempfile.TemporaryDirectory(prefix="dgemma-repo-") as scratch:
        folder = args.folder or assemble(Path(scratch), args.files)
        index, figures = build(folder, options, registry)
        figures["traced_mb"] = traced_mb(folder, options, registry)
        figures |= completion_costs(index, registry, args.seed)
    width = max(len(k) for k in figures)
    for name, value in figures.items():
        shown = f"{value['p50_ms']} / {value['p95_ms']} ms (p50 / p95)" if isinstance(value, dict) else value
        print(f"{name:<{width}}  {shown}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
