"""`python -m evaluation.heldout build|baseline`: rebuild the held-out set, or score the copy baseline."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from evaluation.baselines import KindScore, score_copy_baseline
from evaluation.benchmarks import load_items
from evaluation.heldout.decontaminate import DEFAULT_CORPUS
from evaluation.heldout.records import DATA_DIR, OUTPUTS


def baseline_scores() -> dict[str, list[KindScore]]:
    """The copy baseline on every held-out file, per kind."""
    return {name: score_copy_baseline(load_items("heldout", language=name)) for name in OUTPUTS}


def format_baseline(scores: dict[str, list[KindScore]]) -> str:
    lines = [
        "copy baseline on the held-out set (exact match and edit similarity, whitespace-normalised)",
        f"{'file':<20} {'kind':<13} {'n':>5} {'exact':>7} {'edit sim':>8} {'proposed':>8}",
    ]
    for name, rows in scores.items():
        for s in rows:
            lines.append(
                f"{name:<20} {s.kind:<13} {s.n:>5} {s.exact_match:>7.1%} {s.edit_similarity:>8.3f} "
                f"{s.proposed:>8.1%}"
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluation.heldout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="fetch, filter, decontaminate, cut and write the held-out set")
    b.add_argument("--cache", type=Path, default=Path("data/heldout-cache"), help="downloaded packages")
    b.add_argument(
        "--corpus",
        type=Path,
        action="append",
        help=f"training corpus shards (a .jsonl or a folder of them; repeatable; default {DEFAULT_CORPUS})",
    )
    b.add_argument("--offline", action="store_true", help="use the cache only, download nothing")
    sub.add_parser("baseline", help="score the copy heuristic on the committed set, by kind")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.command == "baseline":
        print(format_baseline(baseline_scores()))
        return 0
    from evaluation.heldout.build import build
    from evaluation.heldout.manifest import render

    result = build(args.cache, args.corpus or [DEFAULT_CORPUS], DATA_DIR, args.offline)
    command = shlex.join(["python", "-m", "evaluation.heldout", *argv])
    (DATA_DIR / "SOURCES.md").write_text(render(result, command, baseline_scores()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
