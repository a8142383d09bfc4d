"""What the model sees and how long its answer may be: the pure core of a completion request.

``build_context`` turns (text, cursor, syntax tree or None, language, token counter, options,
previous anchor) into a ``CompletionContext``:

Windows. The prefix window starts at a line start and the suffix window ends at a line end
(after its line break), each holding at most its budget of model tokens. A fresh prefix window
takes as many whole lines above the cursor as fit, then moves its start down to the first
syntax boundary in it (a child start of the smallest node spanning the window: top-level
definitions, or class members inside a class) if that keeps at least ``boundary_fill`` of the
budget. The suffix window does the same downwards with boundary ends. A line longer than the
whole budget is cut inside the line, as the one exception to line boundaries.

Anchors. The engine reuses its KV cache up to the first changed prompt token, so the windows
must not move while the user types. ``WindowAnchor`` records where the last windows began and
ended, each as an offset, as a distance from the end of the text, and as the text found there
(a short ``head``/``tail`` string). On the next request the old edge is looked up at both
places: an edit after the prefix start leaves its offset valid, an edit before it (typing at
the cursor, for the suffix end; an edit above the window, for the prefix start) leaves its
distance from the end valid. The edge is reused only if the text there is unchanged, it is
still at a line boundary on the right side of the cursor, and the window from it holds
between ``min_fill`` and ``anchor_slack`` times the budget (less is fine at the start or end of
the file). Otherwise the window is built fresh. So no caller bookkeeping of edit offsets is
needed, and an edit before the anchor can never leave it pointing mid-line.

Mode, first rule that applies:
- cursor in a comment -> single_line (finish the comment);
- code after the cursor on its line (other than closing brackets, quotes, ``;`` or ``,``) -> single_line;
- cursor after code that opens a block (``def f():``, ``{``, ``then``, ``do``) with nothing but a
  closer after it -> block if the block's body is empty, multi_line if a body already follows;
- cursor after code with an unclosed bracket and nothing after it -> multi_line;
- other code before the cursor -> single_line;
- blank line: block if the previous code line opens a block whose body is still empty (the
  next code line is that block's closing line, or for Python is not indented deeper), else
  multi_line. An empty file is a block.
"Body empty" uses the tree's enclosing block (its closing token's row) when there is one, and
indentation otherwise.

Stop: see ``Stop``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tree_sitter import Tree

from dgemma_lsp.languages import LanguageSpec
from dgemma_lsp.positions import InvalidPosition, LineIndex
from dgemma_lsp.syntax import Block, SyntaxTree, child_spans, enclosing_block, in_comment

__all__ = [
    "CompletionContext",
    "ContextOptions",
    "Mode",
    "Stop",
    "TokenCounter",
    "WindowAnchor",
    "build_context",
]

Mode = Literal["single_line", "multi_line", "block"]
TokenCounter = Callable[[str], int]

# Without a language: a line ending in an opening bracket or ":" opens a block.
_GENERIC_OPENER = re.compile(r"[\{\(\[:]\s*$")
_CLOSERS_ONLY = re.compile(r"[\s)\]}>'\"`;,]*")
_ANCHOR_PROBE = 64  # characters of text kept to recognise a window edge
_SCAN_LINES = 400  # how far to look for the previous / next code line
# No token spans more characters than this (the bundled tokenizer's longest is 65), so a stretch
# longer than budget * this holds more than budget tokens without counting it. Counting is what
# must stay bounded: after a cursor jump in a 10 MB file it tokenized megabytes (600 MB of RSS).
_MAX_TOKEN_CHARS = 256


@dataclass(frozen=True)
class ContextOptions:
    """Budgets and limits; defaults suit a 1-2k token prompt."""

    prefix_tokens: int = 768
    suffix_tokens: int = 256
    anchor_slack: float = 1.25  # reuse an old window edge while the window holds <= budget * slack
    min_fill: float = 0.5  # ... and >= budget * min_fill (unless it reaches the file's edge)
    boundary_fill: float = 0.5  # a syntax boundary may shrink a fresh window to this fraction
    max_lines: dict[str, int] = field(
        default_factory=lambda: {"single_line": 1, "multi_line": 8, "block": 32}
    )

    def __post_init__(self) -> None:
        if self.prefix_tokens < 1 or self.suffix_tokens < 0:
            raise ValueError("prefix_tokens must be >= 1 and suffix_tokens >= 0")
        if self.anchor_slack < 1 or not 0 <= self.min_fill <= 1 or not 0 <= self.boundary_fill <= 1:
            raise ValueError("anchor_slack must be >= 1; min_fill and boundary_fill in [0, 1]")
        missing = {"single_line", "multi_line", "block"} - self.max_lines.keys()
        if missing:
            raise ValueError(f"max_lines lacks {sorted(missing)}")


@dataclass(frozen=True)
class WindowAnchor:
    """Where the previous windows began and ended; keep one per document and pass it back."""

    prefix_start: int
    prefix_from_end: int  # len(text) - prefix_start
    prefix_head: str  # text at prefix_start (to the end of that line, at most 64 chars)
    suffix_end: int
    suffix_from_end: int  # len(text) - suffix_end
    suffix_tail: str  # text before suffix_end (from the start of that line, at most 64 chars)


@dataclass(frozen=True)
class Stop:
    """Where a completion must end, for post-processing to apply to the completion text.

    - ``min_indent``: a completion line after the first, not blank, whose leading whitespace is
      shorter than this (in characters; a tab counts 1) leaves the scope: cut before it.
    - ``closing_text``: the token that closes the enclosing block and is already in the text
      after the cursor (``"}"``, ``"end"``, ``"fi"``), or None (Python, top level, unclosed
      block). A completion that writes it again at the block's level duplicates it.
    - ``block_end``: offset just after that closing token in the document, or None.
    """

    min_indent: int
    closing_text: str | None = None
    block_end: int | None = None


@dataclass(frozen=True)
class CompletionContext:
    language: str | None  # canonical language name, else the languageId given, else None
    cursor: int  # offset (code points) in the text
    line: int  # cursor line
    column: int  # cursor column, code points
    prefix: str  # text[prefix_start:cursor]
    suffix: str  # text[cursor:suffix_end]
    prefix_start: int
    suffix_end: int
    prefix_tokens: int
    suffix_tokens: int
    line_prefix: str  # the cursor line before the cursor
    line_suffix: str  # the cursor line after the cursor (no line break)
    indent: str  # leading whitespace of the cursor line
    indent_unit: str  # one level of indentation as this file writes it
    mode: Mode
    max_lines: int
    stop: Stop
    anchor: WindowAnchor
    prefix_reused: bool  # the prefix window start came from the anchor passed in
    suffix_reused: bool
    scope: str | None  # node type of the enclosing closed block, if the tree has one


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _cut_left(text: str, start: int, end: int, count: TokenCounter, budget: int) -> int:
    """Smallest offset in [start, end] with count(text[offset:end]) <= budget (binary search)."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) // 2
        if count(text[mid:end]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _cut_right(text: str, start: int, end: int, count: TokenCounter, budget: int) -> int:
    """Largest offset in [start, end] with count(text[start:offset]) <= budget (binary search)."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[start:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Builder:
    """One ``build_context`` call; holds what its steps share."""

    def __init__(
        self,
        lines: LineIndex,
        cursor: int,
        count: TokenCounter,
        spec: LanguageSpec | None,
        tree: Tree | None,
        options: ContextOptions,
    ) -> None:
        self.lines = lines
        self.text = lines.text
        self.count = count
        self.spec = spec
        self.tree = tree
        self.opt = options
        self.row = lines.row_of(cursor)
        self.line_start = lines.line_start(self.row)
        self.line = lines.line(self.row)
        self.column = min(cursor - self.line_start, len(self.line))  # never inside a "\r\n"
        self.cursor = self.line_start + self.column
        self.cursor_byte = lines.byte_at(self.cursor) if tree is not None else 0

    # -- prefix window -----------------------------------------------------------------------

    def reuse_prefix(self, anchor: WindowAnchor | None) -> tuple[int, int] | None:
        """(start, tokens) from the anchor, if it is still a good window start."""
        if anchor is None:
            return None
        text, budget = self.text, self.opt.prefix_tokens
        for start in dict.fromkeys((anchor.prefix_start, len(text) - anchor.prefix_from_end)):
            if not (0 <= start <= self.line_start and text.startswith(anchor.prefix_head, start)):
                continue
            if start and text[start - 1] not in "\r\n":
                continue
            if self.cursor - start > budget * self.opt.anchor_slack * _MAX_TOKEN_CHARS:
                continue  # the cursor moved far from the old window: too long, without counting
            tokens = self.count(text[start : self.cursor])
            if tokens <= budget * self.opt.anchor_slack and (
                start == 0 or tokens >= budget * self.opt.min_fill
            ):
                return start, tokens
        return None

    def fresh_prefix(self) -> int:
        text, lines, budget = self.text, self.lines, self.opt.prefix_tokens
        if self.cursor - self.line_start > budget * _MAX_TOKEN_CHARS:  # a huge line (minified code)
            return _cut_left(text, self.cursor - budget * _MAX_TOKEN_CHARS, self.cursor, self.count, budget)
        used = self.count(text[self.line_start : self.cursor])
        if used > budget:
            return _cut_left(text, self.line_start, self.cursor, self.count, budget)
        first = self.row
        tokens_from = {first: used}  # row -> tokens from that row's start to the cursor
        for row in range(self.row - 1, -1, -1):
            used += self.count(lines.line_with_break(row))
            if used > budget:
                break
            first, tokens_from[row] = row, used
        if first > 0 and self.tree is not None:
            first_byte = lines.line_start_byte(first)
            for start_byte, _ in child_spans(self.tree, first_byte, self.cursor_byte):
                if start_byte < first_byte:
                    continue
                row = lines.row_of(lines.offset_of_byte(start_byte))
                if row in tokens_from and tokens_from[row] >= budget * self.opt.boundary_fill:
                    first = row
                break
        return lines.line_start(first)

    def prefix(self, anchor: WindowAnchor | None) -> tuple[int, int, bool]:
        reused = self.reuse_prefix(anchor)
        if reused is not None:
            return *reused, True
        start = self.fresh_prefix()
        tokens = self.count(self.text[start : self.cursor])
        # Counts of lines need not add up exactly to the count of their concatenation.
        while tokens > self.opt.prefix_tokens and start < self.line_start:
            start = self.lines.line_start(self.lines.row_of(start) + 1)
            tokens = self.count(self.text[start : self.cursor])
        return start, tokens, False

    # -- suffix window -----------------------------------------------------------------------

    def _row_end(self, row: int) -> int:
        """Offset after line ``row``'s break (or the end of the text)."""
        lines = self.lines
        return lines.line_start(row + 1) if row + 1 < lines.line_count else len(self.text)

    def reuse_suffix(self, anchor: WindowAnchor | None) -> tuple[int, int] | None:
        if anchor is None:
            return None
        text, budget = self.text, self.opt.suffix_tokens
        first_end = self._row_end(self.row)
        for end in dict.fromkeys((anchor.suffix_end, len(text) - anchor.suffix_from_end)):
            if not (first_end <= end <= len(text) and text.endswith(anchor.suffix_tail, 0, end)):
                continue
            if end < len(text) and (text[end - 1] not in "\r\n" or text[end - 1 : end + 1] == "\r\n"):
                continue
            if end - self.cursor > budget * self.opt.anchor_slack * _MAX_TOKEN_CHARS:
                continue
            tokens = self.count(text[self.cursor : end])
            if tokens <= budget * self.opt.anchor_slack and (
                end == len(text) or tokens >= budget * self.opt.min_fill
            ):
                return end, tokens
        return None

    def fresh_suffix(self) -> int:
        text, lines, budget = self.text, self.lines, self.opt.suffix_tokens
        end = self._row_end(self.row)
        if end - self.cursor > budget * _MAX_TOKEN_CHARS:
            return _cut_right(text, self.cursor, self.cursor + budget * _MAX_TOKEN_CHARS, self.count, budget)
        used = self.count(text[self.cursor : end])
        if used > budget:
            return _cut_right(text, self.cursor, end, self.count, budget)
        last = self.row
        tokens_to = {last: used}  # row -> tokens from the cursor to that row's end
        for row in range(self.row + 1, lines.line_count):
            used += self.count(lines.line_with_break(row))
            if used > budget:
                break
            last, tokens_to[row] = row, used
        if last < lines.line_count - 1 and self.tree is not None:
            last_byte = lines.byte_at(lines.line_end(last))
            best = None
            for _, end_byte in child_spans(self.tree, self.cursor_byte, last_byte):
                if self.cursor_byte <= end_byte <= last_byte:
                    best = end_byte
            if best is not None:
                row = lines.row_of(lines.offset_of_byte(best))
                if row in tokens_to and tokens_to[row] >= budget * self.opt.boundary_fill:
                    last = row
        return self._row_end(last)

    def suffix(self, anchor: WindowAnchor | None) -> tuple[int, int, bool]:
        reused = self.reuse_suffix(anchor)
        if reused is not None:
            return *reused, True
        end = self.fresh_suffix()
        tokens = self.count(self.text[self.cursor : end])
        first_end = self._row_end(self.row)
        while tokens > self.opt.suffix_tokens and end > first_end:
            end = self.lines.line_start(self.lines.row_of(end - 1))  # drop the last line
            tokens = self.count(self.text[self.cursor : end])
        return end, tokens, False

    # -- mode and stop -----------------------------------------------------------------------

    def code_row(self, step: int) -> int | None:
        """The nearest non-blank line above (step -1) or below (step +1) the cursor line."""
        row = self.row + step
        for _ in range(_SCAN_LINES):
            if not 0 <= row < self.lines.line_count:
                return None
            if self.lines.line(row).strip():
                return row
            row += step
        return None

    def opens_block(self, line: str) -> bool:
        if self.spec is not None:
            return self.spec.opens_block(line)
        return _GENERIC_OPENER.search(line) is not None

    def indent_unit(self, start_row: int) -> str:
        """One indentation level, guessed from the smallest indent increase near the cursor."""
        lines = self.lines
        step, previous = 0, None
        for row in range(max(start_row, self.row - 200), min(lines.line_count, self.row + 50)):
            line = lines.line(row)
            if row == self.row and not line.strip():
                line = line[: self.column] + "x"  # the whitespace typed on a blank line is an indent
            if not line.strip():
                continue
            if line.startswith("\t"):
                return "\t"
            indent = _indent_of(line)
            if previous is not None and indent > previous and (not step or indent - previous < step):
                step = indent - previous
            previous = indent
        if step:
            return " " * step
        return self.spec.indent_unit if self.spec is not None else "    "

    def body_follows(self, opener_row: int, block: Block | None) -> bool:
        """Is there code between the block opened on ``opener_row`` and its end, after the cursor?

        Trusts the tree's block when it starts on the opener line (then its closing token's line
        ends the body); otherwise code indented deeper than the opener line is body.
        """
        after = self.line[self.column :]
        following = self.row if after.strip() else self.code_row(1)
        if following is None:
            return False
        lines = self.lines
        if block is not None and lines.row_of(lines.offset_of_byte(block.start_byte)) == opener_row:
            return following < lines.row_of(lines.offset_of_byte(block.closer_byte))
        if following == self.row:  # a closer right after the cursor on its line
            return False
        return _indent_of(lines.line(following)) > _indent_of(lines.line(opener_row))

    def mode_and_stop(self, block: Block | None, unit: str) -> tuple[Mode, Stop]:
        before, after = self.line[: self.column], self.line[self.column :]
        line_indent = _indent_of(self.line)
        lines = self.lines
        closing = block.closer if block is not None else None
        block_end = lines.offset_of_byte(block.end_byte) if block is not None else None

        def stop(indent: int) -> Stop:
            return Stop(indent, closing, block_end)

        if self.tree is not None and in_comment(self.tree, self.cursor_byte):
            return "single_line", stop(line_indent)
        if after.strip() and not _CLOSERS_ONLY.fullmatch(after):
            return "single_line", stop(line_indent)
        if before.strip():
            if self.opens_block(before):
                mode: Mode = "multi_line" if self.body_follows(self.row, block) else "block"
                return mode, stop(line_indent + len(unit))
            opened = sum(before.count(c) for c in "([{") - sum(before.count(c) for c in ")]}")
            if not after.strip() and opened > 0:
                return "multi_line", stop(line_indent)
            return "single_line", stop(line_indent)
        # A blank line (whitespace before the cursor; nothing, or only closers, after it).
        prev = self.code_row(-1)
        if prev is None and self.code_row(1) is None and not after.strip():
            return "block", stop(len(before))
        if prev is not None and self.opens_block(lines.line(prev)):
            # Whitespace already before the cursor is the editor's (or user's) choice of indent.
            body_indent = len(before) or _indent_of(lines.line(prev)) + len(unit)
            mode = "multi_line" if self.body_follows(prev, block) else "block"
            return mode, stop(body_indent)
        indent = len(before)
        if not indent and block is not None:
            # An unindented blank line inside a block: assume the block's body indentation.
            block_row = lines.row_of(lines.offset_of_byte(block.start_byte))
            indent = _indent_of(lines.line(block_row)) + len(unit)
        return "multi_line", stop(indent)


def build_context(
    text: str | LineIndex,
    cursor: int,
    *,
    count_tokens: TokenCounter,
    spec: LanguageSpec | None = None,
    language_id: str | None = None,
    tree: Tree | SyntaxTree | None = None,
    options: ContextOptions | None = None,
    anchor: WindowAnchor | None = None,
) -> CompletionContext:
    """The completion context at ``cursor`` (a code-point offset, clamped to the text).

    ``tree`` must be the parse of exactly this text; pass None when there is no grammar.
    ``anchor`` is the ``anchor`` of the previous result for this document, or None.
    """
    if cursor < 0:
        raise InvalidPosition(f"cursor must be >= 0, got {cursor}")
    lines = text if isinstance(text, LineIndex) else LineIndex(text)
    if isinstance(tree, SyntaxTree):
        tree = tree.tree
    opt = options or ContextOptions()
    b = _Builder(lines, min(cursor, len(lines)), count_tokens, spec, tree, opt)
    full = b.text

    prefix_start, prefix_tokens, prefix_reused = b.prefix(anchor)
    suffix_end, suffix_tokens, suffix_reused = b.suffix(anchor)
    block = None
    if tree is not None and spec is not None:
        block = enclosing_block(tree, b.cursor_byte, spec.closers)
    unit = b.indent_unit(lines.row_of(prefix_start))
    mode, stop = b.mode_and_stop(block, unit)

    head_end = min(prefix_start + _ANCHOR_PROBE, b.cursor, lines.line_end(lines.row_of(prefix_start)))
    tail_row_start = lines.line_start(lines.row_of(max(suffix_end - 1, b.cursor)))
    tail_start = max(suffix_end - _ANCHOR_PROBE, b.cursor, tail_row_start)
    new_anchor = WindowAnchor(
        prefix_start=prefix_start,
        prefix_from_end=len(full) - prefix_start,
        prefix_head=full[prefix_start:head_end],
        suffix_end=suffix_end,
        suffix_from_end=len(full) - suffix_end,
        suffix_tail=full[tail_start:suffix_end],
    )
    return CompletionContext(
        language=spec.name if spec is not None else language_id,
        cursor=b.cursor,
        line=b.row,
        column=b.column,
        prefix=full[prefix_start : b.cursor],
        suffix=full[b.cursor : suffix_end],
        prefix_start=prefix_start,
        suffix_end=suffix_end,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        line_prefix=b.line[: b.column],
        line_suffix=b.line[b.column :],
        indent=b.line[: _indent_of(b.line)],
        indent_unit=unit,
        mode=mode,
        max_lines=opt.max_lines[mode],
        stop=stop,
        anchor=new_anchor,
        prefix_reused=prefix_reused,
        suffix_reused=suffix_reused,
        scope=block.type if block is not None else None,
    )
