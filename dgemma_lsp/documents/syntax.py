"""Incremental tree-sitter parse per document, and the tree queries the context layer needs.

``SyntaxTree`` parses once on open; after that ``apply`` edits the old tree and reparses with
it, so only the changed region is re-lexed. Given an executor (the server's parser thread), the
parses run there, off the event loop: tree-sitter releases the GIL while it parses, and edits that
arrive while a parse runs are applied together by the next one (one parse for a burst of keys).
``tree`` waits for the parse of everything applied so far; ``pending`` is what to await instead.
Each parse leaves the previous ``Tree`` object untouched (it edits a copy), so a worker thread can
keep reading the tree it was handed.

The query helpers are free functions over a ``Tree`` and utf-8 byte offsets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import Executor, Future
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
    """The tree of one document. ``apply`` is called from one thread (the event loop); the parses run
    on it, or on `executor` (one worker: parses of a document must not overlap)."""

    def __init__(self, language: Language, source: bytes, executor: Executor | None = None) -> None:
        self._parser = Parser(language)
        self._executor = executor
        self._lock = threading.Lock()  # guards the queued edits and source between the two threads
        self._queued: list[Edit] = []
        self._source: bytes | None = source  # the text the queued edits lead to; None: nothing queued
        self._tree: Tree | None = None
        self._failed: ParseFailed | None = None
        self._latest: Future[Tree] | None = None
        self._schedule()

    def _schedule(self) -> None:
        if self._executor is None:
            self._catch_up()
        else:
            self._latest = self._executor.submit(self._catch_up)

    def _catch_up(self) -> Tree:
        """Parse the latest text with every edit queued so far (nothing to do if an earlier job took them)."""
        with self._lock:
            edits, source = self._queued, self._source
            self._queued, self._source = [], None
        if self._failed is not None:
            raise self._failed
        if source is not None:
            try:
                self._tree = self._parse(source, self._edited(edits))
            except ParseFailed as err:
                self._failed = err
                raise
        assert self._tree is not None
        return self._tree

    def _edited(self, edits: list[Edit]) -> Tree | None:
        """A copy of the current tree told about ``edits`` (None before the first parse)."""
        if self._tree is None:
            return None
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
        return tree

    def _parse(self, source: bytes, old: Tree | None) -> Tree:
        # The binding takes no None for old_tree.
        tree = self._parser.parse(source) if old is None else self._parser.parse(source, old)
        if tree is None:
            raise ParseFailed("tree-sitter returned no tree")
        return tree

    @property
    def pending(self) -> Future[Tree] | None:
        """The parse of everything applied so far while it runs on the executor; None when it is done."""
        latest = self._latest
        return latest if latest is not None and not latest.done() else None

    @property
    def tree(self) -> Tree:
        """The parse of the text last applied (waiting for it when it runs on the executor)."""
        if self._latest is not None:
            self._latest.result()  # raises the parse's ParseFailed
        if self._failed is not None:
            raise self._failed
        assert self._tree is not None
        return self._tree

    @property
    def has_error(self) -> bool:
        """Does the tree contain ERROR or MISSING nodes?"""
        return self.tree.root_node.has_error

    def apply(self, edits: Iterable[Edit], source: bytes) -> None:
        """Tell the tree about ``edits`` (in order) and reparse ``source`` with it, now or on the executor."""
        with self._lock:
            self._queued.extend(edits)
            self._source = source
        self._schedule()

    def sexp(self) -> str:
        return str(self.tree.root_node)


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
