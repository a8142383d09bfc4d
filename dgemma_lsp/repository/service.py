"""The server's repository: the workspace folders the client declared, their index (built and kept
current by the indexer thread) and the retrieval of each open document.

It reads anything only when it is on: `context.workspace` (unset: on for a local model, off for a
remote one, whose prompts would carry the snippets off the machine) and a trusted client (over TCP,
only one that presented the server's secret).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.files import FileReader, FileRules
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import Indexer, Progress
from dgemma_lsp.repository.retrieval import Definitions, DocumentRetrieval
from dgemma_lsp.repository.uris import path_of
from dgemma_lsp.runtime.options import Options
from engine.loading import is_url

logger = logging.getLogger(__name__)

RECENT_S = 600.0  # a file saved or changed this long ago still counts as recently edited
RECENT_FILES = 64


def reads_workspace(options: Options) -> bool:
    """Whether the options let the server read the repository for the model they choose."""
    if options.context.workspace is not None:
        return options.context.workspace
    return not is_url(options.model)


def rules_of(options: Options, registry: LanguageRegistry) -> FileRules:
    context = options.context
    return FileRules(
        extensions=registry.extensions(options.completion.languages),
        max_file_bytes=context.workspace_max_file_bytes,
        exclude=context.workspace_exclude,
    )


def new_index(options: Options, reader: FileReader) -> RepositoryIndex:
    """An empty index as the server keeps one: the options' caps, the texts of files left on disk (read
    again through `reader`, every rule checked at each read)."""
    context = options.context
    return RepositoryIndex(context.workspace_max_files, context.workspace_max_bytes, read=reader.read)


class Repository:
    """Workspace folders -> index -> per-document retrieval; nothing is read until `configure` says so."""

    def __init__(self, registry: LanguageRegistry) -> None:
        self.registry = registry
        self.folders: list[Path] = []
        self.trusted = True  # False: a TCP client that did not present the secret
        self.index: RepositoryIndex | None = None
        self.indexer: Indexer | None = None
        self.definitions = Definitions(registry, later=self._later)
        self._settings: tuple | None = None  # what the index was built with
        self._open: dict[str, Path] = {}
        self._open_paths: frozenset[Path] = frozenset()
        self._recent: dict[Path, float] = {}  # files saved or changed on disk, when (replaced, never changed)
        self._said_off = False  # that the folders are not read, logged once
        self._retrievals: dict[str, DocumentRetrieval] = {}

    def _later(self, work: Callable[[], object]) -> bool:
        """Parse an imported file or retrieve on the indexer's thread, off the event loop."""
        return self.indexer is not None and self.indexer.run(work)

    @property
    def on(self) -> bool:
        return self.indexer is not None

    def set_folders(self, uris: list[str]) -> None:
        self.folders = [p for p in (path_of(uri) for uri in uris) if p is not None and os.path.isdir(p)]

    def configure(self, options: Options, on_progress: Callable[[Progress], None]) -> None:
        """Start, stop or rebuild the index for these options (a change of caps or rules rebuilds it)."""
        wanted = self.trusted and bool(self.folders) and reads_workspace(options)
        context = options.context
        settings = (
            rules_of(options, self.registry),
            context.workspace_max_files,
            context.workspace_max_bytes,
        )
        if wanted and self.indexer is not None and settings == self._settings:
            return
        before = self.indexer
        self.stop()
        if not wanted:
            if self.folders and not self._said_off:
                self._said_off = True
                logger.info("the workspace folders are not read: %s", self._why_not_read(options))
            return
        self._settings, self._said_off = settings, False
        reader = FileReader(settings[0])
        self.index = new_index(options, reader)
        self.definitions = Definitions(self.registry, later=self._later)  # keyed by this index's file ids
        self.indexer = Indexer(self.index, self.registry, reader, on_progress, after=before)
        for folder in self.folders:
            self.indexer.add_folder(folder)

    def _why_not_read(self, options: Options) -> str:
        if not self.trusted:
            return "this client did not present the server's token"
        if options.context.workspace is False:
            return "context.workspace is off"
        return "the model is remote and its prompts would carry them off the machine (context.workspace: on)"

    def stop(self) -> None:
        """Stop the index (its thread ends on its own: nothing here waits for it)."""
        if self.indexer is not None:
            self.indexer.close()
        self.indexer, self.index, self._settings = None, None, None
        self._retrievals.clear()

    def add_folders(self, added: list[str], removed: list[str]) -> None:
        """`workspace/didChangeWorkspaceFolders`; a folder an untrusted client adds is not read."""
        for path in (path_of(uri) for uri in removed):
            if path is not None and path in self.folders:
                self.folders.remove(path)
                if self.indexer is not None:
                    self.indexer.remove_folder(path)
        if added and not self.trusted:
            logger.warning("workspace folders added by a client without the tcpToken are not read")
            return
        for path in (path_of(uri) for uri in added):
            if path is not None and os.path.isdir(path) and path not in self.folders:
                self.folders.append(path)
                if self.indexer is not None:
                    self.indexer.add_folder(path)

    # --- documents

    def retrieval(self, uri: str) -> DocumentRetrieval | None:
        """The retrieval of an open document, while the index is on."""
        if self.index is None or self.indexer is None:
            return None
        found = self._retrievals.get(uri)
        if found is None:
            path = self._open.get(uri) or path_of(uri)
            root = self.indexer.root_of(path) if path is not None else None
            found = DocumentRetrieval(
                self.index,
                self.definitions,
                path,
                root,
                self.open_paths,
                self.recent_paths,
                later=self._later,
            )
            self._retrievals[uri] = found
        return found

    def open_paths(self) -> frozenset[Path]:
        """The open documents' files (read by retrieval on the indexer's thread: set anew at each change)."""
        return self._open_paths

    def recent_paths(self) -> frozenset[Path]:
        """Files saved or changed in the last RECENT_S seconds."""
        since = time.monotonic() - RECENT_S
        return frozenset(path for path, when in self._recent.items() if when >= since)

    def _touched(self, paths: Iterable[Path]) -> None:
        """Files saved or changed just now (from the event loop or the indexer's thread: the map is
        replaced, so a reader's copy never changes under it)."""
        now = time.monotonic()
        recent = self._recent | dict.fromkeys(list(paths)[-RECENT_FILES:], now)
        if len(recent) > RECENT_FILES:  # the oldest go first
            recent = dict(sorted(recent.items(), key=lambda item: item[1])[-RECENT_FILES:])
        self._recent = recent

    def opened(self, uri: str, text: str) -> None:
        path = path_of(uri)
        if path is None:
            return
        self._open[uri] = path
        self._open_paths = frozenset(self._open.values())
        if self.indexer is not None:
            self.indexer.buffer(path, text)

    def saved(self, uri: str, text: str) -> None:
        path = self._open.get(uri)
        if path is not None and self.indexer is not None:
            self._touched([path])
            self.indexer.buffer(path, text)

    def closed(self, uri: str) -> None:
        path = self._open.pop(uri, None)
        self._open_paths = frozenset(self._open.values())
        self._retrievals.pop(uri, None)
        if path is not None and self.indexer is not None:
            self.indexer.closed(path)

    def watched(self, changes: Iterable[tuple[str, bool]]) -> None:
        """Files changed on disk (`workspace/didChangeWatchedFiles`), as (uri, deleted) pairs: handed to the
        indexer's thread in one piece and read there (a lazy iterable is fine), nothing done here."""
        if self.indexer is not None:
            self.indexer.watched(changes, on_changed=self._touched)
