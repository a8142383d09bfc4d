"""`python -m evaluation.bench.repository`: the workspace index on a large repository: how long the
server's indexer takes to build it in the background, how much memory it holds, and what a completion
pays for it (retrieval for a new cursor, retrieval while typing, the cross-file lookup draft), as the
server runs them: imported files are parsed on the indexer's thread, so no completion waits for that.

Without --folder it assembles a repository of --files real Python files, copied from this interpreter's
standard library and the environment's site-packages (the same files on every run of one setup).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sysconfig
import tempfile
import time
import tracemalloc
from pathlib import Path

from tree_sitter import Parser

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.inline.lookup import MAX_KEY, Haystack, continuations
from dgemma_lsp.repository.files import FileReader
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import Indexer, index_folder
from dgemma_lsp.repository.retrieval import Definitions, DocumentRetrieval
from dgemma_lsp.repository.service import new_index, rules_of
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.stats import percentile

CURSORS = 200


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.bench.repository", description=__doc__)
    parser.add_argument("--folder", type=Path, help="a repository to index (default: one assembled here)")
    parser.add_argument("--files", type=int, default=5000, help="files of the assembled repository")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--assemble", type=Path, metavar="OUT", help="only write the repository to OUT (for bench)"
    )
    args = parser.parse_args(argv)
    if args.assemble:
        assemble(args.assemble, args.files)
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
