"""The open documents: one object per document holding everything the server keeps about it.

Every didOpen/didChange goes through here, so each edit reaches the text, the tree and the edit
history exactly once, and closing a document forgets all of it in one call. A `Snapshot` (an
immutable document and tree) is safe to hand to the model worker. The server's documents parse on
one parser thread, off the event loop; await `OpenDocument.parsed` before taking a snapshot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace

from tree_sitter import Language, Tree

from dgemma_lsp.documents.edit_history import EditHistory
from dgemma_lsp.documents.languages import LanguageRegistry, LanguageSpec
from dgemma_lsp.documents.positions import LineIndex, PositionEncoding
from dgemma_lsp.documents.syntax import ParseFailed, SyntaxTree
from dgemma_lsp.documents.text_sync import (
    ContentChange,
    Document,
    DocumentChange,
    UnknownDocument,
    change_document,
)
from dgemma_lsp.inline.context import WindowAnchor
from dgemma_lsp.inline.reuse import InlineMemory
from dgemma_lsp.repository.retrieval import DocumentRetrieval

logger = logging.getLogger(__name__)

# Tree-sitter's incremental reparse is linear in the size of a flat file: a multi-megabyte document
# would keep the parser thread busy for every keystroke, and every completion after it late. Bigger
# documents get plain-text windows.
MAX_TREE_CHARS = 1 << 20
MAX_NEIGHBOURS = 8  # other open documents searched for drafts, most recently opened first


@dataclass(frozen=True)
class Snapshot:
    """One version of a document with what a completion at it needs; immutable."""

    document: Document
    spec: LanguageSpec | None
    tree: Tree | None
    anchor: WindowAnchor | None
    grammar: Language | None = None
    neighbours: tuple[str, ...] = ()  # texts of the other open documents of its language (for drafts)
    repository: DocumentRetrieval | None = None  # the other files of its repository, when they are read


class OpenDocument:
    """An open document: its text, incremental tree, window anchor, completions and recent edits."""

    def __init__(
        self,
        document: Document,
        spec: LanguageSpec | None,
        grammar: Language | None,
        parser_thread: Executor | None = None,
    ) -> None:
        self.document = document
        self.spec = spec
        self.grammar = grammar
        self.parser_thread = parser_thread  # None: parse on the calling thread
        self.tree: SyntaxTree | None = None
        self.anchor: WindowAnchor | None = None  # where the last completion's windows began and ended
        self.inline = InlineMemory()
        self.history = EditHistory()
        self._parse()

    def _parse(self) -> None:
        if self.grammar is None:
            return
        if len(self.document.lines) > MAX_TREE_CHARS:
            logger.info("no syntax tree for %s: %d characters", self.document.uri, len(self.document.lines))
            return
        try:
            self.tree = SyntaxTree(self.grammar, self.document.lines.encoded, self.parser_thread)
        except ParseFailed as err:
            logger.warning("no syntax tree for %s: %s", self.document.uri, err)

    def apply(self, change: DocumentChange) -> None:
        """Move to the changed document: the tree follows incrementally, or is dropped or rebuilt."""
        before, self.document = self.document, change.document
        size = len(self.document.lines)
        if self.tree is not None and size > MAX_TREE_CHARS:
            self.tree = None
            logger.info("dropping the syntax tree of %s: %d characters", self.document.uri, size)
        elif self.tree is not None:
            try:
                self.tree.apply(change.edits, self.document.lines.encoded)
            except ParseFailed as err:
                logger.warning("dropping the syntax tree of %s: %s", self.document.uri, err)
                self.tree = None
        elif self.grammar is not None and len(before.lines) > MAX_TREE_CHARS >= size:
            self._parse()  # small again (an undone paste): parse afresh

    async def parsed(self) -> None:
        """Wait, without blocking the event loop, until the tree has caught up with the text."""
        while self.tree is not None and (pending := self.tree.pending) is not None:
            try:
                await asyncio.wrap_future(pending)
            except ParseFailed:
                return  # `snapshot` drops the tree and says why

    def snapshot(self) -> Snapshot:
        """The document with its tree (waiting for a parse still running: await `parsed` first)."""
        tree = None
        if self.tree is not None:
            try:
                tree = self.tree.tree
            except ParseFailed as err:
                logger.warning("dropping the syntax tree of %s: %s", self.document.uri, err)
                self.tree = None
        return Snapshot(
            document=self.document,
            spec=self.spec,
            tree=tree,
            anchor=self.anchor,
            grammar=self.grammar if tree is not None else None,
        )


@dataclass(frozen=True)
class Insertion:
    """A change that replaced `old` at `offset` with `new` (for edit history and accept detection)."""

    offset: int
    old: str
    new: str


class Workspace:
    """The open documents by URI, in the position encoding the client negotiated."""

    def __init__(
        self,
        registry: LanguageRegistry,
        encoding: PositionEncoding | str,
        repository: Callable[[str], DocumentRetrieval | None] = lambda uri: None,
    ) -> None:
        self.registry = registry
        self.encoding = PositionEncoding.parse(encoding)
        self.repository = repository  # a document's retrieval from the workspace index, when it is on
        self._open: dict[str, OpenDocument] = {}
        # One thread parses every document in turn (its thread starts with the first parse).
        self.parser_thread = ThreadPoolExecutor(1, thread_name_prefix="dgemma-parse")

    def open(self, uri: str, language_id: str, version: int, text: str) -> OpenDocument:
        """Start tracking `uri` (a second open replaces the first, as a client reopening it would)."""
        document = Document(uri, language_id, version, LineIndex(text))
        spec, grammar = self.registry.spec(language_id), self.registry.grammar(language_id)
        opened = OpenDocument(document, spec, grammar, self.parser_thread)
        self._open[uri] = opened
        return opened

    def change(self, uri: str, version: int, changes: Iterable[ContentChange]) -> Insertion | None:
        """Apply a didChange; returns the edit when it was one ranged change, else None.

        An unusable change (an end before its start) raises and leaves the document as it was.
        """
        opened = self.get(uri)
        changes = list(changes)
        before = opened.document
        opened.apply(change_document(before, version, changes, self.encoding))
        if len(changes) != 1 or getattr(changes[0], "range", None) is None:
            return None
        span = changes[0].range
        offset = before.offset_at(span.start.line, span.start.character, self.encoding)
        end = before.offset_at(span.end.line, span.end.character, self.encoding)
        edit = Insertion(offset, before.text[offset:end], changes[0].text)
        opened.history.record(edit.offset, edit.old, edit.new)
        return edit

    def close(self, uri: str) -> None:
        if self._open.pop(uri, None) is None:
            raise UnknownDocument(uri)

    def get(self, uri: str) -> OpenDocument:
        try:
            return self._open[uri]
        except KeyError:
            raise UnknownDocument(uri) from None

    def snapshot(self, uri: str) -> Snapshot:
        """The document's snapshot, with the other open documents of its language as neighbours and its
        retrieval from the rest of the repository."""
        opened = self.get(uri)
        language = opened.document.language_id
        neighbours = tuple(
            other.document.text
            for other in reversed(self._open.values())
            if other is not opened and other.document.language_id == language
        )[:MAX_NEIGHBOURS]
        return replace(opened.snapshot(), neighbours=neighbours, repository=self.repository(uri))

    async def parsed(self, uri: str, version: int) -> bool:
        """Wait for `uri`'s tree to catch up with its text; is `version` still the current one then
        (False once it is closed)?"""
        opened = self._open.get(uri)
        if opened is not None:
            await opened.parsed()
        return self.is_current(uri, version)

    def is_current(self, uri: str, version: int) -> bool:
        """Is `uri` still open at `version` (an answer computed for it is not stale)?"""
        opened = self._open.get(uri)
        return opened is not None and opened.document.version == version

    def __contains__(self, uri: object) -> bool:
        return uri in self._open

    def __iter__(self) -> Iterator[OpenDocument]:
        return iter(list(self._open.values()))

    def __len__(self) -> int:
        return len(self._open)


def standalone(
    text: str, language_id: str, registry: LanguageRegistry, uri: str = "untitled:"
) -> OpenDocument:
    """A document no client opened (the command line, evaluation), parsed as an open one would be."""
    document = Document(uri, language_id, 0, LineIndex(text))
    return OpenDocument(document, registry.spec(language_id), registry.grammar(language_id))
