"""`dgemma-lsp bench typing`: regions of code retyped through the real server over stdio; how often
a suggestion is shown, how much of it is taken, how much code it writes.

    dgemma-lsp bench typing                          the held-out report split (24 regions)
    dgemma-lsp bench typing --split fit              the packages the show-or-not decision is fitted on
    dgemma-lsp bench typing --repo DIR --regions 24  any folder: regions of its code files
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import platform
import sys
from pathlib import Path

from evaluation.heldout.workspaces import DEFAULT_WORKSPACES
from evaluation.typing_sessions.regions import folder_regions, heldout_regions
from evaluation.typing_sessions.session import RegionLog, run_sessions
from evaluation.typing_sessions.summary import by_language, table


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dgemma-lsp bench typing", description=__doc__.split("\n")[0])
    p.add_argument(
        "--split", choices=("report", "fit"), default="report", help="held-out packages to type in"
    )
    p.add_argument("--repo", type=Path, action="append", help="a folder to draw regions from (repeatable)")
    p.add_argument("--regions", type=int, default=24, help="with --repo: regions per folder")
    p.add_argument("--languages", nargs="*", help="only these languages")
    p.add_argument("--limit", type=int, default=0, help="type only the first N regions")
    p.add_argument(
        "--per-language", type=int, default=0, help="type only the first N regions of each language"
    )
    p.add_argument("--model", default="default")
    p.add_argument("--eagerness", choices=("quiet", "balanced", "eager"), help="completion.eagerness")
    p.add_argument("--budget-ms", type=int, help="completion.latencyBudgetMs (default: the server's)")
    p.add_argument(
        "--option", action="append", default=[], metavar="PATH=JSON", help="e.g. completion.drafts=false"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workspaces", type=Path, default=DEFAULT_WORKSPACES, help="held-out packages, unpacked")
    p.add_argument(
        "--facts", action="store_true", help="keep the server's facts of every suggestion (to fit on)"
    )
    p.add_argument("--json", type=Path, help="the figures and every pause, as JSON")
    p.add_argument(
        "--plot", type=Path, metavar="OUT.png", help="shown / taken / wrong per language, as a PNG"
    )
    return p


def server_options(args: argparse.Namespace) -> dict:
    """initializationOptions for the server from the command line."""
    options: dict = {}
    if args.eagerness:
        options.setdefault("completion", {})["eagerness"] = args.eagerness
    if args.budget_ms is not None:
        options.setdefault("completion", {})["latencyBudgetMs"] = args.budget_ms
    for item in args.option:
        path, _, raw = item.partition("=")
        *parents, leaf = path.split(".")
        node = options
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = json.loads(raw)
    return options


def regions_of(args: argparse.Namespace) -> list:
    if args.repo:
        found = [
            r
            for folder in args.repo
            for r in folder_regions(folder.resolve(), args.regions, args.seed, args.languages)
        ]
    else:
        found = heldout_regions(args.split, args.seed, args.workspaces)
        if args.languages:
            found = [r for r in found if r.language_id in args.languages]
    if args.per_language:
        found = first_of_each_language(found, args.per_language)
    return found[: args.limit] if args.limit else found


def first_of_each_language(regions: list, count: int) -> list:
    """The first `count` regions of each language, in their order."""
    kept, seen = [], {}
    for region in regions:
        seen[region.language_id] = seen.get(region.language_id, 0) + 1
        if seen[region.language_id] <= count:
            kept.append(region)
    return kept


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    regions = regions_of(args)
    if not regions:
        raise SystemExit(
            "no regions to type: python -m evaluation.heldout workspaces unpacks the held-out packages"
        )
    options = server_options(args)
    typed: list[RegionLog] = []

    def done(log: RegionLog) -> None:
        typed.append(log)
        shown = [p for p in log.pauses if p.shown]
        taken = sum(p.verdict in ("whole", "partial") for p in shown)
        print(
            f"[{len(typed)}/{len(regions)}] {log.region}: {len(log.pauses)} pauses, {len(shown)} shown, "
            f"{taken} taken",
            file=sys.stderr,
        )

    logs = asyncio.run(run_sessions(regions, args.model, options, args.facts, done))
    blocks = by_language(logs)
    print(table(blocks))
    if args.json:
        record = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "python": platform.python_version()},
            "command": "dgemma-lsp bench typing " + " ".join(argv),
            "model": args.model,
            "options": options,
            "figures": blocks,
            "regions": [log.to_json() for log in logs],
        }
        args.json.write_text(json.dumps(record, indent=1))
    if args.plot:
        from evaluation.typing_sessions.plot import plot

        plot(blocks, args.plot, "dgemma-lsp bench typing " + " ".join(argv))
    return 0
