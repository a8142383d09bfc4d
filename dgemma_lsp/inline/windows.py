"""The prefix and suffix windows the model sees, sized in model tokens and kept still while typing.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dgemma_lsp.documents.syntax import child_spans
from dgemma_lsp.inline.cursor import CursorLine
from dgemma_lsp.runtime.options import ContextOptions

TokenCounter = Callable[[str], int]

_ANCHOR_PROBE = 64  # characters of text kept to recognise a window edge
# No token spans more characters than this (the bundled tokenizer's longest is 65), so a stretch
# longer than budget * this holds more than budget tokens without counting it. Counting is what
# must stay bounded after a cursor jump in a huge file.
_MAX_TOKEN_CHARS = 256


@dataclass(frozen=True)
class WindowAnchor:
    """Where the previous windows began and ended; keep one per document and pass it back."""

    prefix_start: int
    prefix_from_end: int  # len(text) - prefix_start
    prefix_head: str  # text at prefix_start (to the end of that line, at most 64 chars)
    suffix_end: int
    suffix_from_end: int  # len(text) - suffix_end
    suffix_tail: str  # text before suffix_end (from the start of that line, at most 64 chars)


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


class Windows:
    """The windows around one cursor."""

    def __init__(self, at: CursorLine, count: TokenCounter, options: ContextOptions) -> None:
        self.at = at
        self.count = count
        self.opt = options

    def reuse_prefix(self, anchor: WindowAnchor | None) -> tuple[int, int] | None:
        """(start, tokens) from the anchor, if it is still a good window start."""
        if anchor is None:
            return None
        text, budget = self.at.text, self.opt.prefix_tokens
        for start in dict.fromkeys((anchor.prefix_start, len(text) - anchor.prefix_from_end)):
            if not (0 <= start <= self.at.line_start and text.startswith(anchor.prefix_head, start)):
                continue
            if start and text[start - 1] not in "\r\n":
                continue
            if self.at.cursor - start > budget * self.opt.anchor_slack * _MAX_TOKEN_CHARS:
                continue  # the cursor moved far from the old window: too long, without counting
            tokens = self.count(text[start : self.at.cursor])
            if tokens <= budget * self.opt.anchor_slack and (
                start == 0 or tokens >= budget * self.opt.min_fill
            ):
                return start, tokens
        return None

    def fresh_prefix(self) -> int:
        text, lines, budget = self.at.text, self.at.lines, self.opt.prefix_tokens
        if self.at.cursor - self.at.line_start > budget * _MAX_TOKEN_CHARS:  # a huge line (minified code)
            return _cut_left(
                text, self.at.cursor - budget * _MAX_TOKEN_CHARS, self.at.cursor, self.count, budget
            )
        used = self.count(text[self.at.line_start : self.at.cursor])
        if used > budget:
            return _cut_left(text, self.at.line_start, self.at.cursor, self.count, budget)
        first = self.at.row
        tokens_from = {first: used}  # row -> tokens from that row's start to the cursor
        for row in range(self.at.row - 1, -1, -1):
            used += self.count(lines.line_with_break(row))
            if used > budget:
                break
            first, tokens_from[row] = row, used
        if first > 0 and self.at.tree is not None:
            first_byte = lines.line_start_byte(first)
            for start_byte, _ in child_spans(self.at.tree, first_byte, self.at.cursor_byte):
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
        tokens = self.count(self.at.text[start : self.at.cursor])
        # Counts of lines need not add up exactly to the count of their concatenation.
        while tokens > self.opt.prefix_tokens and start < self.at.line_start:
            start = self.at.lines.line_start(self.at.lines.row_of(start) + 1)
            tokens = self.count(self.at.text[start : self.at.cursor])
        return start, tokens, False

    def _row_end(self, row: int) -> int:
        """Offset after line ``row``'s break (or the end of the text)."""
        lines = self.at.lines
        return lines.line_start(row + 1) if row + 1 < lines.line_count else len(self.at.text)

    def reuse_suffix(self, anchor: WindowAnchor | None) -> tuple[int, int] | None:
        if anchor is None:
            return None
        text, budget = self.at.text, self.opt.suffix_tokens
        first_end = self._row_end(self.at.row)
        for end in dict.fromkeys((anchor.suffix_end, len(text) - anchor.suffix_from_end)):
            if not (first_end <= end <= len(text) and text.endswith(anchor.suffix_tail, 0, end)):
                continue
            if end < len(text) and (text[end - 1] not in "\r\n" or text[end - 1 : end + 1] == "\r\n"):
                continue
            if end - self.at.cursor > budget * self.opt.anchor_slack * _MAX_TOKEN_CHARS:
                continue
            tokens = self.count(text[self.at.cursor : end])
            if tokens <= budget * self.opt.anchor_slack and (
                end == len(text) or tokens >= budget * self.opt.min_fill
            ):
                return end, tokens
        return None

    def fresh_suffix(self) -> int:
        text, lines, budget = self.at.text, self.at.lines, self.opt.suffix_tokens
        end = self._row_end(self.at.row)
        if end - self.at.cursor > budget * _MAX_TOKEN_CHARS:
            return _cut_right(
                text, self.at.cursor, self.at.cursor + budget * _MAX_TOKEN_CHARS, self.count, budget
            )
        used = self.count(text[self.at.cursor : end])
        if used > budget:
            return _cut_right(text, self.at.cursor, end, self.count, budget)
        last = self.at.row
        tokens_to = {last: used}  # row -> tokens from the cursor to that row's end
        for row in range(self.at.row + 1, lines.line_count):
            used += self.count(lines.line_with_break(row))
            if used > budget:
                break
            last, tokens_to[row] = row, used
        if last < lines.line_count - 1 and self.at.tree is not None:
            last_byte = lines.byte_at(lines.line_end(last))
            best = None
            for _, end_byte in child_spans(self.at.tree, self.at.cursor_byte, last_byte):
                if self.at.cursor_byte <= end_byte <= last_byte:
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
        tokens = self.count(self.at.text[self.at.cursor : end])
        first_end = self._row_end(self.at.row)
        while tokens > self.opt.suffix_tokens and end > first_end:
            end = self.at.lines.line_start(self.at.lines.row_of(end - 1))  # drop the last line
            tokens = self.count(self.at.text[self.at.cursor : end])
        return end, tokens, False

    def anchor(self, prefix_start: int, suffix_end: int) -> WindowAnchor:
        """What the next request needs to find these window edges again."""
        lines, full, cursor = self.at.lines, self.at.text, self.at.cursor
        head_end = min(prefix_start + _ANCHOR_PROBE, cursor, lines.line_end(lines.row_of(prefix_start)))
        tail_row_start = lines.line_start(lines.row_of(max(suffix_end - 1, cursor)))
        tail_start = max(suffix_end - _ANCHOR_PROBE, cursor, tail_row_start)
        return WindowAnchor(
            prefix_start=prefix_start,
            prefix_from_end=len(full) - prefix_start,
            prefix_head=full[prefix_start:head_end],
            suffix_end=suffix_end,
            suffix_from_end=len(full) - suffix_end,
            suffix_tail=full[tail_start:suffix_end],
        )
