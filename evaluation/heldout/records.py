"""The held-out record and its JSONL files: one object per line, one file per language and split."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent

# Output name -> (language, split). TypeScript and Lua have a report split only.
OUTPUTS: dict[str, tuple[str, str]] = {
    "python": ("python", "report"),
    "python-calibration": ("python", "calibration"),
    "typescript": ("typescript", "report"),
    "lua": ("lua", "report"),
}
# The cross-file subset (evaluation/heldout/crossfile.py): positions whose middle uses a name another file
# of the package defines. Built by `python -m evaluation.heldout crossfile`, not by `build`.
CROSSFILE_OUTPUTS: dict[str, tuple[str, str]] = {
    "python-crossfile": ("python", "report"),
    "typescript-crossfile": ("typescript", "report"),
    "lua-crossfile": ("lua", "report"),
}
ALL_OUTPUTS: dict[str, tuple[str, str]] = OUTPUTS | CROSSFILE_OUTPUTS


@dataclass(frozen=True)
class HeldoutRecord:
    """One cursor position: the file is prefix + middle + suffix."""

    id: str
    language: str
    kind: str  # rest_of_line | expression | block
    split: str  # report | calibration
    source: str  # registry:name==version
    path: str  # inside the package
    license: str  # SPDX id, per file
    prefix: str
    middle: str
    suffix: str

    @property
    def text(self) -> str:
        return self.prefix + self.middle + self.suffix


def output_name(language: str, split: str) -> str:
    return language if split == "report" else f"{language}-{split}"


def jsonl_path(name: str, folder: Path = DATA_DIR) -> Path:
    if name not in ALL_OUTPUTS:
        raise ValueError(f"no held-out file {name!r}: choose from {', '.join(ALL_OUTPUTS)}")
    return folder / f"{name}.jsonl"


def read_records(name: str, folder: Path = DATA_DIR) -> Iterator[HeldoutRecord]:
    with jsonl_path(name, folder).open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield HeldoutRecord(**json.loads(line))


def write_records(path: Path, records: Iterable[HeldoutRecord]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
            count += 1
    return count
