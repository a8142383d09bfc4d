"""LSP positions <-> string offsets, in the three LSP position encodings.

Offsets in this package are indices into the document's Python ``str`` (code points). LSP
positions are (line, character) where ``character`` counts utf-16 code units (VS Code),
utf-8 bytes (Neovim) or code points (utf-32). Tree-sitter wants utf-8 byte offsets.

LSP rules applied here:
- lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (not at the other breaks ``str.splitlines`` knows);
- a character past the end of a line is clamped to the line end (before its line break);
- a line past the end of the document is clamped to the end of the document;
- a utf-16 character that splits a surrogate pair, or a utf-8 one inside a multi-byte
  character, rounds down to the start of that character;
- negative values raise ``InvalidPosition``.

``LineIndex`` is an immutable snapshot of a text with its line table. Line start offsets are
filled lazily from the top, so an edit at line N only invalidates the table below N and a
keystroke does not re-split or re-measure the whole document.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from enum import StrEnum
from itertools import accumulate

__all__ = [
    "InvalidPosition",
    "LineIndex",
    "PositionEncoding",
    "column_to_index",
    "index_to_column",
    "split_lines",
    "utf8",
]


class InvalidPosition(ValueError):
    """A position or range that cannot mean anything: negative values, end before start."""


class PositionEncoding(StrEnum):
    """The LSP ``PositionEncodingKind`` values (lsprotocol's enum members compare equal)."""

    UTF8 = "utf-8"
    UTF16 = "utf-16"
    UTF32 = "utf-32"

    @classmethod
    def parse(cls, value: str) -> PositionEncoding:
        """The encoding named ``value``; raises ``ValueError`` naming the accepted values."""
        try:
            return cls(value)
        except ValueError:
            accepted = ", ".join(e.value for e in cls)
            raise ValueError(f"unknown position encoding {value!r}; expected one of {accepted}") from None


def utf8(text: str) -> bytes:
    """utf-8 bytes of ``text``; lone surrogates (possible in JSON input) pass through, never raise."""
    return text.encode("utf-8", "surrogatepass")


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(utf8(text))


# Line breaks per LSP, plus the extra ones str.splitlines() would also split at.
_OTHER_BREAKS = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)")


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` with their line breaks kept; always at least one (possibly empty) line.

    ``"a\\r\\nb\\n"`` -> ``["a\\r\\n", "b\\n", ""]``: the last element is the text after the last break.
    """
    if _OTHER_BREAKS.search(text) is None:
        lines = text.splitlines(keepends=True)  # C speed; same breaks as LSP when no others occur
    else:
        lines = _LSP_LINE.findall(text)
        rest = text[sum(map(len, lines)) :]
        if rest:
            lines.append(rest)
    if not lines or lines[-1].endswith(("\n", "\r")):
        lines.append("")
    return lines


def _content(line: str) -> str:
    """A line without its line break (a line holds at most one break, at its end)."""
    return line.rstrip("\r\n")


def _check(value: int, what: str) -> None:
    if value < 0:
        raise InvalidPosition(f"{what} must be >= 0, got {value}")


def _encoding(value: PositionEncoding | str) -> PositionEncoding:
    # Plain strings ("utf-16", lsprotocol's PositionEncodingKind) are accepted too.
    return value if value.__class__ is PositionEncoding else PositionEncoding.parse(value)


def column_to_index(line: str, character: int, encoding: PositionEncoding | str) -> int:
    """Index into ``line`` (no line break) of LSP ``character``, clamped and rounded down."""
    _check(character, "character")
    encoding = _encoding(encoding)
    if encoding is PositionEncoding.UTF32 or line.isascii():
        return min(character, len(line))
    if encoding is PositionEncoding.UTF16:
        units = line.encode("utf-16-le", "surrogatepass")
        if len(units) == 2 * len(line):  # no astral characters: units == code points
            return min(character, len(line))
        n = min(character, len(units) // 2)
        # A cut after a high surrogate splits a pair: round down to the pair's start.
        if n and 0xD8 <= units[2 * n - 1] <= 0xDB and 2 * n < len(units):
            n -= 1
        return len(units[: 2 * n].decode("utf-16-le", "surrogatepass"))
    data = utf8(line)  # utf-8
    n = min(character, len(data))
    while 0 < n < len(data) and data[n] & 0xC0 == 0x80:  # continuation byte: inside a char
        n -= 1
    return len(data[:n].decode("utf-8", "surrogatepass"))


def index_to_column(line: str, index: int, encoding: PositionEncoding | str) -> int:
    """LSP character of index ``index`` into ``line`` (no line break), clamped to the line end."""
    _check(index, "index")
    encoding = _encoding(encoding)
    index = min(index, len(line))
    if encoding is PositionEncoding.UTF32 or line.isascii():
        return index
    if encoding is PositionEncoding.UTF16:
        return len(line[:index].encode("utf-16-le", "surrogatepass")) // 2
    return len(utf8(line[:index]))  # utf-8


class LineIndex:
    """Immutable text snapshot with a lazily built line table.

    Offsets are code-point indices into ``text``; byte offsets are into ``utf8(text)``. The
    table (line start offsets, in code points and in bytes) is filled from the top on demand;
    ``replace`` builds the next snapshot, sharing the untouched lines and the valid part of the
    table, so an edit costs O(lines) pointer copies, not a re-split. Snapshots are safe to read
    from several threads: the lazy table is only ever replaced by a longer, equal-prefix list.
    """

    __slots__ = ("_bytes", "_lines", "_lone_cr", "_table", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines = split_lines(text)
        # (line start offsets, line start bytes) for lines 0..n-1; one tuple so that a thread
        # reading it while another extends it always sees two lists of the same length.
        self._table: tuple[list[int], list[int]] = ([0], [0])
        self._bytes: bytes | None = None
        # Lines ending in a lone "\r": tree-sitter counts rows at "\n" only, so points differ.
        self._lone_cr = sum(1 for line in self._lines if line.endswith("\r"))

    @classmethod
    def _snapshot(
        cls, text: str, lines: list[str], starts: list[int], byte_starts: list[int], lone_cr: int
    ) -> LineIndex:
        new = cls.__new__(cls)
        new._text, new._lines, new._lone_cr, new._bytes = text, lines, lone_cr, None
        new._table = (starts, byte_starts)
        return new

    # -- text --------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    @property
    def encoded(self) -> bytes:
        """``utf8(text)``, computed once per snapshot."""
        if self._bytes is None:
            self._bytes = utf8(self._text)
        return self._bytes

    def __len__(self) -> int:
        return len(self._text)

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def line(self, row: int) -> str:
        """Line ``row`` without its line break."""
        return _content(self._lines[row])

    def line_with_break(self, row: int) -> str:
        return self._lines[row]

    # -- the lazy line table -----------------------------------------------------------------

    @property
    def _starts(self) -> list[int]:
        return self._table[0]

    @property
    def _byte_starts(self) -> list[int]:
        return self._table[1]

    def _fill(self, row: int) -> None:
        """Make the table valid through ``row`` (row < line_count)."""
        starts, byte_starts = self._table
        have = len(starts)
        if row < have:
            return
        chunk = self._lines[have - 1 : row]
        new_starts = list(accumulate(map(len, chunk), initial=starts[-1]))
        new_bytes = list(accumulate(map(_utf8_len, chunk), initial=byte_starts[-1]))
        # Rebind, never mutate: a reader in another thread keeps a consistent table.
        self._table = (starts + new_starts[1:], byte_starts + new_bytes[1:])

    def line_start(self, row: int) -> int:
        self._fill(row)
        return self._starts[row]

    def line_end(self, row: int) -> int:
        """Offset of the end of line ``row``'s content (before its line break)."""
        return self.line_start(row) + len(self.line(row))

    def line_start_byte(self, row: int) -> int:
        self._fill(row)
        return self._byte_starts[row]

    def row_of(self, offset: int) -> int:
        """Line holding ``offset`` (clamped to the text); a break belongs to the line it ends."""
        _check(offset, "offset")
        offset = min(offset, len(self._text))
        last = len(self._lines) - 1
        if self._starts[-1] <= offset and len(self._starts) <= last:
            # Extend the table in growing steps until it passes offset.
            step = 64
            while self._starts[-1] <= offset and len(self._starts) <= last:
                self._fill(min(last, len(self._starts) - 1 + step))
                step *= 2
        return bisect_right(self._starts, offset) - 1

    def row_of_byte(self, byte: int) -> int:
        _check(byte, "byte offset")
        last = len(self._lines) - 1
        step = 64
        while self._byte_starts[-1] <= byte and len(self._byte_starts) <= last:
            self._fill(min(last, len(self._byte_starts) - 1 + step))
            step *= 2
        return bisect_right(self._byte_starts, byte) - 1

    # -- conversions -------------------------------------------------------------------------

    def offset_at(self, line: int, character: int, encoding: PositionEncoding | str) -> int:
        """Offset of LSP position (line, character), clamped and rounded per LSP."""
        _check(line, "line")
        _check(character, "character")
        if line >= len(self._lines):
            return len(self._text)
        return self.line_start(line) + column_to_index(self.line(line), character, encoding)

    def position_at(self, offset: int, encoding: PositionEncoding | str) -> tuple[int, int]:
        """LSP position (line, character) of ``offset``, clamped to the text."""
        row = self.row_of(offset)
        index = min(offset, len(self._text)) - self._starts[row]
        return row, index_to_column(self.line(row), index, encoding)

    def byte_at(self, offset: int) -> int:
        """utf-8 byte offset of ``offset``."""
        row = self.row_of(offset)
        index = min(offset, len(self._text)) - self._starts[row]
        return self._byte_starts[row] + _utf8_len(self._lines[row][:index])

    def offset_of_byte(self, byte: int) -> int:
        """Offset of utf-8 byte offset ``byte``; inside a character rounds down to its start."""
        row = self.row_of_byte(byte)
        line = self._lines[row]
        column = byte - self._byte_starts[row]
        if line.isascii():
            return self._starts[row] + min(column, len(line))
        data = utf8(line)
        column = min(column, len(data))
        while 0 < column < len(data) and data[column] & 0xC0 == 0x80:
            column -= 1
        return self._starts[row] + len(data[:column].decode("utf-8", "surrogatepass"))

    def point_at(self, offset: int) -> tuple[int, int]:
        """Tree-sitter point (row, byte column) of ``offset``.

        Tree-sitter starts a row at ``\\n`` only; that equals the LSP line unless the text has
        lone ``\\r`` breaks, which take a slower count.
        """
        offset = min(offset, len(self._text))
        if not self._lone_cr:
            row = self.row_of(offset)
            return row, _utf8_len(self._lines[row][: offset - self._starts[row]])
        row = self._text.count("\n", 0, offset)
        line_start = self._text.rfind("\n", 0, offset) + 1
        return row, _utf8_len(self._text[line_start:offset])

    # -- edits -------------------------------------------------------------------------------

    def replace(self, start: int, end: int, new_text: str) -> LineIndex:
        """The snapshot with ``text[start:end]`` replaced by ``new_text`` (offsets clamped)."""
        _check(start, "start")
        if end < start:
            raise InvalidPosition(f"range end {end} is before its start {start}")
        size = len(self._text)
        start, end = min(start, size), min(end, size)
        first, last = self.row_of(start), self.row_of(end)
        lines = self._lines
        line_start = self._starts[first]
        encoded = None
        if self._bytes is not None:  # splice the bytes too: cheaper than re-encoding non-ascii text
            encoded = self._bytes[: self.byte_at(start)] + utf8(new_text) + self._bytes[self.byte_at(end) :]
        segment = lines[first][: start - line_start] + new_text + lines[last][end - self._starts[last] :]
        # A "\n" landing right after a line that ends in a lone "\r" joins it into one "\r\n".
        if first > 0 and segment.startswith("\n") and lines[first - 1].endswith("\r"):
            first -= 1
            line_start = self._starts[first]
            segment = lines[first] + segment
        new_lines = split_lines(segment)
        if last < len(lines) - 1:
            new_lines.pop()  # the segment ends with a break: the "" after it is line last + 1
        lone_cr = (
            self._lone_cr
            - sum(1 for line in lines[first : last + 1] if line.endswith("\r"))
            + sum(1 for line in new_lines if line.endswith("\r"))
        )
        text = self._text[:start] + new_text + self._text[end:]
        new = LineIndex._snapshot(
            text,
            lines[:first] + new_lines + lines[last + 1 :],
            self._starts[: first + 1],
            self._byte_starts[: first + 1],
            lone_cr,
        )
        new._bytes = encoded
        return new

    def __repr__(self) -> str:
        return f"LineIndex(lines={len(self._lines)}, chars={len(self._text)})"
