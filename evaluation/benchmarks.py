"""Loaders for the public fill-in-the-middle benchmarks under shared/benchmarks (see its SOURCES.md),
and for the in-repository held-out set (`heldout`, see evaluation/heldout/SOURCES.md).

Every row becomes an `Item`: where the cursor is (prefix, suffix), the reference middle, how exact
match is judged, and what the executable check needs. Evaluation data only: nothing here feeds
training.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Literal

from evaluation.heldout.records import ALL_OUTPUTS, read_records

BENCHMARKS_ENV = "DGEMMA_BENCHMARKS"
CHECKOUT = Path(__file__).resolve().parents[1]

SINGLE_LINE_TOKENS = 48
MULTI_LINE_TOKENS = 128

# How exact match is judged: "line" compares stripped lines (SantaCoder), "whitespace" compares
# the texts with runs of whitespace collapsed (the others).
Convention = Literal["line", "whitespace"]
SANTACODER_LANGUAGES = {"py": "python", "js": "javascript", "java": "java"}


@dataclass(frozen=True)
class IOCase:
    stdin: str
    outputs: tuple[str, ...]  # any one of them is accepted


@dataclass(frozen=True)
class Check:
    """How to run a completed program.

    humaneval: one file, `program + test + check(entry_point)`;
    module: the program is `generated.py` and `test` imports it (cody);
    stdio: the program reads `cases[i].stdin` and must print one of `cases[i].outputs` (SAFIM).
    """

    kind: Literal["humaneval", "module", "stdio"]
    test: str = ""
    entry_point: str = ""
    cases: tuple[IOCase, ...] = ()


@dataclass(frozen=True)
class Item:
    id: str
    language: str  # the engine's language name (python, javascript, java)
    prefix: str
    suffix: str
    middle: str  # the reference
    single_line: bool
    check: Check | None = None  # None: exact match and edit similarity only
    kind: str = ""  # the held-out set's kind of position: rest_of_line, expression or block

    @property
    def max_new_tokens(self) -> int:
        return SINGLE_LINE_TOKENS if self.single_line else MULTI_LINE_TOKENS


@dataclass(frozen=True)
class Benchmark:
    name: str
    convention: Convention
    load: Callable[[Path, str], Iterator[Item]]  # (root, language) -> items
    description: str
    in_repo: bool = False  # the data ships in this repository, not under the benchmarks folder


def benchmarks_root(root: str | Path | None = None) -> Path:
    return Path(root or os.environ.get(BENCHMARKS_ENV) or shared_path("benchmarks"))


def shared_path(*parts: str) -> Path:
    """`../shared/<parts>` beside the checkout, where the project keeps material it only reads; for a
    clone of a checkout on this machine (CI clones one), beside the checkout it was cloned from."""
    for base in (CHECKOUT, local_origin(CHECKOUT)):
        if base is not None and (found := base.parent.joinpath("shared", *parts)).exists():
            return found
    return CHECKOUT.parent.joinpath("shared", *parts)


def local_origin(checkout: Path) -> Path | None:
    """The folder `checkout` was cloned from, when its origin is a path on this machine."""
    try:
        url = subprocess.run(
            ["git", "-C", str(checkout), "config", "--get", "remote.origin.url"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(url.removeprefix("file://"))
    return path if url and path.is_absolute() and path.is_dir() else None


def _jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def santacoder(root: Path, language: str = "py") -> Iterator[Item]:
    if language not in SANTACODER_LANGUAGES:
        raise ValueError(f"santacoder-fim has languages {', '.join(SANTACODER_LANGUAGES)}, not {language!r}")
    for row in _jsonl(root / "santacoder-fim" / "santacoder-fim-task.jsonl.gz"):
        if row["language"] != language:
            continue
        # The original file is prompt + "\n" + middle + "\n" + suffix: the cursor is at the start of
        # the missing line, the suffix on the line after it.
        yield Item(
            id=row["name"],
            language=SANTACODER_LANGUAGES[language],
            prefix=row["prompt"] + "\n",
            suffix="\n" + row["suffix"],
            middle=row["canonical_solution"],
            single_line=True,
        )


def _humaneval(file: str, single_line: bool) -> Callable[[Path, str], Iterator[Item]]:
    def load(root: Path, language: str = "") -> Iterator[Item]:
        for row in _jsonl(root / "human-eval-infilling" / file):
            yield Item(
                id=row["task_id"],
                language="python",
                prefix=row["prompt"],
                suffix=row["suffix"],
                middle=row["canonical_solution"],
                single_line=single_line,
                check=Check(kind="humaneval", test=row["test"], entry_point=row["entry_point"]),
            )

    return load


def _lf(text: str) -> str:
    # Most SAFIM Python programs have CRLF line ends; our models read LF, and Python runs either.
    return text.replace("\r\n", "\n")


def safim_block(root: Path, language: str = "") -> Iterator[Item]:
    for row in _jsonl(root / "safim" / "block_completion.jsonl.gz"):
        if row["lang"] != "python":
            continue
        prefix, suffix = _lf(row["eval_prompt"]).split("{{completion}}")
        cases = tuple(IOCase(case["input"], tuple(case["output"])) for case in row["unit_tests"])
        yield Item(
            id=row["task_id"],
            language="python",
            prefix=prefix,
            suffix=suffix,
            middle=_lf(row["ground_truth"]),
            single_line=False,
            check=Check(kind="stdio", cases=cases),
        )


def cody(root: Path, language: str = "") -> Iterator[Item]:
    for row in _jsonl(root / "cody-humaneval" / "cody_humaneval_infill.jsonl"):
        yield Item(
            id=row["id"],
            language="python",
            prefix=row["prefix"],
            suffix=row["suffix"],
            middle=row["middle"],
            single_line=row["kind"].endswith("single-line"),
            check=Check(kind="module", test=row["test"]),
        )


HELDOUT_ALIASES = {"py": "python", "ts": "typescript"}
# python, python-calibration, typescript, lua, and the cross-file subsets (python-crossfile, ...).
HELDOUT_LANGUAGES = tuple(ALL_OUTPUTS)


def heldout(root: Path, language: str = "python") -> Iterator[Item]:
    """The in-repository held-out set (evaluation/heldout); language python, python-calibration,
    typescript, lua, or a cross-file subset (python-crossfile, ...). `root` is unused: the data ships
    with the code."""
    for record in read_records(HELDOUT_ALIASES.get(language, language)):
        yield Item(
            id=record.id,
            language=record.language,
            prefix=record.prefix,
            suffix=record.suffix,
            middle=record.middle,
            single_line=record.kind != "block",
            kind=record.kind,
        )


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark("santacoder-fim", "line", santacoder, "SantaCoder FIM single lines (py, js or java)"),
        Benchmark(
            "humaneval-single",
            "whitespace",
            _humaneval("HumanEval-SingleLineInfilling.jsonl.gz", single_line=True),
            "HumanEval single-line infilling, pass@1",
        ),
        Benchmark(
            "humaneval-multi",
            "whitespace",
            _humaneval("HumanEval-MultiLineInfilling.jsonl.gz", single_line=False),
            "HumanEval multi-line infilling, pass@1",
        ),
        Benchmark(
            "humaneval-random",
            "whitespace",
            _humaneval("HumanEval-RandomSpanInfillingLight.jsonl.gz", single_line=False),
            "HumanEval random-span infilling (light), pass@1: spans often end mid-line",
        ),
        Benchmark("safim-block", "whitespace", safim_block, "SAFIM block completion, Python rows, pass@1"),
        Benchmark("cody", "whitespace", cody, "Cody's editor-style HumanEval cursors, pass@1"),
        Benchmark(
            "heldout",
            "whitespace",
            heldout,
            "held-out editor positions from packages no training list names (python, python-calibration, "
            "typescript, lua; the cross-file subsets python-crossfile, typescript-crossfile, lua-crossfile), "
            "by kind",
            in_repo=True,
        ),
    )
}


def load_items(
    name: str, limit: int | None = None, language: str = "py", root: str | Path | None = None
) -> list[Item]:
    """The first `limit` rows of benchmark `name` (all when None)."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}: choose from {', '.join(BENCHMARKS)}")
    folder = benchmarks_root(root)
    if not folder.is_dir() and not BENCHMARKS[name].in_repo:
        raise FileNotFoundError(f"no benchmarks at {folder}: set {BENCHMARKS_ENV} or pass --benchmarks")
    return list(islice(BENCHMARKS[name].load(folder, language), limit))
