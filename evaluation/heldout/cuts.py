"""Cursor positions cut from a whole file, with middles that are real syntactic units.

Four kinds, as an editor meets them:
- line: the cursor sits after the indentation of an emptied code line (Enter, then the editor's
  indent); the middle is the whole line. Drawn on their own (`line_positions`), after the other three,
  so adding them left those positions as they were;
- rest_of_line: the cursor sits before a token inside a code line; the middle is the rest of the line;
- expression: the middle is one expression or the contents of a bracket pair on a single line, with
  code after it on the same line (an argument list, a subscript, an operand);
- block: the cursor is at the end of a line that opens a block, or after the indentation of its first
  body line; the middle is the whole body (2-12 lines).

Offsets are UTF-8 byte offsets, as tree-sitter reports them; a cut is taken at token boundaries, so
decoding its pieces never splits a character.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node

from evaluation.heldout.syntax import parse

Kind = Literal["rest_of_line", "expression", "block", "line"]
KINDS: tuple[Kind, ...] = ("rest_of_line", "expression", "block")  # drawn together, 40/30/30
ALL_KINDS: tuple[Kind, ...] = (*KINDS, "line")
KIND_WEIGHTS: dict[Kind, float] = {"rest_of_line": 0.4, "expression": 0.3, "block": 0.3}
LINES_PER_FILE = 1
MAX_PER_FILE = 3
BLOCK_LINES = (2, 12)

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = frozenset(_OPEN.values())

# Nodes kept whole as one token: their insides are text, not code.
_ATOMIC = {
    "python": frozenset({"string", "comment"}),
    "typescript": frozenset({"string", "template_string", "comment", "regex"}),
    "lua": frozenset({"string", "comment"}),
}
_TEXT_TOKENS = frozenset({"string", "template_string", "comment", "regex"})

# Bracket pairs whose contents make an `expression` middle: argument lists, subscripts, literals.
_BRACKETED = {
    "python": frozenset(
        {
            "argument_list", "parameters", "subscript", "parenthesized_expression", "list", "tuple",
            "dictionary",
        }
    ),
    "typescript": frozenset(
        {"arguments", "formal_parameters", "subscript_expression", "parenthesized_expression", "array"}
    ),
    "lua": frozenset(
        {
            "arguments", "parameters", "bracket_index_expression", "parenthesized_expression",
            "table_constructor",
        }
    ),
}  # fmt: skip
# Whole expressions that make an `expression` middle when code follows them on their line.
_EXPRESSIONS = {
    "python": frozenset(
        {
            "call", "attribute", "binary_operator", "comparison_operator", "boolean_operator", "not_operator",
            "conditional_expression", "subscript", "list_comprehension", "await",
        }
    ),
    "typescript": frozenset(
        {
            "call_expression", "member_expression", "binary_expression", "ternary_expression",
            "new_expression", "await_expression", "unary_expression", "subscript_expression", "as_expression",
        }
    ),
    "lua": frozenset(
        {
            "function_call", "dot_index_expression", "method_index_expression", "bracket_index_expression",
            "binary_expression", "unary_expression",
        }
    ),
}  # fmt: skip
_PY_BLOCK_PARENTS = frozenset(
    {
        "function_definition", "class_definition", "if_statement", "elif_clause", "else_clause",
        "for_statement", "while_statement", "with_statement", "try_statement", "except_clause",
        "finally_clause", "case_clause",
    }
)  # fmt: skip
_LUA_BLOCK_PARENTS = frozenset(
    {
        "function_declaration", "function_definition", "if_statement", "elseif_statement", "else_statement",
        "for_statement", "while_statement", "do_statement", "repeat_statement",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    start_row: int
    end_row: int
    type: str

    @property
    def is_text(self) -> bool:
        return self.type in _TEXT_TOKENS


@dataclass(frozen=True)
class Cut:
    """The middle is source[start:end]; rows are the lines it touches (header included for blocks)."""

    kind: Kind
    start: int
    end: int
    first_row: int
    last_row: int

    def overlaps(self, other: Cut) -> bool:
        return self.first_row <= other.last_row and other.first_row <= self.last_row


@dataclass(frozen=True)
class Position:
    kind: Kind
    prefix: str
    middle: str
    suffix: str


class FileSyntax:
    """A parsed file: its tokens (strings and comments whole), line spans and nodes."""

    def __init__(self, text: str, language: str, path: str = "") -> None:
        self.language = language
        self.source = text.encode("utf-8")
        self.tree = parse(text, language, path)
        self.row_starts = [0]
        for i, byte in enumerate(self.source):
            if byte == 0x0A:
                self.row_starts.append(i + 1)
        self.tokens: list[Token] = []
        self._collect(self.tree.root_node, _ATOMIC[language])
        self.tokens.sort(key=lambda t: t.start)
        self.by_row: dict[int, list[int]] = {}
        self.spanned: set[int] = set()  # rows a multi-line token touches
        for index, token in enumerate(self.tokens):
            self.by_row.setdefault(token.start_row, []).append(index)
            if token.end_row != token.start_row:
                self.spanned.update(range(token.start_row, token.end_row + 1))

    def _collect(self, node: Node, atomic: frozenset[str]) -> None:
        if node.child_count == 0 or node.type in atomic:
            if node.end_byte > node.start_byte:
                self.tokens.append(
                    Token(node.start_byte, node.end_byte, node.start_point.row, node.end_point.row, node.type)
                )
            return
        for child in node.children:
            self._collect(child, atomic)

    def row_end(self, row: int) -> int:
        """Offset of the newline ending `row` (or of the end of the file)."""
        if row + 1 < len(self.row_starts):
            return self.row_starts[row + 1] - 1
        return len(self.source)

    def text(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8")

    def nodes(self) -> list[Node]:
        found: list[Node] = []
        stack = [self.tree.root_node]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(reversed(node.children))
        return found


def _meaningful(middle: str) -> bool:
    """Not blank, not punctuation alone."""
    return any(ch.isalnum() for ch in middle)


def _self_contained(tokens: list[Token], language: str) -> bool:
    """A line whose brackets close on it (a TypeScript line may end by opening a brace)."""
    depth = 0
    for token in tokens:
        if token.type in _OPEN:
            depth += 1
        elif token.type in _CLOSE:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 or (language == "typescript" and depth == 1 and tokens[-1].type == "{")


def rest_of_line_cuts(syntax: FileSyntax) -> list[Cut]:
    cuts: list[Cut] = []
    for row, indexes in syntax.by_row.items():
        tokens = [syntax.tokens[i] for i in indexes]
        if row in syntax.spanned or len(tokens) < 2 or any(t.is_text and t.type == "comment" for t in tokens):
            continue
        if not _self_contained(tokens, syntax.language):
            continue
        end = syntax.row_end(row)
        for token in tokens[1:]:
            if _meaningful(syntax.text(token.start, end)):
                cuts.append(Cut("rest_of_line", token.start, end, row, row))
    return cuts


def line_cuts(syntax: FileSyntax) -> list[Cut]:
    """Whole code lines, from after their indentation: single-row, self-contained, not text alone."""
    cuts: list[Cut] = []
    for row, indexes in syntax.by_row.items():
        tokens = [syntax.tokens[i] for i in indexes]
        if (
            row in syntax.spanned
            or all(t.is_text for t in tokens)
            or not _self_contained(tokens, syntax.language)
        ):
            continue
        start, end = tokens[0].start, syntax.row_end(row)
        if syntax.text(syntax.row_starts[row], start).strip():
            continue  # code before the first token: a line a multi-line token ends on
        if _meaningful(syntax.text(start, end)):
            cuts.append(Cut("line", start, end, row, row))
    return cuts


def _code_after(syntax: FileSyntax, end: int, row: int) -> bool:
    """Code (not only a comment) follows offset `end` on its line."""
    for i in syntax.by_row.get(row, ()):
        token = syntax.tokens[i]
        if token.start >= end:
            return token.type != "comment"
    return False


def _bracket_inside(node: Node) -> tuple[int, int] | None:
    """The contents of the node's own bracket pair: after its first opener, before its last closer."""
    opener = next((c for c in node.children if c.type in _OPEN), None)
    closer = next((c for c in reversed(node.children) if c.type in _CLOSE), None)
    if opener is None or closer is None or closer.start_byte <= opener.end_byte:
        return None
    return opener.end_byte, closer.start_byte


def expression_cuts(syntax: FileSyntax) -> list[Cut]:
    cuts: list[Cut] = []
    bracketed, expressions = _BRACKETED[syntax.language], _EXPRESSIONS[syntax.language]
    for node in syntax.nodes():
        row = node.start_point.row
        if row != node.end_point.row or row in syntax.spanned:
            continue
        if node.type in bracketed:
            span = _bracket_inside(node)
        elif node.type in expressions:
            span = (node.start_byte, node.end_byte)
        else:
            continue
        if span is None:
            continue
        start, end = span
        middle = syntax.text(start, end)
        line_before = syntax.text(syntax.row_starts[row], start)
        if middle.strip() != middle or not _meaningful(middle) or not line_before.strip():
            continue
        if _code_after(syntax, end, row):
            cuts.append(Cut("expression", start, end, row, row))
    return cuts


def _body_tokens(syntax: FileSyntax, node: Node) -> tuple[int, int, int, int | None] | None:
    """(header token, first body token, last body token, closer token or None) by token index."""
    language = syntax.language
    if language == "python":
        if node.type != "block" or node.parent is None or node.parent.type not in _PY_BLOCK_PARENTS:
            return None
        lo, hi = node.start_byte, node.end_byte
    elif language == "typescript":
        if node.type not in ("statement_block", "class_body") or node.child_count < 3:
            return None
        first, last = node.children[0], node.children[-1]
        if first.type != "{" or last.type != "}":
            return None
        lo, hi = first.end_byte, last.start_byte
    else:
        if node.type != "block" or node.parent is None or node.parent.type not in _LUA_BLOCK_PARENTS:
            return None
        lo, hi = node.start_byte, node.end_byte
    inside = [i for i, t in enumerate(syntax.tokens) if lo <= t.start and t.end <= hi]
    if not inside or inside[0] == 0:
        return None
    first_i, last_i = inside[0], inside[-1]
    closer = last_i + 1 if last_i + 1 < len(syntax.tokens) else None
    if language != "python" and closer is None:
        return None
    return first_i - 1, first_i, last_i, closer


def block_cuts(syntax: FileSyntax) -> list[Cut]:
    cuts: list[Cut] = []
    low, high = BLOCK_LINES
    tokens = syntax.tokens
    for node in syntax.nodes():
        found = _body_tokens(syntax, node)
        if found is None:
            continue
        header_i, first_i, last_i, closer_i = found
        header, first, last = tokens[header_i], tokens[first_i], tokens[last_i]
        # The header token ends its line; the body starts on the next line and ends a line.
        if header.type == "comment" or first.start_row != header.end_row + 1:
            continue
        # The body's last line holds nothing after it; outside Python the closer starts the next line.
        closer_row = tokens[closer_i].start_row if closer_i is not None else None
        if closer_row is not None and closer_row <= last.end_row:
            continue
        if syntax.language != "python" and closer_row != last.end_row + 1:
            continue
        if not low <= last.end_row - first.start_row + 1 <= high:
            continue
        if all(t.is_text for t in tokens[first_i : last_i + 1]):
            continue  # comments or a docstring alone
        end = syntax.row_end(last.end_row)
        # Two editor states: the cursor right after the opener, or after the first body line's indent.
        cuts.append(Cut("block", header.end, end, header.end_row, last.end_row))
        cuts.append(Cut("block", first.start, end, header.end_row, last.end_row))
    return cuts


def candidate_cuts(syntax: FileSyntax) -> dict[Kind, list[Cut]]:
    return {
        "rest_of_line": rest_of_line_cuts(syntax),
        "expression": expression_cuts(syntax),
        "block": block_cuts(syntax),
    }


def _next_kind(kinds: list[Kind], tally: Counter[str]) -> Kind:
    """The offered kind furthest below its 40/30/30 share of the positions drawn so far."""
    total = sum(tally.values()) + 1
    return max(kinds, key=lambda k: KIND_WEIGHTS[k] * total - tally[k])


def choose_cuts(
    candidates: dict[Kind, list[Cut]], rng: random.Random, tally: Counter[str], limit: int = MAX_PER_FILE
) -> list[Cut]:
    """Up to `limit` cuts on distinct lines; `tally` (kinds drawn so far, updated) steers the kinds."""
    pools = {kind: list(cuts) for kind, cuts in candidates.items()}
    for pool in pools.values():
        rng.shuffle(pool)
    chosen: list[Cut] = []
    while len(chosen) < limit:
        kinds = [kind for kind in KINDS if pools[kind]]
        if not kinds:
            break
        kind = _next_kind(kinds, tally)
        pool = pools[kind]
        while pool:
            cut = pool.pop()
            if not any(cut.overlaps(other) for other in chosen):
                chosen.append(cut)
                tally[kind] += 1
                break
    return sorted(chosen, key=lambda c: c.start)


def positions(
    text: str, language: str, rng: random.Random, tally: Counter[str], path: str = ""
) -> list[Position]:
    """The file's cut positions: prefix + middle + suffix is the file's text every time."""
    syntax = FileSyntax(text, language, path)
    cuts = choose_cuts(candidate_cuts(syntax), rng, tally)
    return [position_of(syntax, cut) for cut in cuts]


def line_positions(
    text: str, language: str, rng: random.Random, path: str = "", taken: frozenset[int] = frozenset()
) -> list[Position]:
    """Up to LINES_PER_FILE `line` positions of the file, drawn by `rng` alone; none at a cursor (byte
    offset) in `taken`, where another kind's position already sits."""
    syntax = FileSyntax(text, language, path)
    pool = [cut for cut in line_cuts(syntax) if cut.start not in taken]
    chosen = sorted(rng.sample(pool, min(LINES_PER_FILE, len(pool))), key=lambda c: c.start)
    return [position_of(syntax, cut) for cut in chosen]


def position_of(syntax: FileSyntax, cut: Cut) -> Position:
    """The cut as the editor sees it: the text before, the middle, the text after."""
    return Position(
        cut.kind,
        syntax.text(0, cut.start),
        syntax.text(cut.start, cut.end),
        syntax.text(cut.end, len(syntax.source)),
    )
