"""Syntax-guided repair: a completion that breaks the parse gets its broken tokens denoised again.

After denoising, prefix + completion + suffix is parsed with tree-sitter. Where the completion adds
ERROR or MISSING nodes the code around it did not have, only the canvas tokens under those nodes
are renoised (the rest stay fixed, prefix and suffix are never touched) and a few more steps run
inside the deadline. Only a diffusion model can do this: it revises tokens in place.

What repair cannot fix is cut: the completion shrinks to its longest head, at a line or word
boundary, that brings in no parse error, and a completion with no such head is not offered.
"""

from __future__ import annotations

import re
from dataclasses import replace

from tree_sitter import Language, Node, Parser

from engine import InfillRequest

REPAIR_STEPS = 6
# Heads tried when cutting a completion that breaks the parse: one parse each, longest first.
MAX_CUTS = 12
_WORD_END = re.compile(r"(?<=\w)(?=\W)|(?<=[)\]}'\"])")


def error_spans(parser: Parser, text: str) -> list[tuple[int, int]]:
    """Character spans of ERROR and MISSING nodes (a MISSING node is empty: it marks where one is needed)."""
    data = text.encode("utf-8")
    tree = parser.parse(data)
    spans: list[tuple[int, int]] = []
    if not tree.root_node.has_error:
        return spans
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            spans.append((node.start_byte, node.end_byte))
            continue
        if node.has_error:
            stack.extend(node.children)
    return [
        (len(data[:a].decode("utf-8", "replace")), len(data[:b].decode("utf-8", "replace"))) for a, b in spans
    ]


class ParseCheck:
    """Parse errors a middle brings into prefix + middle + suffix; the code around it is parsed once."""

    def __init__(self, grammar: Language, prefix: str, suffix: str) -> None:
        self.parser = Parser(grammar)
        self.prefix, self.suffix = prefix, suffix
        spans = error_spans(self.parser, prefix + suffix)
        self.before = len(spans)
        # Whether the cursor is inside a line that parsed (code after it, no error on the line): then any
        # error a middle brings onto it is the middle's, whatever the rest of the file does (an error
        # elsewhere that the middle's text happens to close would hide it from a count). At the end of
        # a line the rule is off: an unfinished line there (`out = `) often shows its error further on.
        line_start = prefix.rfind("\n") + 1
        rest = suffix.split("\n", 1)[0]
        line_end = len(prefix) + len(rest)
        self.line_parsed = bool(rest.strip()) and not any(a <= line_end and b >= line_start for a, b in spans)
        self._known: dict[str, list[tuple[int, int]]] = {}  # a middle is checked, then guarded: parse once

    def introduced(self, middle: str) -> list[tuple[int, int]]:
        """Spans, in `middle`'s characters, of the errors it brings in; empty if it brings none."""
        if middle not in self._known:
            self._known[middle] = self._introduced(middle)
        return self._known[middle]

    def _introduced(self, middle: str) -> list[tuple[int, int]]:
        after = error_spans(self.parser, self.prefix + middle + self.suffix)
        start, end = len(self.prefix), len(self.prefix) + len(middle)
        on_middle = any(a <= end + 1 and b >= start for a, b in after)
        if len(after) <= self.before and not (self.line_parsed and on_middle):
            return []
        spans = []
        for a, b in after:
            if b < start or a > end + 1:
                continue  # an error outside the completion (the windows cut code off)
            # A MISSING node right after the middle means the middle should have written it: its last token.
            a, b = max(a, start), min(max(b, a + 1), end)
            spans.append((max(0, min(a, end - 1) - start), b - start))
        if not spans:
            spans.append((max(0, len(middle) - 1), len(middle)))  # the break shows later: revisit the end
        return spans

    def preserving_head(self, middle: str) -> str:
        """`middle` if it brings in no parse error, else its longest such head ("" when there is none)."""
        if not self.introduced(middle):
            return middle
        for point in cut_points(middle):
            head = middle[:point]
            if head.strip() and not self.introduced(head):
                return head
        return ""


def introduced_errors(grammar: Language, prefix: str, middle: str, suffix: str) -> list[tuple[int, int]]:
    """Spans, in `middle`'s characters, of parse errors the middle brings in; empty if it brings none."""
    return ParseCheck(grammar, prefix, suffix).introduced(middle)


def cut_points(middle: str) -> list[int]:
    """Where a completion may be cut, longest head first: line ends, and word ends in its first line."""
    line_ends = [i + 1 for i, ch in enumerate(middle) if ch == "\n"]
    first_line = middle.split("\n", 1)[0]
    word_ends = [m.start() for m in _WORD_END.finditer(first_line)] + [len(first_line)]
    points = {p for p in line_ends + word_ends if 0 < p < len(middle)}
    return sorted(points, reverse=True)[:MAX_CUTS]


def repair_request(
    request: InfillRequest, middle: str, spans: list[tuple[int, int]], token_spans: list[tuple[int, int]]
) -> InfillRequest:
    """Keep every token of `middle` outside `spans` fixed; renoise the ones under them (and the slack)."""
    broken = [i for i, (a, b) in enumerate(token_spans) if any(a < y and x < b for x, y in spans)]
    fixed = tuple(i for i in range(len(token_spans)) if i not in set(broken))
    return replace(
        request.with_lead_in_prefix(),  # the seed is read from the cursor
        seed_canvas=middle,
        drafts=(),
        fixed_positions=fixed,
        seed_noise=1.0,
        max_steps=REPAIR_STEPS,
        n_candidates=1,
    )
