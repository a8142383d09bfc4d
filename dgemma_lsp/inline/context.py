"""What the model sees and how long its answer may be: the context of one completion request.

``build_context`` turns (text, cursor, syntax tree or None, language, token counter, options,
previous anchor) into a ``CompletionContext``: the windows (``windows.py``), the mode and the
stop rules (``scope.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Tree

from dgemma_lsp.documents.languages import LanguageSpec
from dgemma_lsp.documents.positions import InvalidPosition, LineIndex
from dgemma_lsp.documents.syntax import SyntaxTree, enclosing_block
from dgemma_lsp.inline.cursor import CursorLine
from dgemma_lsp.inline.scope import Mode, Scope, Stop, indent_of
from dgemma_lsp.inline.windows import TokenCounter, WindowAnchor, Windows
from dgemma_lsp.runtime.options import ContextOptions

__all__ = [
    "CompletionContext",
    "ContextOptions",
    "Mode",
    "Stop",
    "TokenCounter",
    "WindowAnchor",
    "build_context",
]


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
    code_above: tuple[int, int] | None  # row and indentation of the nearest code line above the cursor's
    indent_below: int  # indentation of the nearest code line below the cursor's (-1: none)
    line_above: str  # the line before the cursor's, without its break ("" on the first line)


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
    at = CursorLine.at(lines, min(cursor, len(lines)), tree)
    windows = Windows(at, count_tokens, opt)
    prefix_start, prefix_tokens, prefix_reused = windows.prefix(anchor)
    suffix_end, suffix_tokens, suffix_reused = windows.suffix(anchor)
    block = None
    if tree is not None and spec is not None:
        block = enclosing_block(tree, at.cursor_byte, spec.closers)
    scope = Scope(at, spec)
    unit = scope.indent_unit(lines.row_of(prefix_start))
    mode, stop = scope.mode_and_stop(block, unit)
    full = at.text
    above, below = scope.code_row(-1), scope.code_row(1)
    return CompletionContext(
        language=spec.name if spec is not None else language_id,
        cursor=at.cursor,
        line=at.row,
        column=at.column,
        prefix=full[prefix_start : at.cursor],
        suffix=full[at.cursor : suffix_end],
        prefix_start=prefix_start,
        suffix_end=suffix_end,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        line_prefix=at.line[: at.column],
        line_suffix=at.line[at.column :],
        indent=at.line[: indent_of(at.line)],
        indent_unit=unit,
        mode=mode,
        max_lines=opt.max_lines[mode],
        stop=stop,
        anchor=windows.anchor(prefix_start, suffix_end),
        prefix_reused=prefix_reused,
        suffix_reused=suffix_reused,
        scope=block.type if block is not None else None,
        code_above=None if above is None else (above, indent_of(lines.line(above))),
        indent_below=-1 if below is None else indent_of(lines.line(below)),
        line_above=lines.line(at.row - 1) if at.row > 0 else "",
    )
