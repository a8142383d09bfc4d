"""Regions to retype: runs of lines of code files, each with the workspace folder it lives in.

From the held-out set, a file's package is its workspace (`python -m evaluation.heldout workspaces`
unpacks them). The packages are split in two: the decision that shows or hides a suggestion is
fitted on typing sessions over FIT_SOURCES and reported on the others, never on the rows it was
fitted on. From any folder (`--repo DIR`), regions are drawn from its code files the same way.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dgemma_lsp.documents.languages import LanguageRegistry
from evaluation.heldout.records import read_records
from evaluation.heldout.workspaces import DEFAULT_WORKSPACES, workspace_for

REGION_LINES = 25
# Held-out packages the show-or-not decision is fitted on; every other held-out package is reported on.
# Python: the calibration split; TypeScript and Lua, which have none, give two and four small packages.
FIT_SOURCES = frozenset(
    {
        "pypi:mistletoe==1.6.0",
        "pypi:transitions==0.9.3",
        "pypi:typeguard==4.6.1",
        "pypi:tablib==3.10.0",
        "pypi:pyee==13.0.1",
        "npm:web-vitals==6.2.3",
        "npm:workbox-core==7.4.1",
        "debian:lua-nginx-kafka==0.07-1",
        "debian:lua-nginx-string==0.11-1",
        "debian:lua-nginx-websocket==0.08-1",
        "debian:lua-nginx-redis-connector==0.06-1",
    }
)
HELDOUT_FILES = ("python", "python-calibration", "typescript", "lua")
# Regions per language in each split: the report's 24 as the sessions had, the fit's twice that.
REGION_COUNTS = {
    "report": {"python": 12, "typescript": 6, "lua": 6},
    "fit": {"python": 24, "typescript": 12, "lua": 12},
}


@dataclass(frozen=True)
class Region:
    """Lines [start, end) of a file, to be retyped with `folder` as the workspace."""

    name: str  # source and path, for the tables
    language_id: str
    folder: Path  # the workspace folder
    path: str  # the file, relative to `folder` (never read from disk: the session opens `text`)
    text: str  # the whole file
    start: int  # character offsets of the region in `text`
    end: int

    @property
    def typed(self) -> str:
        return self.text[self.start : self.end]

    @property
    def opened(self) -> str:
        """The file as the session opens it: the region taken out."""
        return self.text[: self.start] + self.text[self.end :]


def region_in(text: str, rng: random.Random, lines: int = REGION_LINES) -> tuple[int, int] | None:
    """Offsets of `lines` lines of `text` starting at a line of code (the last one's line break left
    out: the file opens with an empty line where the region was, as a user writing new code has it),
    or None when it has too few.

    The region starts at a line with code at the file's outermost indentation or one level in, and
    at most a third of its lines are blank."""
    rows = text.split("\n")
    starts, offset = [], 0
    for row in rows:
        starts.append(offset)
        offset += len(row) + 1
    candidates = [
        i
        for i in range(len(rows) - lines)
        if rows[i].strip()
        and len(rows[i]) - len(rows[i].lstrip()) <= 4
        and not rows[i].lstrip().startswith(("#", "--", "//", "*", '"""', "'''"))
        and sum(not r.strip() for r in rows[i : i + lines]) <= lines // 3
    ]
    if not candidates:
        return None
    first = rng.choice(candidates)
    return starts[first], starts[first + lines] - 1  # the last line's break stays: the cursor's line is empty


def heldout_regions(
    split: str, seed: int = 0, root: Path = DEFAULT_WORKSPACES, counts: dict[str, int] | None = None
) -> list[Region]:
    """Regions of held-out files of the split ("fit" or "report"), one per file, packages taken in
    turn so that each language's regions spread over its packages."""
    wanted = counts or REGION_COUNTS[split]
    files: dict[str, dict[str, dict[tuple[str, str], str]]] = defaultdict(lambda: defaultdict(dict))
    for name in HELDOUT_FILES:
        for record in read_records(name):
            if (record.source in FIT_SOURCES) == (split == "fit") and record.language in wanted:
                files[record.language][record.source][(record.source, record.path)] = record.text
    rng = random.Random(seed)
    regions: list[Region] = []
    for language, by_source in sorted(files.items()):
        queues = {source: sorted(paths.items()) for source, paths in sorted(by_source.items())}
        for queue in queues.values():
            rng.shuffle(queue)
        taken = 0
        while taken < wanted[language] and any(queues.values()):
            for queue in queues.values():
                if taken >= wanted[language]:
                    break
                while queue:
                    (source_id, path), text = queue.pop()
                    span = region_in(text, rng)
                    if span is not None:
                        folder = workspace_for(source_id, root).resolve()
                        regions.append(
                            Region(f"{source_id}/{path}", language, folder, path, text, span[0], span[1])
                        )
                        taken += 1
                        break
    return regions


def folder_regions(
    folder: Path, count: int, seed: int = 0, languages: Iterable[str] | None = None
) -> list[Region]:
    """`count` regions of the code files under `folder` (one per file, files drawn at random): the
    languages the registry knows, or only `languages`."""
    registry = LanguageRegistry()
    allowed = set(languages) if languages else None
    paths = []
    for path in sorted(folder.rglob("*")):
        rel = PurePosixPath(path.relative_to(folder).as_posix())
        if any(part.startswith(".") or part in {"node_modules", "dist", "build"} for part in rel.parts):
            continue
        spec = registry.spec_for_path(path) if path.is_file() and not path.is_symlink() else None
        if spec is not None and (allowed is None or spec.name in allowed):
            paths.append((path, spec.name))
    rng = random.Random(seed)
    rng.shuffle(paths)
    regions: list[Region] = []
    for path, language in paths:
        if len(regions) >= count:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        span = region_in(text, rng)
        if span is not None:
            rel = path.relative_to(folder).as_posix()
            regions.append(Region(rel, language, folder, rel, text, span[0], span[1]))
    return regions


def excluded_from_index(region_paths: Iterable[str]) -> list[str]:
    """workspaceExclude patterns for the files being retyped and their compiled copies (a package
    may ship `dist/x.js` beside `src/x.ts`): the answer must come from the buffer's other lines only."""
    patterns: list[str] = []
    for path in region_paths:
        pure = PurePosixPath(path)
        patterns.append(f"/{path}")
        stem = pure.name.split(".")[0]
        parent = pure.parent.name
        where = f"**/{parent}/{stem}" if parent else f"**/{stem}"
        patterns += [f"{where}.js", f"{where}.mjs", f"{where}.cjs", f"{where}.d.ts"]
    return patterns
