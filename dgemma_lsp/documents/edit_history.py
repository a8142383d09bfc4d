"""The last few edits of a document, as small diffs, for next-edit suggestions.

Keystrokes that continue the previous edit (typing a word, deleting with backspace) merge into it,
so the history holds edits as a person thinks of them ("renamed total to subtotal"), not keys.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MAX_EDITS = 8
_COMMENT = {"python": "#", "bash": "#", "shellscript": "#", "sh": "#", "lua": "--"}


@dataclass(frozen=True)
class RecentEdit:
    offset: int  # where the change starts, in the text after it
    old: str
    new: str


class EditHistory:
    """The recent edits of one document."""

    def __init__(self) -> None:
        self._edits: deque[RecentEdit] = deque(maxlen=MAX_EDITS)

    def record(self, offset: int, old: str, new: str) -> None:
        if old == new:
            return
        edits = self._edits
        last = edits[-1] if edits else None
        if last is not None and not old and offset == last.offset + len(last.new):
            edits[-1] = RecentEdit(last.offset, last.old, last.new + new)  # typing on
        elif (
            last is not None
            and not new
            and offset + len(old) == last.offset + len(last.new)
            and len(old) <= len(last.new)
        ):
            edits[-1] = RecentEdit(last.offset, last.old, last.new[: len(last.new) - len(old)])  # backspace
        else:
            edits.append(RecentEdit(offset, old, new))

    def recent(self) -> list[RecentEdit]:
        return [e for e in self._edits if e.old != e.new]


def preamble(edits: list[RecentEdit], language_id: str, limit: int = 4) -> str:
    """The recent edits as comments, put before the code the model sees."""
    mark = _COMMENT.get(language_id, "//")
    lines = []
    for edit in edits[-limit:]:
        old, new = _one_line(edit.old), _one_line(edit.new)
        lines.append(f"{mark} edit: {old!r} -> {new!r}\n")
    return "".join(lines)


def _one_line(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
