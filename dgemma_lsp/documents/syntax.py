"""Incremental tree-sitter parse per document, and the tree queries the context layer needs.

``SyntaxTree`` parses once on open; after that ``apply`` edits the old tree and reparses with
it, so only the changed region is re-lexed. Each ``apply`` leaves the previous ``Tree`` object
untouched (it edits a copy), so a worker thread can keep reading the tree it was handed.

The query helpers are free functions over a ``Tree`` and utf-8 byte offsets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Language, Node, Parser, Tree

from dgemma_lsp.documents.text_sync import Edit

__all__ = [
    "Block",
    "ParseFailed",
    "SyntaxTree",
    "child_spans",
    "enclosing_block",
    "in_comment",
    "node_at",
    "top_level_spans",
]


class ParseFailed(RuntimeError):
    """Tree-sitter produced no tree (it only does so when it has no language or was cancelled)."""


class SyntaxTree:
    """The tree of one document; not thread-safe to ``apply`` from two threads at once."""

    def __init__(self, language: Language, source: bytes) -> None:
        self._parser = Parser(language)
        self._tree = self._parse(source, None)

    def _parse(self, source: bytes, old: Tree | None) -> Tree:
        # The binding takes no None for old_tree.
        tree = self._parser.parse(source) if old is None else self._parser.parse(source, old)
        if tree is None:
            raise ParseFailed("tree-sitter returned no tree")
        return tree

    @property
    def tree(self) -> Tree:
        return self._tree

    @property
    def root(self) -> Node:
        return self._tree.root_node

    @property
    def has_error(self) -> bool:
        """Does the tree contain ERROR or MISSING nodes?"""
        return self._tree.root_node.has_error

    def apply(self, edits: Iterable[Edit], source: bytes) -> Tree:
        """Tell the tree about ``edits`` (in order) and reparse ``source`` reusing it."""
        tree = self._tree.copy()
        for e in edits:
            tree.edit(
                start_byte=e.start_byte,
                old_end_byte=e.old_end_byte,
                new_end_byte=e.new_end_byte,
                start_point=e.start_point,
                old_end_point=e.old_end_point,
                new_end_point=e.new_end_point,
            )
        self._tree = self._parse(source, tree)
        return self._tree

    def reparse(self, source: bytes) -> Tree:
        """A full parse, for when the edits are unknown."""
        self._tree = self._parse(source, None)
        return self._tree

    def sexp(self) -> str:
        return str(self._tree.root_node)


def node_at(tree: Tree, byte: int) -> Node:
    """The smallest node that contains ``byte``."""
    node = tree.root_node.descendant_for_byte_range(byte, byte)
    return node if node is not None else tree.root_node


def in_comment(tree: Tree, byte: int) -> bool:
    """Is ``byte`` inside a comment, or at the end of one (typing on a comment line)?"""
    node = node_at(tree, byte)
    if "comment" not in node.type and byte > 0:
        node = node_at(tree, byte - 1)  # a line comment ends at the cursor when typing after it
    return "comment" in node.type and node.start_byte < byte <= node.end_byte


@dataclass(frozen=True, slots=True)
class Block:
    """A block that a closing token ends (``{ ... }``, ``do ... end``, ``then ... fi``)."""

    type: str  # node type, e.g. "statement_block"
    start_byte: int
    end_byte: int  # after the closing token
    closer_byte: int  # where the closing token starts
    closer: str  # the closing token, e.g. "}"
    start_row: int  # tree-sitter row of the block's first line


def enclosing_block(tree: Tree, byte: int, closers: Iterable[str]) -> Block | None:
    """The innermost node around ``byte`` whose last child is one of ``closers``.

    The cursor must be after the node's start and at or before its closing token. A closing
    token that tree-sitter only inferred (MISSING) does not count: such a block has no end yet.
    """
    closer_set = frozenset(closers)
    if not closer_set:
        return None
    node: Node | None = node_at(tree, byte)
    while node is not None:
        if node.start_byte < byte and node.child_count >= 2:
            last = node.child(node.child_count - 1)
            if (
                last is not None
                and not last.is_named
                and last.type in closer_set
                and not last.is_missing
                and byte <= last.start_byte
            ):
                return Block(
                    node.type,
                    node.start_byte,
                    node.end_byte,
                    last.start_byte,
                    last.type,
                    node.start_point.row,
                )
        node = node.parent
    return None


def _children_in(node: Node, start_byte: int, end_byte: int) -> list[tuple[int, int]]:
    """(start, end) bytes of ``node``'s children that reach into [start_byte, end_byte]."""
    # Not Node.first_child_for_byte: in py-tree-sitter 0.26.1 it returns a dangling Node, not
    # None, when no child ends after the byte, and reading that Node segfaults. The cursor
    # variant returns None; it may stop on a child ending exactly at start_byte, which is kept.
    cursor = node.walk()
    if cursor.goto_first_child_for_byte(start_byte) is None:
        return []
    spans = []
    while True:
        child = cursor.node
        if child is None or child.start_byte > end_byte:
            break
        if child.end_byte >= start_byte:
            spans.append((child.start_byte, child.end_byte))
        if not cursor.goto_next_sibling():
            break
    return spans


def top_level_spans(tree: Tree, start_byte: int, end_byte: int) -> list[tuple[int, int]]:
    """(start, end) bytes of the root's children that reach into [start_byte, end_byte].

    Starts from the first child that reaches ``start_byte``, so the cost is the number of
    top-level nodes in the range, not in the file.
    """
    return _children_in(tree.root_node, start_byte, end_byte)


def child_spans(tree: Tree, start_byte: int, end_byte: int) -> list[tuple[int, int]]:
    """(start, end) bytes of the children of the smallest node spanning [start_byte, end_byte].

    These are the syntax boundaries at the level of the range: top-level definitions for a
    range across several of them, class members for a range inside one class.
    """
    node = tree.root_node.descendant_for_byte_range(start_byte, end_byte)
    return [] if node is None else _children_in(node, start_byte, end_byte)
