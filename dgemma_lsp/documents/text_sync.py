"""LSP full and incremental text sync on immutable documents, and the byte edits tree-sitter needs.

A ``Document`` is an immutable snapshot (a worker thread can read one while the event loop
applies the next change). ``change_document`` applies LSP content changes in order and returns
one ``Edit`` per change, in utf-8 bytes and tree-sitter points, for ``Tree.edit``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from dgemma_lsp.documents.positions import InvalidPosition, LineIndex, PositionEncoding, utf8

__all__ = [
    "ContentChange",
    "Document",
    "DocumentChange",
    "Edit",
    "UnknownDocument",
    "apply_changes",
    "change_document",
]


class UnknownDocument(LookupError):
    """A request names a document that is not open."""

    def __init__(self, uri: str) -> None:
        super().__init__(f"document not open: {uri}")
        self.uri = uri


class _Position(Protocol):
    line: int
    character: int


class _Range(Protocol):
    start: _Position
    end: _Position


class ContentChange(Protocol):
    """What lsprotocol's ``TextDocumentContentChangePartial`` / ``...WholeDocument`` look like.

    A change without a ``range`` attribute (or with ``range`` None) replaces the whole text.
    """

    text: str


Point = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Edit:
    """One change in the terms of tree-sitter's ``Tree.edit``: utf-8 bytes, (row, byte column)."""

    start_byte: int
    old_end_byte: int
    new_end_byte: int
    start_point: Point
    old_end_point: Point
    new_end_point: Point


@dataclass(frozen=True, slots=True)
class Document:
    """One version of an open document."""

    uri: str
    language_id: str
    version: int
    lines: LineIndex

    @property
    def text(self) -> str:
        return self.lines.text

    def offset_at(self, line: int, character: int, encoding: PositionEncoding | str) -> int:
        return self.lines.offset_at(line, character, encoding)

    def position_at(self, offset: int, encoding: PositionEncoding | str) -> tuple[int, int]:
        return self.lines.position_at(offset, encoding)


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """The document after a ``didChange`` and the edits that led there, in order."""

    document: Document
    edits: tuple[Edit, ...]


def _end_point(start: Point, inserted: str) -> Point:
    """Where ``inserted`` ends when written at ``start`` (rows counted at "\\n", as tree-sitter does)."""
    newlines = inserted.count("\n")
    if not newlines:
        return start[0], start[1] + len(utf8(inserted))
    return start[0] + newlines, len(utf8(inserted[inserted.rfind("\n") + 1 :]))


def _apply(lines: LineIndex, change: ContentChange, encoding: PositionEncoding) -> tuple[LineIndex, Edit]:
    text = change.text
    if not isinstance(text, str):
        raise TypeError(f"content change text must be a str, got {type(text).__name__}")
    rng: _Range | None = getattr(change, "range", None)
    if rng is None:
        start = end = None
        start_offset, end_offset = 0, len(lines)
    else:
        start, end = rng.start, rng.end
        if (end.line, end.character) < (start.line, start.character):
            raise InvalidPosition(
                f"range end {end.line}:{end.character} is before its start {start.line}:{start.character}"
            )
        start_offset = lines.offset_at(start.line, start.character, encoding)
        end_offset = lines.offset_at(end.line, end.character, encoding)
    start_point = lines.point_at(start_offset)
    start_byte = lines.byte_at(start_offset)
    edit = Edit(
        start_byte=start_byte,
        old_end_byte=lines.byte_at(end_offset),
        new_end_byte=start_byte + len(utf8(text)),
        start_point=start_point,
        old_end_point=lines.point_at(end_offset),
        new_end_point=_end_point(start_point, text),
    )
    if rng is None:
        return LineIndex(text), edit
    return lines.replace(start_offset, end_offset, text), edit


def change_document(
    document: Document, version: int, changes: Iterable[ContentChange], encoding: PositionEncoding
) -> DocumentChange:
    """Apply ``changes`` in order; each range is read against the text the previous one left.

    Ranges past the end are clamped (LSP); an end before its start raises ``InvalidPosition``
    and nothing is applied (the caller keeps ``document``).
    """
    lines = document.lines
    edits: list[Edit] = []
    for change in changes:
        lines, edit = _apply(lines, change, encoding)
        edits.append(edit)
    return DocumentChange(Document(document.uri, document.language_id, version, lines), tuple(edits))


def apply_changes(
    text: str, changes: Sequence[ContentChange], encoding: PositionEncoding
) -> tuple[str, list[Edit]]:
    """Apply ``changes`` to a plain string (for one-off use and tests); see ``change_document``."""
    changed = change_document(Document("", "", 0, LineIndex(text)), 0, changes, encoding)
    return changed.document.text, list(changed.edits)
