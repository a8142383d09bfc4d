"""CPython's standard library of the running interpreter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from training.corpus.sources.base import Candidate, Source, SourceInfo

_TEST_DIRS = frozenset({"test", "tests", "idle_test"})


def stdlib_files(stdlib: Path, langs: set[str]) -> Source:
    """CPython's pure-Python standard library, without its test suites (PSF license)."""
    version = ".".join(map(str, sys.version_info[:3]))
    info = SourceInfo(f"cpython-{version}", "stdlib", version, "PSF-2.0", "CPython LICENSE.txt (PSF-2.0)")

    def walk() -> Iterator[Candidate]:
        if "python" not in langs:
            return
        for path in sorted(stdlib.rglob("*.py")):
            rel = path.relative_to(stdlib)
            top = rel.parts[0]
            if top in ("site-packages", "lib-dynload", "__pycache__") or top.startswith(
                ("config-", "_sysconfigdata")
            ):
                continue
            if _TEST_DIRS & set(rel.parts[:-1]):
                continue
            yield Candidate(f"{info.name}/{rel.as_posix()}", "python", path.read_bytes(), info.license)

    return info, walk()
