"""Repository context for training examples: each document's package is its workspace, indexed and
retrieved by the server's own code (dgemma_lsp.repository), so the model learns to read what the
server will give it. The document itself is the open buffer: retrieval never shows its file."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from tree_sitter import Parser

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.retrieval import NOTHING, Definitions, DocumentRetrieval, Related
from training.data import Document

logger = logging.getLogger("training")

CORPUS_ROOT = Path("/corpus")  # where each package's files seem to lie (only paths the model reads)


def package_root(source: str) -> Path:
    return CORPUS_ROOT / re.sub(r"[^\w.+-]+", "-", source)


class PackageContexts:
    """One index per package of the training documents; `related` retrieves for a document of it."""

    def __init__(self, documents: Iterable[Document], registry: LanguageRegistry | None = None) -> None:
        self.registry = registry or LanguageRegistry()
        self.definitions = Definitions(self.registry, capacity=1 << 16)
        self.parsers: dict[str, Parser] = {}
        by_source: dict[str, list[Document]] = defaultdict(list)
        for doc in documents:
            if doc.source and doc.path:
                by_source[doc.source].append(doc)
        self.indexes: dict[str, RepositoryIndex] = {}
        for source, docs in by_source.items():
            if len(docs) < 2:
                continue  # a package of one file has nothing else to read
            root = package_root(source)
            index = RepositoryIndex(max_files=1 << 20, max_bytes=1 << 40)
            for doc in docs:
                index.add(root, root / doc.path, doc.language, doc.text)
            self.indexes[source] = index
        logger.info("repository context: %d packages indexed", len(self.indexes))

    def related(
        self, doc: Document, held: str, cursor: int, budget: int, count_tokens: Callable[[str], int]
    ) -> Related:
        """What the server would read for a cursor at `cursor` of `held` (the document without its middle)."""
        index = self.indexes.get(doc.source)
        grammar = self.registry.grammar(doc.language)
        if index is None or grammar is None:
            return NOTHING
        root = package_root(doc.source)
        path = root / doc.path
        retrieval = DocumentRetrieval(index, self.definitions, path, root, lambda: frozenset({path}))
        source = held.encode("utf-8")
        parser = self.parsers.setdefault(doc.language, Parser(grammar))
        return retrieval.related(
            held, source, cursor, doc.language, parser.parse(source), budget, count_tokens
        )
