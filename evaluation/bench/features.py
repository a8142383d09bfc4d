"""`python -m evaluation.bench.features`: the figures behind the diffusion-only features.

Each measure runs the server's own pipeline (context windows, engine request, post-processing) on
benchmark files from ../shared/benchmarks, with the feature on and off, in one run:
- anchoring: how often a single-line completion repeats the start of the rest of its line;
- repair: the share of completions that leave a parseable file parseable;
- confidence: exact match and the share of completions offered, by confidence threshold;
- typing: denoising steps when the user types into a shown completion, seeded with its rest or not.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from tree_sitter import Parser

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.drafts import make_drafts
from dgemma_lsp.inline.pipeline import execute, finish
from dgemma_lsp.inline.planning import prepare, shape_of
from dgemma_lsp.inline.postprocess import cut_suffix_repeat
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import Engine, load_engine
from evaluation.benchmarks import Item, load_items
from evaluation.metrics import exact_match

THRESHOLDS = (0, 10, 20, 30, 40, 50, 60)
REGISTRY = LanguageRegistry()


def _plan(engine: Engine, item: Item, **completion):
    opened = standalone(item.prefix + item.suffix, item.language, REGISTRY)
    options = Options(completion=CompletionOptions(latency_budget_ms=0, **completion))
    return prepare(opened.snapshot(), len(item.prefix), options, engine, time.monotonic())


def anchoring(engine: Engine, items: list[Item]) -> dict:
    rows = {"plain": [0, 0, 0], "anchored": [0, 0, 0]}  # duplicated, exact, n
    for item in items:
        base = _plan(engine, item, anchor_suffix=True)
        if not base.request.anchor:
            continue  # nothing after the cursor on its line: no anchor to place
        for name, request in (("plain", replace(base.request, anchor="")), ("anchored", base.request)):
            raw = engine.infill(request).text.split("\n", 1)[0]
            shape = shape_of(base.context)
            rows[name][0] += cut_suffix_repeat(raw, shape) != raw
            rows[name][1] += exact_match(raw, item.middle.split("\n", 1)[0], "whitespace")
            rows[name][2] += 1
    return {
        name: {"n": n, "duplicates_suffix": dup / n if n else None, "exact_first_line": ex / n if n else None}
        for name, (dup, ex, n) in rows.items()
    }


def parses(parser: Parser, text: str) -> bool:
    return not parser.parse(text.encode("utf-8")).root_node.has_error


def repair(engine: Engine, items: list[Item]) -> dict:
    parser = Parser(LanguageRegistry().grammar("python"))
    counts = {
        "without_repair": 0,
        "with_repair": 0,
        "n": 0,
        "repaired": 0,
        "withheld": 0,
        "offered_preserving": 0,
    }
    for item in items:
        if not parses(parser, item.prefix + item.middle + item.suffix):
            continue  # the reference file itself does not parse: nothing to preserve
        counts["n"] += 1
        plain = _plan(engine, item, syntax_repair=False)
        outcome = finish(plain, engine.infill(plain.request))
        text = outcome.proposals[0].text if outcome.proposals else ""
        counts["without_repair"] += parses(parser, item.prefix + text + item.suffix)
        fixed = _plan(engine, item, syntax_repair=True)
        repaired = execute(fixed, engine)
        text = repaired.proposals[0].text if repaired.proposals else ""
        preserved = parses(parser, item.prefix + text + item.suffix)
        counts["with_repair"] += preserved
        counts["repaired"] += repaired.repaired
        counts["withheld"] += not repaired.proposals  # nothing kept the parse: nothing offered
        # The file without a completion often parses (a whole line is missing): say what offered ones do.
        counts["offered_preserving"] += bool(repaired.proposals) and preserved
    n = counts["n"]
    return {**counts, "rate_without": counts["without_repair"] / n if n else None,
            "rate_with": counts["with_repair"] / n if n else None,
            "rate_among_offered": counts["offered_preserving"] / (n - counts["withheld"])
            if n > counts["withheld"] else None}  # fmt: skip


def confidence(engine: Engine, items: list[Item]) -> dict:
    rows = []
    for item in items:
        planned = _plan(engine, item)
        result = engine.infill(planned.request)
        best = result.candidates[0] if result.candidates else None
        outcome = finish(planned, result)
        text = outcome.proposals[0].text if outcome.proposals else ""
        rows.append((best.mean_confidence if best else 0.0, exact_match(text, item.middle, "stripped-line")))
    table = []
    for threshold in THRESHOLDS:
        offered = [exact for mean, exact in rows if mean * 100 >= threshold]
        table.append({
            "min_mean_confidence_percent": threshold,
            "offered_share": len(offered) / len(rows) if rows else None,
            "exact_among_offered": sum(offered) / len(offered) if offered else None,
            "exact_overall": sum(offered) / len(rows) if rows else None,
        })  # fmt: skip
    return {"n": len(rows), "by_threshold": table}


def typing(engine: Engine, items: list[Item], typed: int = 2) -> dict:
    fresh_steps, seeded_steps, n = 0, 0, 0
    for item in items:
        planned = _plan(engine, item)
        shown = finish(planned, engine.infill(planned.request)).proposals
        if not shown or len(shown[0].text) <= typed + 1:
            continue
        text = shown[0].text
        typed_item = replace(item, prefix=item.prefix + text[:typed])
        request = _plan(engine, typed_item).request
        fresh_steps += engine.infill(request).steps
        seeded = replace(request.with_lead_in_prefix(), seed_canvas=text[typed:], drafts=())
        seeded_steps += engine.infill(seeded).steps
        n += 1
    return {
        "n": n,
        "steps_fresh": fresh_steps / n if n else None,
        "steps_seeded": seeded_steps / n if n else None,
        "steps_saved": 1 - seeded_steps / fresh_steps if fresh_steps else None,
    }


def drafts_cost(engine: Engine, items: list[Item], cursors: int = 300) -> dict:
    """Time of the drafts stage on a real 5,000-line file (held-out files joined), at random cursors,
    with three other open documents of the language as neighbours."""
    import random
    import statistics

    texts = list(dict.fromkeys(item.prefix + item.middle + item.suffix for item in items))
    big, used = "", 0
    while big.count("\n") < 5000 and used < len(texts):
        big, used = big + texts[used], used + 1
    neighbours = tuple(texts[used : used + 3])
    opened = standalone(big, "python", REGISTRY)
    snapshot = opened.snapshot()
    rng = random.Random(0)
    times, counts = [], []
    for _ in range(cursors):
        cursor = rng.randrange(len(big))
        context = build_context(
            snapshot.document.lines, cursor, count_tokens=engine.count_tokens, spec=snapshot.spec,
            language_id="python", tree=snapshot.tree,
        )  # fmt: skip
        started = time.perf_counter()
        found = make_drafts(context, big, snapshot.tree, neighbours)
        times.append((time.perf_counter() - started) * 1000)
        counts.append(len(found))
    times.sort()
    return {
        "lines": big.count("\n"),
        "cursors": cursors,
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[int(0.95 * len(times)) - 1], 3),
        "max_ms": round(times[-1], 3),
        "with_a_draft": sum(1 for c in counts if c) / len(counts),
    }


MEASURES = {
    "anchoring": (anchoring, ("humaneval-random",)),
    "repair": (repair, ("humaneval-multi", "safim-block")),
    "confidence": (confidence, ("santacoder-fim",)),
    "typing": (typing, ("santacoder-fim",)),
    "drafts": (drafts_cost, ("heldout",)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.bench.features", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("measure", choices=[*MEASURES, "all"])
    parser.add_argument("--model", default="default")
    parser.add_argument("--limit", type=int, default=50, help="rows per benchmark")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    engine = load_engine(args.model, device="cpu", threads=args.threads or None)
    names = list(MEASURES) if args.measure == "all" else [args.measure]
    figures = {"model": args.model, "limit": args.limit}
    for name in names:
        measure, benchmarks = MEASURES[name]
        if name == "anchoring":  # only spans that end mid-line have a rest of the line to anchor
            items = [i for i in load_items(benchmarks[0]) if i.suffix.split("\n", 1)[0].strip()][: args.limit]
        else:
            limit = None if name == "drafts" else args.limit  # drafts: files enough for 5,000 lines
            items = [item for bench in benchmarks for item in load_items(bench, limit)]
        started = time.monotonic()
        figures[name] = measure(engine, items) | {"seconds": round(time.monotonic() - started, 1)}
        print(name, json.dumps(figures[name], indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
