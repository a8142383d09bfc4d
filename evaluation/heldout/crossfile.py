"""The cross-file subset: held-out positions whose middle uses a name another file of the package defines.

    python -m evaluation.heldout crossfile [--cache data/heldout-cache] [--corpus data/corpus/train]
        [--workspaces data/heldout-workspaces]

Files, filters, decontamination and cuts are the held-out build's own, from the report sources and the
cross-file-only ones. A position is kept when its middle uses a name that another file of the package
defines (evaluation.heldout.definitions) and its own file binds nowhere, builtins aside, and when no
held-out file already holds it (same file, and the same cursor or middle). Seeded: a rebuild from the
same cache, workspaces and corpus writes the same bytes.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.heldout.build import SEED, HeldoutFile, SourceReport, cap, gather, record_of
from evaluation.heldout.cuts import (
    KINDS,
    Cut,
    FileSyntax,
    Kind,
    candidate_cuts,
    choose_cuts,
    line_cuts,
    position_of,
)
from evaluation.heldout.decontaminate import Decontamination, corpus_shards, decontaminate
from evaluation.heldout.definitions import BUILTIN_MEMBERS, BUILTINS, FileNames, file_names, used_names
from evaluation.heldout.records import (
    CROSSFILE_OUTPUTS,
    DATA_DIR,
    OUTPUTS,
    HeldoutRecord,
    read_records,
    write_records,
)
from evaluation.heldout.sources import ALL_SOURCES, HeldoutSource
from evaluation.heldout.workspaces import DEFAULT_WORKSPACES, build_workspaces, code_files, workspace_for
from training.corpus.languages import language_of

log = logging.getLogger(__name__)

# Positions per output at most: the three kinds drawn together, then `line` positions on top.
MAX_POSITIONS = 105
MAX_LINE_POSITIONS = 35
# The languages whose files may define a name a file of `language` uses.
_DEFINING = {"python": {"python"}, "typescript": {"typescript", "javascript"}, "lua": {"lua"}}


@dataclass
class CrossfileResult:
    """What the subset build read, dropped and wrote."""

    reports: list[SourceReport]
    decontamination: Decontamination
    counts: dict[str, Counter[str]] = field(default_factory=dict)  # output -> positions per kind
    by_source: dict[str, Counter[str]] = field(default_factory=dict)  # source id -> positions per kind
    offered: dict[str, int] = field(default_factory=dict)  # output -> files with a cross-file cut
    sizes: dict[str, int] = field(default_factory=dict)  # output -> bytes


def package_definitions(folder: Path, language: str) -> dict[str, FileNames]:
    """Each code file of the package that can define names for `language` -> what it defines."""
    defining = _DEFINING[language]
    found: dict[str, FileNames] = {}
    for rel, text in code_files(folder).items():
        lang = language_of(rel)
        if lang in defining:
            parse_as = "typescript" if lang == "javascript" else lang  # TypeScript's grammar reads JS
            found[rel] = file_names(text, parse_as, rel)
    return found


def defined_elsewhere(package: dict[str, FileNames], path: str) -> tuple[set[str], set[str]]:
    """The top-level names and the members the package's files other than `path` define."""
    others = [names for rel, names in package.items() if rel != path]
    return set().union(*(n.defined for n in others)), set().union(*(n.members for n in others))


def existing_positions() -> tuple[set[tuple[str, str, int]], set[tuple[str, str, str]]]:
    """Cursors (source, path, byte offset) and middles (source, path, middle) the held-out files hold."""
    cursors: set[tuple[str, str, int]] = set()
    middles: set[tuple[str, str, str]] = set()
    for name in OUTPUTS:
        for r in read_records(name):
            cursors.add((r.source, r.path, len(r.prefix.encode())))
            middles.add((r.source, r.path, r.middle))
    return cursors, middles


@dataclass(frozen=True)
class Taken:
    """Positions the subset must not repeat."""

    cursors: set[tuple[str, str, int]]
    middles: set[tuple[str, str, str]]

    def holds(self, file: HeldoutFile, syntax: FileSyntax, cut: Cut) -> bool:
        """Whether a held-out file already holds this cursor, or this middle, in this file."""
        key = (file.source.id, file.path)
        return (*key, cut.start) in self.cursors or (*key, syntax.text(cut.start, cut.end)) in self.middles


def foreign_names(
    syntax: FileSyntax, cut: Cut, own: set[str], elsewhere: tuple[set[str], set[str]]
) -> set[str]:
    """The names the cut's middle uses that another file defines and its own file binds nowhere."""
    language = syntax.language
    bare, members = used_names(syntax, cut.start, cut.end)
    top, member = elsewhere
    found = (bare & top) - BUILTINS[language] | (members & member) - BUILTIN_MEMBERS[language]
    return found - own


def crossfile_cuts(
    file: HeldoutFile, syntax: FileSyntax, elsewhere: tuple[set[str], set[str]], taken: Taken
) -> dict[Kind, list[Cut]]:
    """The file's candidate cuts of every kind whose middle uses a name defined only elsewhere."""
    own = file_names(file.text, file.source.language, file.path).bound
    offered = candidate_cuts(syntax)
    offered["line"] = line_cuts(syntax)
    return {
        kind: [
            c for c in cuts if foreign_names(syntax, c, own, elsewhere) and not taken.holds(file, syntax, c)
        ]
        for kind, cuts in offered.items()
    }


def file_positions(
    file: HeldoutFile, syntax: FileSyntax, cuts: dict[Kind, list[Cut]], seed: int, tally: Counter[str]
) -> tuple[list[HeldoutRecord], list[HeldoutRecord]]:
    """Up to three positions of the three kinds on distinct lines, and one `line` position elsewhere."""
    rng = random.Random(f"{seed}:crossfile:{file.key}")
    chosen = choose_cuts({k: cuts[k] for k in KINDS}, rng, tally)
    starts = {c.start for c in chosen}
    lines = [c for c in cuts["line"] if c.start not in starts]
    line = rng.sample(lines, min(1, len(lines)))
    return (
        [record_of(file, position_of(syntax, c)) for c in chosen],
        [record_of(file, position_of(syntax, c)) for c in line],
    )


def sample(records: list[HeldoutRecord], limit: int, seed: int) -> list[HeldoutRecord]:
    """At most `limit` records drawn at random, in their original order."""
    if len(records) <= limit:
        return records
    keep = {id(r) for r in random.Random(f"{seed}:crossfile-lines").sample(records, limit)}
    return [r for r in records if id(r) in keep]


def language_records(
    language: str, files: list[HeldoutFile], workspaces: Path, taken: Taken, seed: int
) -> tuple[list[HeldoutRecord], int]:
    """The subset's records for one language, and how many files offered a cross-file cut."""
    definitions: dict[str, dict[str, FileNames]] = {}
    drawn: list[HeldoutRecord] = []
    lines: list[HeldoutRecord] = []
    tally: Counter[str] = Counter()
    offered = 0
    for file in files:
        if file.source.id not in definitions:
            definitions[file.source.id] = package_definitions(
                workspace_for(file.source.id, workspaces), language
            )
        syntax = FileSyntax(file.text, language, file.path)
        elsewhere = defined_elsewhere(definitions[file.source.id], file.path)
        cuts = crossfile_cuts(file, syntax, elsewhere, taken)
        offered += any(cuts.values())
        found, line = file_positions(file, syntax, cuts, seed, tally)
        drawn += found
        lines += line
    return cap(drawn, MAX_POSITIONS, seed) + sample(lines, MAX_LINE_POSITIONS, seed), offered


def build_crossfile(
    cache: Path,
    corpus: list[Path],
    workspaces: Path = DEFAULT_WORKSPACES,
    out: Path = DATA_DIR,
    offline: bool = False,
    seed: int = SEED,
    sources: tuple[HeldoutSource, ...] = ALL_SOURCES,
) -> CrossfileResult:
    """Gather, decontaminate and cut the subset of every language from `sources` (their report split,
    never calibration), and write its JSONL files."""
    shards = corpus_shards(corpus)
    if not shards:
        raise SystemExit(
            f"no corpus shards under {', '.join(map(str, corpus))}: refusing to build undecontaminated"
        )
    languages = {language: name for name, (language, _) in CROSSFILE_OUTPUTS.items()}
    build_workspaces(cache, workspaces, offline, sources)
    sources = tuple(s for s in sources if s.split == "report" and s.language in languages)
    reports: list[SourceReport] = []
    files: list[HeldoutFile] = []
    for source in sources:
        report, found = gather(source, cache, offline)
        reports.append(report)
        files += found
    decontam = decontaminate({f.key: f.text for f in files}, shards)
    by_source = {r.source.id: r for r in reports}
    clean = []
    for file in files:
        if file.key in decontam.hits:
            by_source[file.source.id].dropped["contaminated"] += 1
        else:
            by_source[file.source.id].kept += 1
            by_source[file.source.id].licenses[file.license] += 1
            clean.append(file)
    taken = Taken(*existing_positions())
    result = CrossfileResult(reports, decontam)
    for language, name in languages.items():
        ours = [f for f in clean if f.source.language == language]
        records, result.offered[name] = language_records(language, ours, workspaces, taken, seed)
        write_records(out / f"{name}.jsonl", records)
        result.sizes[name] = (out / f"{name}.jsonl").stat().st_size
        result.counts[name] = Counter(r.kind for r in records)
        for r in records:
            result.by_source.setdefault(r.source, Counter())[r.kind] += 1
        log.info("%-20s %4d positions %s", name, len(records), dict(result.counts[name]))
    return result
