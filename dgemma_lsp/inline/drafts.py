"""Drafts: guesses of the completion from the code around the cursor, for the engine to revise.

- lookup: what followed the longest match of the text before the cursor, in this document, then in
  the other open documents of its language, then in the files the repository's retrieval chose;
- structure: the previous statement of the same kind in the same block (tree-sitter), as a template.
Each is cut to the planner's scope and stops where it would repeat the code after the cursor; one that
would write the line above again is no draft.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tree_sitter import Node, Tree

from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.lookup import MAX_KEY, Haystack, cut_before_suffix, found_continuations
from dgemma_lsp.inline.postprocess import repeats_line_above

MAX_DRAFTS = 2  # each draft is a canvas row: a step over 3 rows costs about twice one over 1
LOOKUP_DRAFTS = 1
_CONTAINERS = {
    "module", "program", "source_file", "translation_unit", "chunk", "block", "statement_block",
    "compound_statement", "class_body", "declaration_list", "field_declaration_list", "body",
    "function_body", "do_block", "interface_body", "enum_body", "statement_list",
}  # fmt: skip
_SIBLINGS = 8  # previous statements looked at


@dataclass(frozen=True)
class Draft:
    text: str
    kind: str  # lookup or structure
    # A lookup's match: its length in characters, and where it was found (document, open: another open
    # buffer, repository); what the show-or-not decision reads of how much to trust the draft.
    key: int = field(default=0, compare=False)
    found_in: str = field(default="", compare=False)
    # How far the key's other occurrences agree with this one: their count, and the shares of them that go
    # on with the same first line and with the same first word.
    occurrences: int = field(default=0, compare=False)
    same_line: float = field(default=0.0, compare=False)
    same_word: float = field(default=0.0, compare=False)
    agreed: int = field(default=-1, compare=False)  # its words every occurrence goes on with (-1: one only)


def make_drafts(
    context: CompletionContext,
    text: str,
    tree: Tree | None,
    neighbours: tuple[str, ...] = (),
    open_neighbours: int | None = None,
) -> tuple[Draft, ...]:
    """Up to MAX_DRAFTS distinct drafts for the completion at `context`, lookups first; the first
    `open_neighbours` of `neighbours` are open buffers, the rest the repository's files (all open
    when None)."""
    lines = 1 if context.mode == "single_line" else context.max_lines
    cursor = context.cursor
    haystacks = [Haystack(text, cursor - 1, cursor), *(Haystack(other) for other in neighbours)]
    before = text[max(0, cursor - MAX_KEY) : cursor]
    lookup = found_continuations(before, haystacks, lines, LOOKUP_DRAFTS)
    opened = len(neighbours) if open_neighbours is None else open_neighbours
    seen = max(1, lookup.occurrences)
    found = [
        Draft(
            reindented(c, context), "lookup", len(lookup.key), _found_in(index, opened),
            lookup.occurrences, lookup.same_line / seen, lookup.same_word / seen, lookup.agreed,
        )
        for c, index in lookup.found
    ]  # fmt: skip
    if tree is not None:
        template = structure_draft(context, text, tree)
        if template:
            found.append(Draft(template, "structure"))
    next_line = context.suffix.split("\n", 2)[1] if context.suffix.count("\n") >= 1 else ""
    drafts: list[Draft] = []
    for draft in found:
        cut = cut_before_suffix(draft.text, context.line_suffix, next_line)
        # One that writes the line above again (a sibling template is often that line) gives its place
        # to the model's own draft: left as it is, it would be dropped after the canvas.
        if repeats_line_above(cut, context.line_prefix, context.line_above):
            continue
        if cut.strip() and cut not in (d.text for d in drafts):
            drafts.append(replace(draft, text=cut))
    return tuple(drafts[:MAX_DRAFTS])


def _found_in(haystack: int, open_neighbours: int) -> str:
    """Where the haystack of that index lies: the document (0), an open buffer, or the repository."""
    if haystack == 0:
        return "document"
    return "open" if haystack <= open_neighbours else "repository"


def reindented(draft: str, context: CompletionContext) -> str:
    """A lookup draft at the cursor's indentation: what followed the match elsewhere kept that place's
    (a key such as `):` and a newline matches inside deeper code too). Its code starts at the cursor
    when only indentation precedes it on its line; after a line that opens a block, its first line sits
    at the block's body. Elsewhere (a hanging bracket, a cursor at column 0) it stays as it is."""
    lines = draft.split("\n")
    if context.line_prefix and not context.line_prefix.strip():
        first = lines[0]
        shift = -(len(first) - len(first.lstrip(" ")))
    elif lines[0] == "" and context.mode != "single_line" and not context.stop.open_brackets:
        body = next((line for line in lines[1:] if line.strip()), "")
        shift = context.stop.min_indent - (len(body) - len(body.lstrip(" ")))
    else:
        return draft
    if not shift or any(line.startswith("\t") for line in lines) or "\t" in context.indent:
        return draft
    if shift > 0:
        return "\n".join(lines[:1] + [" " * shift + line if line.strip() else line for line in lines[1:]])
    return "\n".join(_dedent(line, -shift) for line in lines)


def _dedent(line: str, columns: int) -> str:
    """`line` without up to `columns` of its leading spaces."""
    return line[min(columns, len(line) - len(line.lstrip(" "))) :]


def structure_draft(context: CompletionContext, text: str, tree: Tree) -> str:
    """The previous statement at the cursor's indentation, as a template for the one being written."""
    if context.line_suffix.strip():
        return ""  # code after the cursor on its line: not a statement of its own
    typed = context.line_prefix.lstrip()
    column = len(context.line_prefix) - len(typed)
    if context.code_above is None:
        return ""
    row, indent = context.code_above
    statement = _statement_at(tree, row, indent, column)
    if indent > column and (context.indent_below > column or _in_its_block(statement, row, indent)):
        # The code above is in a block of the statement at `column`: that statement's header as a
        # template would split the block (its body goes on below), redefine it (a function's signature
        # again where its last line is being written) or repeat a loop's header after the loop.
        return ""
    data = text.encode("utf-8")
    for sibling in _previous_statements(statement):
        source = data[sibling.start_byte : sibling.end_byte].decode("utf-8", "replace")
        if typed and not (source.startswith(typed) and len(source) > len(typed)):
            continue
        lines = source.split("\n")
        body = [lines[0]] + [
            line[column:] if not line[:column].strip() else line.lstrip() for line in lines[1:]
        ]
        template = "\n".join(body[:1] if context.mode == "single_line" else body[: context.max_lines])
        return template[len(typed) :].replace("\n", "\n" + context.indent)
    return ""


def _statement_at(tree: Tree, row: int, indent: int, column: int) -> Node | None:
    """The statement of a block, at `column`, that holds the code starting at (`row`, `indent`)."""
    node: Node | None = tree.root_node.descendant_for_point_range((row, indent), (row, indent))
    while node is not None:
        parent = node.parent
        if parent is not None and parent.type in _CONTAINERS and node.start_point.column == column:
            return node
        node = parent
    return None


def _in_its_block(statement: Node | None, row: int, indent: int) -> bool:
    """Whether the code at (`row`, `indent`) lies in a block nested in `statement` (a body, not a line
    of a statement written over several lines)."""
    node = None if statement is None else statement.descendant_for_point_range((row, indent), (row, indent))
    while node is not None and node != statement:
        if node.type in _CONTAINERS:
            return True
        node = node.parent
    return False


def _previous_statements(statement: Node | None) -> list[Node]:
    """`statement` and the ones before it in its block (comments left out), nearest first."""
    found: list[Node] = []
    while statement is not None and len(found) < _SIBLINGS:
        if statement.type != "comment" and statement.is_named:
            found.append(statement)
        statement = statement.prev_named_sibling
    return found
