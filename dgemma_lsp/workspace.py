"""The open files: text (DocumentStore), one incremental syntax tree each, and their window anchors.

Every didOpen/didChange goes through here, so each edit reaches the text and the tree exactly
once. The tree and the document are immutable snapshots, safe to hand to another thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Language, Tree

from dgemma_lsp.context import WindowAnchor
from dgemma_lsp.documents import ContentChange, Document, DocumentStore
from dgemma_lsp.languages import LanguageRegistry, LanguageSpec
from dgemma_lsp.positions import PositionEncoding
from dgemma_lsp.syntax import ParseFailed, SyntaxTree

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    document: Document
    spec: LanguageSpec | None
    tree: Tree | None
    anchor: WindowAnchor | None
    grammar: Language | None = None


class OpenFiles:
    def __init__(self, registry: LanguageRegistry, encoding: PositionEncoding | str) -> None:
        self.registry = registry
        self.documents = DocumentStore(encoding)
        self._trees: dict[str, SyntaxTree] = {}
        self.anchors: dict[str, WindowAnchor] = {}

    @property
    def encoding(self) -> PositionEncoding:
        return self.documents.encoding

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        document = self.documents.open(uri, language_id, version, text)
        self.anchors.pop(uri, None)
        self._trees.pop(uri, None)
        grammar = self.registry.grammar(language_id)
        if grammar is not None:
            try:
                self._trees[uri] = SyntaxTree(grammar, document.lines.encoded)
            except ParseFailed as err:
                logger.warning("no syntax tree for %s: %s", uri, err)
        return document

    def change(self, uri: str, version: int, changes: Iterable[ContentChange]) -> Document:
        change = self.documents.change(uri, version, changes)
        tree = self._trees.get(uri)
        if tree is not None:
            try:
                tree.apply(change.edits, change.document.lines.encoded)
            except ParseFailed as err:
                logger.warning("dropping the syntax tree of %s: %s", uri, err)
                del self._trees[uri]
        return change.document

    def close(self, uri: str) -> None:
        self.documents.close(uri)
        self._trees.pop(uri, None)
        self.anchors.pop(uri, None)

    def snapshot(self, uri: str) -> Snapshot:
        document = self.documents.get(uri)
        tree = self._trees.get(uri)
        return Snapshot(
            document=document,
            spec=self.registry.spec(document.language_id),
            tree=tree.tree if tree is not None else None,
            anchor=self.anchors.get(uri),
            grammar=self.registry.grammar(document.language_id) if tree is not None else None,
        )
