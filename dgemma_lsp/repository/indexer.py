"""The index's one writer: a thread that walks the workspace folders in the background, then keeps the
index current as files change on disk and documents open, are saved and close.

Changes wait in a queue and go before the walk (an open document is indexed before the next file on
disk); files changed on disk are coalesced (one read per path, however many events named it, a
notification of any size taken in one piece). Between files the thread rests as long as the file took,
so that the event loop and the model worker keep the interpreter. It never dies: a path that fails is
skipped with a log line, any other error is logged and the thread goes on; each walk reports its end.
Progress goes to a callback (the server turns it into `$/progress`).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.files import FileReader, FileRules, TypeScriptSources, read_allowed, skip
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.uris import path_of

logger = logging.getLogger(__name__)

# Between files the indexer rests as long as the file took (at least PAUSE_S): it holds the interpreter
# at most half the time, so the event loop and the model worker keep theirs.
PAUSE_S = 0.0005
REPORT_EVERY_S = 0.5
ERROR_REST_S = 0.1  # after an unexpected error, before the thread goes on
REFRESH_S = 0.005  # files changed on disk are read again for this long at a time, then the thread rests


def index_file(
    index: RepositoryIndex,
    registry: LanguageRegistry,
    root: Path,
    path: Path,
    read: Callable[[Path, Path], str | None] = read_allowed,
) -> bool:
    """Read `path` into `index` as a file of workspace folder `root`; `read(path, root)` gives its text
    (by default for a path already allowed by the rules: the checks at the read only)."""
    spec = registry.spec_for_path(path)
    if spec is None or not path.is_relative_to(root):
        return False
    text = read(path, root)
    return text is not None and index.add(root, path, spec.name, text)


def index_folder(index: RepositoryIndex, registry: LanguageRegistry, rules: FileRules, folder: Path) -> int:
    """Walk `folder` into `index` on this thread (benchmarks; the server's indexer walks in the background);
    returns the files read."""
    folder, reader = folder.resolve(), FileReader(rules)
    return sum(
        index_file(index, registry, folder, path, reader.read_walked)
        for path in reader.walk(folder)
        if not index.full()
    )


@dataclass(frozen=True)
class Progress:
    files: int  # indexed so far
    folder: str  # the folder being walked
    done: bool = False
    capped: bool = False  # a file or byte cap was reached: the rest is left out


class Indexer:
    """Walks `folders` into `index` on a thread of its own, reading through `reader`; `close` stops it
    without waiting. With `after`, the thread first waits for that (closed) indexer's to end, so that
    their progress reports do not mix."""

    def __init__(
        self,
        index: RepositoryIndex,
        registry: LanguageRegistry,
        reader: FileReader,
        on_progress: Callable[[Progress], None] = lambda progress: None,
        after: Indexer | None = None,
    ) -> None:
        self.index = index
        self.registry = registry
        self.reader = reader
        self.on_progress = on_progress
        self.folders: list[Path] = []
        self._changes: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._walks: queue.SimpleQueue[Path] = queue.SimpleQueue()
        # Files changed on disk, oldest first, to read again (True: deleted); the thread's own.
        self._stale: OrderedDict[Path, bool] = OrderedDict()
        self._sources: dict[Path, TypeScriptSources] = {}  # each folder's TypeScript files, from its walk
        self._pending = threading.Lock()  # between queuing work and the thread saying it is idle
        self._wake = threading.Event()
        self._idle = threading.Event()  # set when the thread has nothing left to do
        self._stopped = threading.Event()
        self._buffers: set[Path] = set()  # files whose index entry is an open document's text
        self._after = after
        self._thread = threading.Thread(target=self._run, name="dgemma-index", daemon=True)
        self._thread.start()

    # --- what the server asks (any thread)

    def add_folder(self, folder: Path) -> None:
        folder = folder.resolve()
        if folder not in self.folders:
            self.folders.append(folder)
            with self._pending:
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
        self._do(lambda: self._mark(path, deleted=False))

    def deleted(self, path: Path) -> None:
        self._do(lambda: self._mark(path, deleted=True))

    def watched(
        self,
        changes: Iterable[tuple[str, bool]],
        on_changed: Callable[[list[Path]], None] = lambda paths: None,
    ) -> None:
        """Files changed on disk, as (uri, deleted) pairs: read on the thread, in one piece, however many
        (a lazy iterable is fine); `on_changed` gets the paths changed, not deleted, from there."""
        self._do(lambda: self._take_events(changes, on_changed))

    def buffer(self, path: Path, text: str) -> None:
        """An open document's text supersedes its file on disk (at open and save)."""

        def index_buffer() -> None:
            root = self.root_of(path)
            spec = self.registry.spec_for_path(path)
            if root is not None and spec is not None and self.reader.check(path, root) is not None:
                self._buffers.add(path)
                self.index.add(root, path, spec.name, text, from_buffer=True)

        self._do(index_buffer)

    def closed(self, path: Path) -> None:
        """The document closed: its file on disk is what counts again."""

        def reread() -> None:
            if path in self._buffers:
                self._buffers.discard(path)
                self._mark(path, deleted=False)

        self._do(reread)

    def run(self, work: Callable[[], object]) -> bool:
        """Do `work` on the indexer's thread, before the rest of the walk (a parse or a retrieval a
        completion wants); False when the indexer is closed and will not."""
        if self._stopped.is_set():
            return False
        self._do(work)
        return True

    def root_of(self, path: Path) -> Path | None:
        """The workspace folder holding `path`, the innermost if folders nest."""
        named = str(path)
        inside = [f for f in self.folders if named.startswith(str(f).rstrip("/") + "/")]
        return max(inside, key=lambda f: len(f.parts)) if inside else None

    def close(self) -> None:
        """Stop the thread (at its next file or change) without waiting for it."""
        self._stopped.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the closed thread to end (benchmarks and tests)."""
        self._thread.join(timeout)

    def idle(self, timeout: float = 60.0) -> bool:
        """Wait until every change and walk asked for so far is done (tests and benchmarks, which ask
        from one thread)."""
        return self._idle.wait(timeout)

    # --- the thread

    def _do(self, change: Callable[[], object]) -> None:
        with self._pending:
            self._idle.clear()
            self._changes.put(change)
        self._wake.set()

    def _run(self) -> None:
        if self._after is not None:
            self._after.join()
            self._after = None
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            try:
                self._work()
            except Exception:  # a defect, not a file: the thread must go on all the same
                logger.exception("the workspace index met an error; it goes on")
                self._wake.set()
                time.sleep(ERROR_REST_S)
                continue
            with self._pending:
                if self._changes.empty() and self._walks.empty() and not self._stale:
                    self._idle.set()

    def _work(self) -> None:
        """Changes, then files changed on disk, then walks, until there is nothing left."""
        while not self._stopped.is_set():
            self._apply_changes()
            if self._stale:
                self._refresh_some()
                continue
            try:
                folder = self._walks.get_nowait()
            except queue.Empty:
                return
            self._walk(folder)

    def _apply_changes(self) -> None:
        while True:
            try:
                change = self._changes.get_nowait()
            except queue.Empty:
                return
            try:
                change()
            except Exception:  # one bad change must not stop the index
                logger.exception("index change failed")

    def _rest(self, worked_s: float) -> None:
        time.sleep(max(PAUSE_S, worked_s))

    def _walk(self, folder: Path) -> None:
        files, reported, capped = 0, 0.0, False
        self.on_progress(Progress(0, str(folder)))
        sources = self._sources[folder] = TypeScriptSources()
        try:
            for path in self.reader.walk(folder, self._stopped.is_set, self._rest, sources):
                self._apply_changes()
                if self._stale:
                    self._refresh_some()  # files changed on disk go before the next of the walk
                if folder not in self.folders:
                    break  # removed meanwhile
                if self.index.full():
                    capped = True
                    break
                began = time.monotonic()
                if path not in self._buffers and self._index_walked(path, folder):
                    files += 1
                if time.monotonic() - reported >= REPORT_EVERY_S:
                    reported = time.monotonic()
                    self.on_progress(Progress(files, str(folder)))
                self._rest(time.monotonic() - began)
        finally:
            if capped:
                logger.warning(
                    "workspace index full (%s): the rest of %s is left out", self.index.stats(), folder
                )
            self.on_progress(Progress(files, str(folder), done=True, capped=capped))

    def _index_walked(self, path: Path, root: Path) -> bool:
        try:
            return index_file(self.index, self.registry, root, path, self.reader.read_walked)
        except OSError as err:
            skip(path, err)
        except Exception:  # a defect on one file: logged, the walk goes on
            logger.exception("cannot index %s", path)
        return False

    def _take_events(
        self, changes: Iterable[tuple[str, bool]], on_changed: Callable[[list[Path]], None]
    ) -> None:
        refused, first, changed, folders = 0, "", [], {}
        began = time.monotonic()
        for uri, deleted in changes:
            if time.monotonic() - began >= REFRESH_S:  # a notification of any size: rest as it is read
                self._rest(time.monotonic() - began)
                began = time.monotonic()
            path = path_of(uri, quiet=True, folders=folders)
            if path is None:
                refused, first = refused + 1, first or uri
                continue
            self._mark(path, deleted)
            if not deleted:
                changed.append(path)
        if refused:
            logger.warning("%d watched-file URIs name no local file (the first: %s): ignored", refused, first)
        on_changed(changed)

    def _mark(self, path: Path, deleted: bool) -> None:
        """`path` to read again (or to forget), after the others: one entry however many events name it."""
        self._stale[path] = deleted
        self._stale.move_to_end(path)

    def _refresh_some(self) -> None:
        """Read the oldest files changed on disk again (or forget them) for REFRESH_S, then rest as long."""
        began = time.monotonic()
        while self._stale and time.monotonic() - began < REFRESH_S:
            path, deleted = self._stale.popitem(last=False)
            try:
                if path not in self._buffers and (deleted or not self._reindex(path)):
                    self.index.remove(path)
            except OSError as err:
                skip(path, err)
            except Exception:  # a defect on one file: logged, the rest go on
                logger.exception("cannot index %s", path)
        self._rest(time.monotonic() - began)

    def _reindex(self, path: Path) -> bool:
        """Index `path` again from disk if the rules let it be read, every check made at this read."""
        root = self.root_of(path)
        if root is None or not os.path.lexists(path):
            return False
        relative = path.relative_to(root).as_posix()
        sources = self._sources.setdefault(root, TypeScriptSources())
        if sources.compiles_to(relative):
            return False  # JavaScript an indexed TypeScript source compiles to: the walk leaves it out too
        sources.add(relative)
        return index_file(self.index, self.registry, root, path, self.reader.read)
