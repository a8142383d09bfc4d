"""The indexer's thread seen from the event loop: closing it never waits for what it is doing."""

from __future__ import annotations

import threading

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.files import FileReader
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import Indexer
from dgemma_lsp.repository.service import rules_of
from dgemma_lsp.runtime.options import Options

REGISTRY = LanguageRegistry()


def test_close_returns_while_the_thread_is_still_busy() -> None:
    indexer = Indexer(RepositoryIndex(), REGISTRY, FileReader(rules_of(Options(), REGISTRY)))
    busy, released = threading.Event(), threading.Event()
    indexer.run(lambda: (busy.set(), released.wait(30)))
    assert busy.wait(30)
    watchdog = threading.Timer(2, released.set)  # frees a close that waits (main waited up to 5 s)
    watchdog.start()
    try:
        indexer.close()
        assert not released.is_set(), "close waited for the thread's work"
    finally:
        released.set()
        watchdog.cancel()
        indexer.join(30)
