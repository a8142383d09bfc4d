"""`python -m training.corpus build`: gather, filter, dedup, decontaminate and write the corpus."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from training.corpus.build import build
from training.corpus.build_config import DEFAULT_BENCHMARKS, BuildConfig
from training.corpus.languages import ALL_LANGS
from training.corpus.manifest import megabytes

log = logging.getLogger(__name__)


def _parse_langs(value: str) -> set[str]:
    langs = {v.strip() for v in value.split(",") if v.strip()}
    unknown = langs - set(ALL_LANGS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown languages: {', '.join(sorted(unknown))}")
    return langs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.corpus", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="gather, filter, dedup, decontaminate and write the corpus")
    b.add_argument("--out", type=Path, default=Path("data/corpus"))
    b.add_argument("--cache", type=Path, default=Path("data/cache"), help="downloaded packages")
    b.add_argument("--langs", type=_parse_langs, default=set(ALL_LANGS), help="comma-separated")
    b.add_argument("--max-mb", type=float, default=None, help="stop adding a language's files past N MB")
    b.add_argument("--valid-fraction", type=float, default=0.01)
    b.add_argument("--benchmarks", type=Path, default=DEFAULT_BENCHMARKS, help="held-out benchmarks")
    b.add_argument("--offline", action="store_true", help="use the cache only, download nothing")
    b.add_argument("-v", "--verbose", action="store_true", help="log every dropped file and why")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s"
    )
    cfg = BuildConfig(
        out=args.out,
        cache=args.cache,
        langs=args.langs,
        benchmarks=args.benchmarks,
        max_bytes=int(args.max_mb * 1e6) if args.max_mb else None,
        valid_fraction=args.valid_fraction,
        offline=args.offline,
    )
    manifest = build(cfg)
    for lang, entry in manifest["languages"].items():  # type: ignore[union-attr]
        if lang in cfg.langs:
            files, size = sum(entry["files"].values()), sum(entry["bytes"].values())
            log.info("%-11s %7d files %8s MB  dropped %s", lang, files, megabytes(size), entry["dropped"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
