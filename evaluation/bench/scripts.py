"""Scripted typing sessions: where a user types what, and how fast.

A script file is ordinary source with `<|type|>TEXT<|end|>` marks. The file opens with every TEXT
removed; the session then goes to each mark in order (a cursor jump), types TEXT key by key with
human gaps between keys, pauses to read the ghost text, and sometimes accepts it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

TYPE, END = "<|type|>", "<|end|>"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
LANGUAGE_IDS = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust"}


@dataclass(frozen=True)
class Segment:
    offset: int  # where typing starts, in the text with all earlier segments typed and no later ones
    text: str


@dataclass(frozen=True)
class Script:
    name: str
    language_id: str
    initial: str  # the file as opened: no segment typed
    segments: tuple[Segment, ...]


def parse_script(name: str, language_id: str, marked: str) -> Script:
    initial, segments, rest = [], [], marked
    typed_so_far = 0
    while TYPE in rest:
        before, _, after = rest.partition(TYPE)
        text, _, rest = after.partition(END)
        initial.append(before)
        typed_so_far += len(before)
        segments.append(Segment(offset=typed_so_far, text=text))
        typed_so_far += len(text)
    initial.append(rest)
    return Script(name=name, language_id=language_id, initial="".join(initial), segments=tuple(segments))


def load_scripts(folder: Path = FIXTURES) -> list[Script]:
    scripts = []
    for path in sorted(folder.iterdir()):
        if path.suffix in LANGUAGE_IDS:
            scripts.append(parse_script(path.name, LANGUAGE_IDS[path.suffix], path.read_text()))
    return scripts


def big_file(script: Script, lines: int = 5000) -> Script:
    """The script's file repeated to `lines` lines, typing its segments in the middle copy: overhead on a
    big file (every segment, so that its percentiles rest on as many answers as the script gives)."""
    unit = script.initial if script.initial.endswith("\n") else script.initial + "\n"
    copies = max(1, lines // unit.count("\n"))
    before = (copies // 2) * len(unit)  # the copies above the middle one are never typed in
    return Script(
        name=f"{script.name} x{copies} ({copies * unit.count(chr(10))} lines)",
        language_id=script.language_id,
        initial=unit * copies,
        segments=tuple(Segment(offset=before + s.offset, text=s.text) for s in script.segments),
    )


@dataclass(frozen=True)
class Pace:
    """Human timing: lognormal gaps between keys, a pause to read the ghost text, sometimes an accept."""

    key_median_s: float = 0.11
    key_sigma: float = 0.5
    read_s: tuple[float, float] = (0.5, 1.0)
    accept_probability: float = 0.5

    def key_gap(self, rng: random.Random) -> float:
        return min(0.6, max(0.035, rng.lognormvariate(0, self.key_sigma) * self.key_median_s))

    def read_pause(self, rng: random.Random) -> float:
        return rng.uniform(*self.read_s)
