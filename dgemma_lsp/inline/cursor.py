"""The cursor's line, found once per request and shared by the window and scope readers."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Tree

from dgemma_lsp.documents.positions import LineIndex


@dataclass(frozen=True)
class CursorLine:
    lines: LineIndex
    tree: Tree | None
    row: int
    line_start: int
    line: str  # the cursor's line, without its break
    column: int  # code points, never inside a "\r\n"
    cursor: int  # line_start + column
    cursor_byte: int  # utf-8 offset of the cursor (0 without a tree: nothing needs it)

    @classmethod
    def at(cls, lines: LineIndex, cursor: int, tree: Tree | None) -> CursorLine:
        row = lines.row_of(cursor)
        line_start = lines.line_start(row)
        line = lines.line(row)
        column = min(cursor - line_start, len(line))
        cursor = line_start + column
        return cls(
            lines=lines,
            tree=tree,
            row=row,
            line_start=line_start,
            line=line,
            column=column,
            cursor=cursor,
            cursor_byte=lines.byte_at(cursor) if tree is not None else 0,
        )

    @property
    def text(self) -> str:
        return self.lines.text
