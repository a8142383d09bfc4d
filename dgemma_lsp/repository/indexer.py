"""The index's one writer: a thread that walks the workspace folders in the background, then keeps the
index current as files change on disk and documents open, are saved and close.

Changes wait in a queue and go before the walk (an open document is indexed before the next file on
disk); the walk sleeps a moment between files so that the event loop and the model worker keep the
interpreter. Progress goes to a callback (the server turns it into `$/progress`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.files import FileRules, allowed, compiled_output_of, read_code, walk
from dgemma_lsp.repository.index import RepositoryIndex

logger = logging.getLogger(__name__)

# Between files of the walk the indexer rests as long as the file took (at least PAUSE_S): it holds the
# interpreter at most half the time, so the event loop and the model worker keep theirs.
PAUSE_S = 0.0005
REPORT_EVERY_S = 0.5


def index_file(index: RepositoryIndex, registry: LanguageRegistry, root: Path, path: Path) -> bool:
    """Read `path` (already allowed by the rules) into `index` as a file of workspace folder `root`."""
    spec = registry.spec_for_path(path)
    if spec is None or not path.is_relative_to(root):
        return False
    text = read_code(path)
    return text is not None and index.add(root, path, spec.name, text)


def index_folder(index: RepositoryIndex, registry: LanguageRegistry, rules: FileRules, folder: Path) -> int:
    """Walk `folder` into `index` on this thread (benchmarks; the server's indexer walks in the background);
    returns the files read."""
    folder = folder.resolve()
    return sum(index_file(index, registry, folder, path) for path in walk(folder, rules) if not index.full())


@dataclass(frozen=True)
class Progress:
    files: int  # indexed so far
    folder: str  # the folder being walked
    done: bool = False
    capped: bool = False  # a file or byte cap was reached: the rest is left out


class Indexer:
    """Walks `folders` into `index` on a thread of its own; `close` stops it."""

    def __init__(
        self,
        index: RepositoryIndex,
        registry: LanguageRegistry,
        rules: FileRules,
        on_progress: Callable[[Progress], None] = lambda progress: None,
    ) -> None:
        self.index = index
        self.registry = registry
        self.rules = rules
        self.on_progress = on_progress
        self.folders: list[Path] = []
        self._changes: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._walks: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._idle = threading.Event()  # set when the thread has nothing left to do
        self._stopped = threading.Event()
        self._buffers: set[Path] = set()  # files whose index entry is an open document's text
        self._thread = threading.Thread(target=self._run, name="dgemma-index", daemon=True)
        self._thread.start()

    # --- what the server asks (any thread)

    def add_folder(self, folder: Path) -> None:
        folder = folder.resolve()
        if folder not in self.folders:
            self.folders.append(folder)
            self._idle.clear()
            self._walks.put(folder)
            self._wake.set()

    def remove_folder(self, folder: Path) -> None:
        folder = folder.resolve()
        if folder in self.folders:
            self.folders.remove(folder)
            self._do(lambda: self.index.remove_folder(folder))

    def changed(self, path: Path) -> None:
        """A file was created or changed on disk (an open document's buffer still wins)."""
        self._do(lambda: path not in self._buffers and self._reread(path))

    def deleted(self, path: Path) -> None:
        self._do(lambda: path not in self._buffers and self.index.remove(path))

    def buffer(self, path: Path, text: str) -> None:
        """An open document's text supersedes its file on disk (at open and save)."""

        def index_buffer() -> None:
            root = self.root_of(path)
            spec = self.registry.spec_for_path(path)
            if root is not None and spec is not None and allowed(path, root, self.rules):
                self._buffers.add(path)
                self.index.add(root, path, spec.name, text, from_buffer=True)

        self._do(index_buffer)

    def closed(self, path: Path) -> None:
        """The document closed: its file on disk is what counts again."""

        def reread() -> None:
            if path in self._buffers:
                self._buffers.discard(path)
                self._reread(path)

        self._do(reread)

    def run(self, work: Callable[[], object]) -> None:
        """Do `work` on the indexer's thread, before the rest of the walk (a parse a completion wants)."""
        self._do(work)

    def root_of(self, path: Path) -> Path | None:
        """The workspace folder holding `path`, the innermost if folders nest."""
        inside = [f for f in self.folders if path.is_relative_to(f)]
        return max(inside, key=lambda f: len(f.parts)) if inside else None

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def idle(self, timeout: float = 60.0) -> bool:
        """Wait until every change and walk asked for so far is done (tests and benchmarks, which ask
        from one thread)."""
        return self._idle.wait(timeout)

    # --- the thread

    def _do(self, change: Callable[[], object]) -> None:
        self._idle.clear()
        self._changes.put(change)
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            self._apply_changes()
            while not self._stopped.is_set():
                try:
                    folder = self._walks.get_nowait()
                except queue.Empty:
                    break
                self._walk(folder)
            if self._changes.empty() and self._walks.empty():
                self._idle.set()

    def _apply_changes(self) -> None:
        while True:
            try:
                change = self._changes.get_nowait()
            except queue.Empty:
                return
            try:
                change()
            except Exception:  # one bad file must not stop the index
                logger.exception("index change failed")

    def _walk(self, folder: Path) -> None:
        files, reported, capped = 0, 0.0, False
        self.on_progress(Progress(0, str(folder)))
        for path in self._files(folder):
            self._apply_changes()
            if folder not in self.folders:
                break  # removed meanwhile
            if self.index.full():
                capped = True
                break
            began = time.monotonic()
            if path not in self._buffers and self._read(path):
                files += 1
            if time.monotonic() - reported >= REPORT_EVERY_S:
                reported = time.monotonic()
                self.on_progress(Progress(files, str(folder)))
            time.sleep(max(PAUSE_S, time.monotonic() - began))
        if capped:
            logger.warning(
                "workspace index full (%s): the rest of %s is left out", self.index.stats(), folder
            )
        self.on_progress(Progress(files, str(folder), done=True, capped=capped))

    def _files(self, folder: Path) -> Iterator[Path]:
        return walk(folder, self.rules, stop=self._stopped.is_set)

    def _reread(self, path: Path) -> None:
        """Index `path` again from disk if the rules let it be read, else forget it."""
        root = self.root_of(path)
        if (
            root is None
            or not allowed(path, root, self.rules)
            or self._compiled(path, root)
            or not self._read(path)
        ):
            self.index.remove(path)

    def _compiled(self, path: Path, root: Path) -> bool:
        """JavaScript an indexed TypeScript source compiles to (the walk leaves it out too)."""
        indexed = lambda tail: [f.path for f in self.index.by_tail(tail) if f.root == root]  # noqa: E731
        return compiled_output_of(path.relative_to(root).as_posix(), indexed)

    def _read(self, path: Path) -> bool:
        root = self.root_of(path)
        return root is not None and index_file(self.index, self.registry, root, path)
