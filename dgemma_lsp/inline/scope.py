"""How long a completion at the cursor may be (its mode) and where it must stop.

Mode, first rule that applies:
- cursor in a comment -> single_line (finish the comment);
- code after the cursor on its line (other than closing brackets, quotes, ``;`` or ``,``) -> single_line;
- cursor after code that opens a block (``def f():``, ``{``, ``then``, ``do``) with nothing but a
  closer after it -> block if the block's body is empty, multi_line if a body already follows;
- cursor after code with an unclosed bracket and nothing after it -> multi_line, up to the line
  that closes it;
- other code before the cursor -> single_line;
- blank line: block if the previous code line opens a block whose body is still empty (the
  next code line is that block's closing line, or for Python is not indented deeper); otherwise
  single_line when code at the cursor's indentation (or deeper) follows, since a gap between two
  statements is most often filled one line at a time (Enter after accepting asks again), else
  multi_line (the end of a body, or of the file). An empty file is a block.
"Body empty" uses the tree's enclosing block (its closing token's row) when there is one, and
indentation otherwise.

Stop: see ``Stop``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dgemma_lsp.documents.languages import LanguageSpec
from dgemma_lsp.documents.syntax import Block, in_comment
from dgemma_lsp.inline.cursor import CursorLine
from dgemma_lsp.inline.postprocess import open_brackets

Mode = Literal["single_line", "multi_line", "block"]

# Without a language: a line ending in an opening bracket or ":" opens a block.
_GENERIC_OPENER = re.compile(r"[\{\(\[:]\s*$")
_CLOSERS_ONLY = re.compile(r"[\s)\]}>'\"`;,]*")
_SCAN_LINES = 400  # how far to look for the previous / next code line
_HEADER_CHARS = 400  # a longer line is no block header to read the indent unit after (minified code)


def _balanced(line: str) -> bool:
    """Whether `line` closes every bracket it opens and no other, leaving out closers it starts with and
    the opener it ends with: a whole statement's header, not the last line of one written over several
    (strings not told apart: cheap enough for every keystroke)."""
    head = line.strip().lstrip(")]}").rstrip("([{")  # a closer before `else {`, the opener at its end
    return all(head.count(o) == head.count(c) for o, c in ("()", "[]", "{}"))


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


@dataclass(frozen=True)
class Stop:
    """Where a completion must end, for post-processing to apply to the completion text.

    - ``min_indent``: a completion line after the first, not blank, whose leading whitespace is
      shorter than this (in characters; a tab counts 1) leaves the scope: cut before it.
    - ``closing_text``: the token that closes the enclosing block and is already in the text
      after the cursor (``"}"``, ``"end"``, ``"fi"``), or None (Python, top level, unclosed
      block). A completion that writes it again at the block's level duplicates it.
    - ``block_end``: offset just after that closing token in the document, or None.
    - ``open_brackets``: brackets the cursor's line opened before the cursor and left open, when
      that is why the completion may run over lines: the line that closes them ends the statement,
      and the completion with it.
    """

    min_indent: int
    closing_text: str | None = None
    block_end: int | None = None
    open_brackets: int = 0


class Scope:
    """Mode, indentation and stop rules at one cursor."""

    def __init__(self, at: CursorLine, spec: LanguageSpec | None) -> None:
        self.at = at
        self.spec = spec

    def code_row(self, step: int) -> int | None:
        """The nearest non-blank line above (step -1) or below (step +1) the cursor line."""
        row = self.at.row + step
        for _ in range(_SCAN_LINES):
            if not 0 <= row < self.at.lines.line_count:
                return None
            if self.at.lines.line(row).strip():
                return row
            row += step
        return None

    def opens_block(self, line: str) -> bool:
        if self.spec is not None:
            return self.spec.opens_block(line)
        return _GENERIC_OPENER.search(line) is not None

    def indent_unit(self, start_row: int) -> str:
        """One indentation level, guessed near the cursor: the commonest indent increase after a line that
        opens a block and holds its whole header (the smallest one on ties), else the smallest increase
        of any kind (the lines of a statement written over several lines and of docstrings are indented
        freely)."""
        lines = self.at.lines
        smallest, previous, opened = 0, None, False
        after_openers: dict[int, int] = {}
        for row in range(max(start_row, self.at.row - 200), min(lines.line_count, self.at.row + 50)):
            line = lines.line(row)
            if row == self.at.row and not line.strip():
                line = line[: self.at.column] + "x"  # the whitespace typed on a blank line is an indent
            if not line.strip():
                continue
            if line.startswith("\t"):
                return "\t"
            indent = indent_of(line)
            if previous is not None and indent > previous:
                step = indent - previous
                smallest = min(smallest or step, step)
                if opened:
                    after_openers[step] = after_openers.get(step, 0) + 1
            previous = indent
            opened = len(line) <= _HEADER_CHARS and self.opens_block(line) and _balanced(line)
        if after_openers:
            return " " * max(after_openers, key=lambda step: (after_openers[step], -step))
        if smallest:
            return " " * smallest
        return self.spec.indent_unit if self.spec is not None else "    "

    def body_follows(self, opener_row: int, block: Block | None) -> bool:
        """Is there code between the block opened on ``opener_row`` and its end, after the cursor?

        Trusts the tree's block when it starts on the opener line (then its closing token's line
        ends the body); otherwise code indented deeper than the opener line is body.
        """
        after = self.at.line[self.at.column :]
        following = self.at.row if after.strip() else self.code_row(1)
        if following is None:
            return False
        lines = self.at.lines
        if block is not None and lines.row_of(lines.offset_of_byte(block.start_byte)) == opener_row:
            return following < lines.row_of(lines.offset_of_byte(block.closer_byte))
        if following == self.at.row:  # a closer right after the cursor on its line
            return False
        return indent_of(lines.line(following)) > indent_of(lines.line(opener_row))

    def mode_and_stop(self, block: Block | None, unit: str) -> tuple[Mode, Stop]:
        before, after = self.at.line[: self.at.column], self.at.line[self.at.column :]
        line_indent = indent_of(self.at.line)
        lines = self.at.lines
        closing = block.closer if block is not None else None
        block_end = lines.offset_of_byte(block.end_byte) if block is not None else None

        def stop(indent: int) -> Stop:
            return Stop(indent, closing, block_end)

        if self.at.tree is not None and in_comment(self.at.tree, self.at.cursor_byte):
            return "single_line", stop(line_indent)
        if after.strip() and not _CLOSERS_ONLY.fullmatch(after):
            return "single_line", stop(line_indent)
        if before.strip():
            if self.opens_block(before):
                mode: Mode = "multi_line" if self.body_follows(self.at.row, block) else "block"
                return mode, stop(line_indent + len(unit))
            opened = open_brackets(before)
            if not after.strip() and opened > 0:
                return "multi_line", Stop(line_indent, closing, block_end, opened)
            return "single_line", stop(line_indent)
        # A blank line (whitespace before the cursor; nothing, or only closers, after it).
        prev = self.code_row(-1)
        if prev is None and self.code_row(1) is None and not after.strip():
            return "block", stop(len(before))
        if prev is not None and self.opens_block(lines.line(prev)):
            # Whitespace already before the cursor is the editor's (or user's) choice of indent.
            indent = len(before) or indent_of(lines.line(prev)) + len(unit)
            if not self.body_follows(prev, block):
                return "block", stop(indent)
        else:
            indent = len(before)
            if not indent and block is not None:
                # An unindented blank line inside a block: assume the block's body indentation.
                block_row = lines.row_of(lines.offset_of_byte(block.start_byte))
                indent = indent_of(lines.line(block_row)) + len(unit)
        following = self.code_row(1)
        if following is not None and not after.strip() and indent_of(lines.line(following)) >= indent:
            return "single_line", stop(indent)
        return "multi_line", stop(indent)
