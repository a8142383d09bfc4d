"""`python -m evaluation.heldout build|baseline|workspaces|crossfile`: rebuild the held-out set, score the
copy baseline (from the file alone, and with the package's other files), unpack every source whole as a
workspace, or build the cross-file subset."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from evaluation.baselines import KindScore, score_copy_baseline
from evaluation.benchmarks import Item, load_items
from evaluation.heldout.decontaminate import DEFAULT_CORPUS
from evaluation.heldout.records import ALL_OUTPUTS, CROSSFILE_OUTPUTS, DATA_DIR, OUTPUTS
from evaluation.heldout.workspaces import DEFAULT_WORKSPACES, build_workspaces, other_files


def baseline_scores(
    names: Iterable[str] = OUTPUTS, others: Callable[[Item], Sequence[str]] | None = None
) -> dict[str, list[KindScore]]:
    """The copy baseline on held-out files, per kind; with `others`, searching each row's other files too."""
    return {name: score_copy_baseline(load_items("heldout", language=name), others=others) for name in names}


def format_baseline(
    scores: dict[str, list[KindScore]], repository: dict[str, list[KindScore]] | None = None
) -> str:
    """The baseline's table by file and kind; with `repository`, its figures with the repository beside."""
    head = f"{'file':<20} {'kind':<13} {'n':>5} {'exact':>7} {'edit sim':>8} {'proposed':>8}"
    lines = [
        "copy baseline on the held-out set (exact match and edit similarity, whitespace-normalised)",
        head + (" | with the repository: exact, edit sim, proposed" if repository else ""),
    ]
    for name, rows in scores.items():
        for i, s in enumerate(rows):
            line = f"{name:<20} {s.kind:<13} {s.n:>5} {_figures(s)}"
            lines.append(line + (f" | {_figures(repository[name][i])}" if repository else ""))
    return "\n".join(lines)


def _figures(s: KindScore) -> str:
    """Exact match, edit similarity and share proposed, as table cells."""
    return f"{s.exact_match:>7.1%} {s.edit_similarity:>8.3f} {s.proposed:>8.1%}"


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
    base = sub.add_parser("baseline", help="score the copy heuristic on the committed set, by kind")
    base.add_argument(
        "--workspaces", type=Path, help="also score it searching each row's other package files, from here"
    )
    w = sub.add_parser("workspaces", help="unpack every source whole, one folder each, with MANIFEST.json")
    w.add_argument("--cache", type=Path, default=Path("data/heldout-cache"), help="downloaded packages")
    w.add_argument("--out", type=Path, default=DEFAULT_WORKSPACES, help="where the workspaces go")
    w.add_argument("--offline", action="store_true", help="use the cache only, download nothing")
    x = sub.add_parser("crossfile", help="cut the cross-file subset, and document it in SOURCES.md")
    x.add_argument("--cache", type=Path, default=Path("data/heldout-cache"), help="downloaded packages")
    x.add_argument(
        "--corpus", type=Path, action="append", help=f"training corpus shards (default {DEFAULT_CORPUS})"
    )
    x.add_argument("--workspaces", type=Path, default=DEFAULT_WORKSPACES, help="the sources unpacked whole")
    x.add_argument("--offline", action="store_true", help="use the cache only, download nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.command == "baseline":
        alone = baseline_scores(ALL_OUTPUTS)
        repository = baseline_scores(ALL_OUTPUTS, other_files(args.workspaces)) if args.workspaces else None
        print(format_baseline(alone, repository))
        return 0
    if args.command == "workspaces":
        build_workspaces(args.cache, args.out, args.offline)
        return 0
    if args.command == "crossfile":
        return crossfile(args, argv)
    from evaluation.heldout.build import build
    from evaluation.heldout.manifest import crossfile_section, render, with_section

    result = build(args.cache, args.corpus or [DEFAULT_CORPUS], DATA_DIR, args.offline)
    command = shlex.join(["python", "-m", "evaluation.heldout", *argv])
    sources_md = DATA_DIR / "SOURCES.md"
    kept = crossfile_section(sources_md.read_text()) if sources_md.is_file() else ""
    text = render(result, command, baseline_scores())
    sources_md.write_text(with_section(text, kept) if kept else text)
    return 0


def crossfile(args: argparse.Namespace, argv: list[str]) -> int:
    """Build the cross-file subset and rewrite its section of SOURCES.md (the rest stays as it is)."""
    from evaluation.heldout.crossfile import build_crossfile
    from evaluation.heldout.manifest import render_crossfile, with_section

    result = build_crossfile(
        args.cache, args.corpus or [DEFAULT_CORPUS], args.workspaces, DATA_DIR, args.offline
    )
    alone = baseline_scores(CROSSFILE_OUTPUTS)
    repository = baseline_scores(CROSSFILE_OUTPUTS, other_files(args.workspaces))
    workspaces = ["python", "-m", "evaluation.heldout", "workspaces"]
    if args.workspaces != DEFAULT_WORKSPACES:
        workspaces += ["--out", str(args.workspaces)]
    commands = [shlex.join(workspaces), shlex.join(["python", "-m", "evaluation.heldout", *argv])]
    sources_md = DATA_DIR / "SOURCES.md"
    sources_md.write_text(
        with_section(sources_md.read_text(), render_crossfile(result, commands, alone, repository))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
