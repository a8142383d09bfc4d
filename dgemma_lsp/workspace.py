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

# Tree-sitter's incremental reparse is linear in the size of a flat file: at 10 MB one keystroke
# held the event loop 2-4 s and the tree took ~370 MB. Bigger documents get plain-text windows.
MAX_TREE_CHARS = 1 << 20


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
        self._too_big: set[str] = set()  # documents with a grammar but no tree for their size
        self.anchors: dict[str, WindowAnchor] = {}

    @property
    def encoding(self) -> PositionEncoding:
        return self.documents.encoding

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        document = self.documents.open(uri, language_id, version, text)
        self.anchors.pop(uri, None)
        self._trees.pop(uri, None)
        self._too_big.discard(uri)
        self._parse(document)
        return document

    def _parse(self, document: Document) -> None:
        grammar = self.registry.grammar(document.language_id)
        if grammar is None:
            return
        if len(document.lines) > MAX_TREE_CHARS:
            logger.info("no syntax tree for %s: %d characters", document.uri, len(document.lines))
            self._too_big.add(document.uri)
            return
        try:
            self._trees[document.uri] = SyntaxTree(grammar, document.lines.encoded)
        except ParseFailed as err:
            logger.warning("no syntax tree for %s: %s", document.uri, err)

    def change(self, uri: str, version: int, changes: Iterable[ContentChange]) -> Document:
        change = self.documents.change(uri, version, changes)
        document = change.document
        tree = self._trees.get(uri)
        if tree is not None and len(document.lines) > MAX_TREE_CHARS:
            del self._trees[uri]
            self._too_big.add(uri)
            logger.info("dropping the syntax tree of %s: %d characters", uri, len(document.lines))
        elif tree is not None:
            try:
                tree.apply(change.edits, document.lines.encoded)
            except ParseFailed as err:
                logger.warning("dropping the syntax tree of %s: %s", uri, err)
                del self._trees[uri]
        elif uri in self._too_big and len(document.lines) <= MAX_TREE_CHARS:
            self._too_big.discard(uri)  # small again (an undone paste): parse afresh
            self._parse(document)
        return document

    def close(self, uri: str) -> None:
        self.documents.close(uri)
        self._trees.pop(uri, None)
        self._too_big.discard(uri)
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
