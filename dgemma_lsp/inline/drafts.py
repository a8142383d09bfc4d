"""Drafts: guesses of the completion from the code around the cursor, for the engine to revise.

- lookup: what followed the longest match of the text before the cursor, in this document and in
  the other open documents of its language (never a file the client did not open);
- structure: the previous statement of the same kind in the same block (tree-sitter), as a template.
Each is cut to the planner's scope and stops where it would repeat the code after the cursor.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, Tree

from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.lookup import MAX_KEY, Haystack, continuations, cut_before_suffix

MAX_DRAFTS = 3
LOOKUP_DRAFTS = 2
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


def make_drafts(
    context: CompletionContext, text: str, tree: Tree | None, neighbours: tuple[str, ...] = ()
) -> tuple[Draft, ...]:
    """Up to MAX_DRAFTS distinct drafts for the completion at `context`, lookups first."""
    lines = 1 if context.mode == "single_line" else context.max_lines
    cursor = context.cursor
    haystacks = [Haystack(text, cursor - 1, cursor), *(Haystack(other) for other in neighbours)]
    before = text[max(0, cursor - MAX_KEY) : cursor]
    found = [Draft(c, "lookup") for c in continuations(before, haystacks, lines, LOOKUP_DRAFTS)]
    if tree is not None:
        template = structure_draft(context, text, tree)
        if template:
            found.append(Draft(template, "structure"))
    next_line = context.suffix.split("\n", 2)[1] if context.suffix.count("\n") >= 1 else ""
    drafts: list[Draft] = []
    for draft in found:
        cut = cut_before_suffix(draft.text, context.line_suffix, next_line)
        if cut.strip() and cut not in (d.text for d in drafts):
            drafts.append(Draft(cut, draft.kind))
    return tuple(drafts[:MAX_DRAFTS])


def structure_draft(context: CompletionContext, text: str, tree: Tree) -> str:
    """The previous sibling statement as a template for the one being written at the cursor."""
    typed = context.line_prefix.lstrip()
    if context.line_suffix.strip():
        return ""  # code after the cursor on its line: not a statement of its own
    line_start = context.cursor - context.column
    data = text.encode("utf-8")
    start_byte = len(text[:line_start].encode("utf-8"))
    container = _container_at(tree, start_byte)
    if container is None:
        return ""
    siblings = [c for c in container.named_children if c.end_byte <= start_byte][-_SIBLINGS:]
    for sibling in reversed(siblings):
        if sibling.type == "comment":
            continue
        source = data[sibling.start_byte : sibling.end_byte].decode("utf-8", "replace")
        if typed and not (source.startswith(typed) and len(source) > len(typed)):
            continue
        first_indent = sibling.start_point.column
        body = [source.split("\n")[0]] + [
            line[first_indent:] if line[:first_indent].isspace() else line.lstrip()
            for line in source.split("\n")[1:]
        ]
        template = "\n".join(body[:1] if context.mode == "single_line" else body[: context.max_lines])
        template = template[len(typed) :]
        return template.replace("\n", "\n" + context.indent)
    return ""


def _container_at(tree: Tree, byte: int) -> Node | None:
    """The innermost block that holds statements, around `byte`."""
    node: Node | None = tree.root_node.descendant_for_byte_range(byte, byte)
    while node is not None and node.type not in _CONTAINERS:
        node = node.parent
    return node
