"""Whole-block rewrites: which block, the engine request that re-denoises it, and the smallest edits.

The block's current tokens seed the canvas and a share of them (the strength) is renoised; the
model writes the block again conditioned on the code before and after it. The answer is the set of
changed ranges between the old block and the new one, never a blind replacement.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from tree_sitter import Node, Tree

from dgemma_lsp.documents.languages import LanguageSpec
from dgemma_lsp.documents.positions import LineIndex
from dgemma_lsp.inline.context import ContextOptions, build_context
from engine import InfillRequest

# Node types that hold statements: a child of one of these is a statement, definition or member.
_CONTAINERS = {
    "module", "program", "source_file", "translation_unit", "chunk", "block", "statement_block",
    "compound_statement", "class_body", "declaration_list", "field_declaration_list", "body",
    "function_body", "do_block", "else_clause", "interface_body", "enum_body",
}  # fmt: skip
_MAX_BLOCK_CHARS = 2000


@dataclass(frozen=True)
class Target:
    start: int  # offsets in the document, at line starts/ends
    end: int
    text: str


@dataclass(frozen=True)
class Change:
    start: int  # offsets in the document
    end: int
    text: str


def _line_span(lines: LineIndex, start: int, end: int) -> tuple[int, int]:
    first, last = lines.row_of(start), lines.row_of(max(start, end - 1) if end > start else end)
    return lines.line_start(first), lines.line_end(last)


def _statement_like(node: Node) -> bool:
    return node.parent is not None and node.parent.type in _CONTAINERS and node.is_named


def target_at(lines: LineIndex, tree: Tree | None, start: int, end: int) -> Target | None:
    """The selection (widened to whole lines), else the enclosing multi-line statement or definition."""
    text = lines.text
    if not text.strip():
        return None
    if end > start:
        first, last = _line_span(lines, start, end)
    elif tree is not None:
        first, last = _block_around(lines, tree, start)
    else:
        first, last = _paragraph(lines, start)
    if last - first > _MAX_BLOCK_CHARS or not text[first:last].strip():
        return None
    return Target(start=first, end=last, text=text[first:last])


def _block_around(lines: LineIndex, tree: Tree, offset: int) -> tuple[int, int]:
    byte = lines.byte_at(offset)
    node: Node | None = tree.root_node.named_descendant_for_byte_range(byte, byte)
    single: Node | None = None
    while node is not None and node.parent is not None:
        if _statement_like(node):
            if node.end_point.row > node.start_point.row:
                break
            single = single or node
        node = node.parent
    chosen = node if node is not None and node.parent is not None else single
    if chosen is None:
        return _paragraph(lines, offset)
    start = lines.offset_of_byte(chosen.start_byte)
    end = lines.offset_of_byte(chosen.end_byte)
    return _line_span(lines, start, end)


def _paragraph(lines: LineIndex, offset: int) -> tuple[int, int]:
    """Without a tree: the lines around the cursor up to blank lines."""
    row = lines.row_of(offset)
    first = last = row
    while first > 0 and lines.line(first - 1).strip():
        first -= 1
    while last + 1 < lines.line_count and lines.line(last + 1).strip():
        last += 1
    return lines.line_start(first), lines.line_end(last)


def rewrite_request(
    lines: LineIndex,
    target: Target,
    spec: LanguageSpec | None,
    language_id: str,
    count_tokens,
    options: ContextOptions,
    strength: float,
    deadline: float | None,
    preamble: str = "",
) -> InfillRequest:
    """The engine request: the code around the block as windows, the block itself as the seed."""
    text = lines.text
    around = LineIndex(text[: target.start] + text[target.end :])
    context = build_context(
        around, target.start, count_tokens=count_tokens, spec=spec, language_id=language_id, options=options
    )
    seed_tokens = count_tokens(target.text)
    return InfillRequest(
        prefix=preamble + context.prefix,
        suffix=context.suffix,
        language=context.language or "",
        max_new_tokens=max(16, seed_tokens + seed_tokens // 2 + 8),
        seed_canvas=target.text,
        seed_noise=strength,
        deadline=deadline,
    )


def next_edit_target(lines: LineIndex, cursor: int, count: int) -> Target | None:
    """The `count` lines from the cursor's: where a next edit may land."""
    row = lines.row_of(cursor)
    start, end = lines.line_start(row), lines.line_end(min(lines.line_count - 1, row + count - 1))
    text = lines.text[start:end]
    return Target(start=start, end=end, text=text) if text.strip() else None


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def smallest_changes(target: Target, new_text: str) -> list[Change]:
    """The changed ranges between the block and its rewrite, diffed on words, spaces and symbols."""
    old_tokens, new_tokens = _TOKEN.findall(target.text), _TOKEN.findall(new_text)
    old_starts = [0]
    for token in old_tokens:
        old_starts.append(old_starts[-1] + len(token))
    changes = []
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        changes.append(
            Change(
                start=target.start + old_starts[i1],
                end=target.start + old_starts[i2],
                text="".join(new_tokens[j1:j2]),
            )
        )
    return changes
