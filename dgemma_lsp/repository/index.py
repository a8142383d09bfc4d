"""The workspace index: an inverted index of windows of lines by the identifiers they hold, for BM25
retrieval of the windows most like the code at the cursor, and the files' texts when asked for.

Windows are WINDOW_LINES lines every WINDOW_STRIDE lines. A term's postings pack a window id and the
term's count in it into one integer (most terms occur once: a plain int, else an array); a file that
changes gets new windows and its old ones are marked dead, and the postings are compacted once dead
windows outnumber live ones. Files on disk keep no text in memory: `text_of` reads it again through a
small cache when retrieval shows or searches it; open documents' buffers (and the benchmarks' and the
trainer's documents) are kept. One thread writes (the indexer); readers take the lock for one lookup or
scoring pass, and a writer holds it only to swap in what it prepared outside it.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

import numpy as np

WINDOW_LINES = 20
WINDOW_STRIDE = 10
BM25_K1, BM25_B = 1.2, 0.75
# A term in more than this share of windows (and more than COMMON of them) says little about any of them
# ("self", "value"), and its postings would cost the most to score: it is left out of the query.
MAX_DF_SHARE = 0.2
COMMON = 64
_IDENTIFIER = re.compile(r"[^\W\d]\w+")
_KEYWORDS = frozenset(
    """and as assert async await break case catch class const continue def default del do elif else end
    enum except export extends false finally for from function global if implements import in instanceof
    interface is lambda let local match new nil none nonlocal not null or pass private protected public
    raise repeat return self static struct super switch then this throw true try type typeof undefined
    until var void while with yield fn pub mut impl use mod func package int str bool float""".split()  # noqa: SIM905
)


def terms(text: str) -> Counter[str]:
    """The identifiers of `text` that carry meaning (keywords and one-letter names left out)."""
    return Counter(t for t in _IDENTIFIER.findall(text) if t.lower() not in _KEYWORDS)


def window_starts(line_count: int) -> range:
    """First line of each window of a file: every WINDOW_STRIDE lines, the last reaching its end."""
    return range(0, max(1, line_count - WINDOW_LINES + WINDOW_STRIDE), WINDOW_STRIDE)


def windows_of(text: str) -> list[tuple[int, Counter[str]]]:
    """(first line, terms) of each window of `text`."""
    lines = text.split("\n")
    return [(s, terms("\n".join(lines[s : s + WINDOW_LINES]))) for s in window_starts(len(lines))]


@dataclass(frozen=True, eq=False)
class IndexedFile:
    """One indexed file (compared by identity: a changed file is a new one)."""

    id: int
    root: Path  # the workspace folder it was found under
    path: str  # relative to root, posix
    language: str
    size: int  # characters
    first_window: int
    windows: int
    text: str | None = None  # kept: an open document's buffer, or a caller's own; None: on disk

    @property
    def absolute(self) -> Path:
        return self.root / self.path


@dataclass(frozen=True)
class WindowHit:
    file: IndexedFile
    start_line: int
    score: float


@dataclass(frozen=True)
class IndexStats:
    files: int
    bytes: int  # characters of text held
    windows: int
    terms: int


PACK = 8  # bits of a posting that hold the term's count in the window (the rest: the window's id)
COUNT_MASK = (1 << PACK) - 1


class WindowTable:
    """Windows (their file, first line, length in terms, alive or not) and the postings of their terms."""

    def __init__(self) -> None:
        self.file = array("i")
        self.line = array("i")
        self.length = array("H")
        self.alive = bytearray()
        self.live = 0
        self.live_length = 0
        # term -> its postings, each (window id << PACK | count): one int, or an array once there are more
        self.postings: dict[str, int | array] = {}

    def add(self, file_id: int, windows: list[tuple[int, Counter[str]]]) -> int:
        """Append a file's windows; returns the id of the first."""
        first = len(self.file)
        postings = self.postings
        for start, counts in windows:
            window = len(self.file)
            length = min(sum(counts.values()), 65535)
            self.file.append(file_id)
            self.line.append(start)
            self.length.append(length)
            self.alive.append(1)
            self.live += 1
            self.live_length += length
            for term, count in counts.items():
                posting = window << PACK | min(count, COUNT_MASK)
                held = postings.get(term)
                if held is None:
                    postings[term] = posting
                elif isinstance(held, int):
                    postings[term] = array("I", (held, posting))
                else:
                    held.append(posting)
        return first

    def kill(self, first: int, count: int) -> None:
        for window in range(first, first + count):
            if self.alive[window]:
                self.alive[window] = 0
                self.live -= 1
                self.live_length -= self.length[window]

    @property
    def dead(self) -> int:
        return len(self.file) - self.live

    def packed(self, term: str) -> np.ndarray | None:
        held = self.postings.get(term)
        if held is None:
            return None
        if isinstance(held, int):
            return np.array([held], dtype=np.uint32)
        return np.frombuffer(held, dtype=np.uint32).copy()

    def scores(self, query_terms: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the windows that hold a query term, their BM25 against the query): only those, so a query
        costs what its terms' postings hold, not what the whole table does."""
        none = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if not self.live:
            return none
        average = max(self.live_length / self.live, 1.0)
        lengths = np.frombuffer(self.length, dtype=np.uint16)
        alive = np.frombuffer(self.alive, dtype=np.uint8)
        sums = np.zeros(len(self.file), dtype=np.float32)  # scattered into: cheaper than sorting postings
        common = max(MAX_DF_SHARE * self.live, COMMON)
        for term in sorted(set(query_terms)):  # a fixed order: the same sums, run after run
            held = self.postings.get(term)
            if held is None or (not isinstance(held, int) and len(held) > 2 * common):
                continue  # common beyond doubt (dead postings cannot make up the half of it)
            packed = self.packed(term)
            ids, tf = (packed >> PACK).astype(np.int64), (packed & COUNT_MASK).astype(np.float32)
            if self.dead:  # a changed file's old windows still have postings
                keep = alive[ids].astype(bool)
                ids, tf = ids[keep], tf[keep]
            df = len(ids)
            if not df or df > common:
                continue
            idf = math.log(1.0 + (self.live - df + 0.5) / (df + 0.5))
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[ids].astype(np.float32) / average)
            sums[ids] += idf * tf * (BM25_K1 + 1.0) / (tf + norm)  # a term's windows are distinct
        windows = np.flatnonzero(sums)
        return windows, sums[windows]

    def compacted(self) -> tuple[WindowTable, np.ndarray]:
        """The table without its dead windows, and each old window's new id (-1: dropped)."""
        alive = np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
        moved = np.full(len(self.file), -1, dtype=np.int64)
        moved[alive] = np.arange(int(alive.sum()))
        table = WindowTable()
        keep = np.flatnonzero(alive)
        table.file = array("i", np.frombuffer(self.file, dtype=np.int32)[keep].tobytes())
        table.line = array("i", np.frombuffer(self.line, dtype=np.int32)[keep].tobytes())
        table.length = array("H", np.frombuffer(self.length, dtype=np.uint16)[keep].tobytes())
        table.alive = bytearray(b"\x01" * len(keep))
        table.live, table.live_length = self.live, self.live_length
        for term in list(self.postings):
            packed = self.packed(term)
            ids = packed >> PACK
            packed = packed[alive[ids]]
            if not len(packed):
                continue
            renumbered = (moved[packed >> PACK].astype(np.uint32) << PACK) | (packed & COUNT_MASK)
            table.postings[term] = (
                int(renumbered[0]) if len(renumbered) == 1 else array("I", renumbered.tobytes())
            )
        return table, moved


class RepositoryIndex:
    """Files by path and windows by identifier, bounded by a file count and a byte count."""

    def __init__(
        self,
        max_files: int = 10_000,
        max_bytes: int = 128 * 1024 * 1024,
        read: Callable[[Path, Path], str | None] | None = None,
        cache_chars: int = 16 * 1024 * 1024,
    ) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes  # characters of code indexed, held in memory or not
        self._reader = read  # (path, its folder) -> its text from disk, the rules checked; None: kept
        self._texts: OrderedDict[int, str] = OrderedDict()  # files read again lately, by id
        self._cached_chars = 0
        self._cache_chars = cache_chars
        self._text_lock = threading.Lock()
        self._lock = threading.Lock()
        self._files: dict[int, IndexedFile] = {}
        self._by_path: dict[Path, int] = {}
        self._by_tail: dict[str, list[int]] = {}  # "b.py", "a/b.py", ... -> files whose path ends so
        self._next_id = 0
        self._bytes = 0
        self._table = WindowTable()
        self.generation = 0  # counts the changes: a retrieval that saw an older one reads again

    # --- what is held (any thread)

    def stats(self) -> IndexStats:
        with self._lock:
            return IndexStats(len(self._files), self._bytes, self._table.live, len(self._table.postings))

    def text_of(self, file: IndexedFile) -> str:
        """A file's text: kept, or read from disk again (through a bounded cache, every check of the rules
        made at the read); "" if it is gone or may no longer be read."""
        if file.text is not None:
            return file.text
        with self._text_lock:
            if file.id in self._texts:
                self._texts.move_to_end(file.id)
                return self._texts[file.id]
        text = (self._reader(file.absolute, file.root) if self._reader else None) or ""
        with self._text_lock:
            self._texts[file.id] = text
            self._cached_chars += len(text)
            while self._cached_chars > self._cache_chars and len(self._texts) > 1:
                self._cached_chars -= len(self._texts.popitem(last=False)[1])
        return text

    def get(self, path: Path) -> IndexedFile | None:
        with self._lock:
            file_id = self._by_path.get(path)
            return None if file_id is None else self._files[file_id]

    def files(self) -> list[IndexedFile]:
        with self._lock:
            return list(self._files.values())

    def full(self) -> bool:
        return len(self._files) >= self.max_files or self._bytes >= self.max_bytes

    def by_tail(self, tail: str) -> list[IndexedFile]:
        """The files whose relative path ends with `tail` in whole components ("pkg/mod.py")."""
        with self._lock:
            return [self._files[i] for i in self._by_tail.get(tail, ())]

    def query(
        self,
        query_terms: Iterable[str],
        limit: int,
        exclude: Path | None = None,
        boost: Mapping[Path, float] | None = None,
    ) -> list[WindowHit]:
        """The `limit` windows most like the query by BM25, best first; none of `exclude`, and the
        windows of files in `boost` weighed by their factor (open and recently edited files)."""
        with self._lock:
            table = self._table
            windows, scores = table.scores(query_terms)
            if not len(windows):
                return []
            owners = np.frombuffer(table.file, dtype=np.int32)[windows]
            for path, factor in (boost or {}).items():
                if (file_id := self._by_path.get(path)) is not None:
                    scores[owners == file_id] *= factor
            if exclude is not None and (file_id := self._by_path.get(exclude)) is not None:
                scores[owners == file_id] = 0.0
            count = min(limit, len(scores))
            best = np.sort(np.argpartition(-scores, count - 1)[:count])  # ties: the earlier window first
            best = best[np.argsort(-scores[best], kind="stable")]
            return [
                WindowHit(self._files[int(owners[i])], table.line[int(windows[i])], float(scores[i]))
                for i in best
                if scores[i] > 0
            ]

    # --- changes (one writer thread)

    def add(self, root: Path, path: Path, language: str, text: str, from_buffer: bool = False) -> bool:
        """Index `text` as the file `path` under `root`, replacing what was held for it (its text is kept
        for a buffer, or when the index has no reader). False when a cap would be passed (left out)."""
        relative = path.relative_to(root).as_posix()
        windows = windows_of(text)  # the costly part, outside the lock
        kept = text if from_buffer or self._reader is None else None
        with self._lock:
            old = self._by_path.get(path)
            growth = len(text) - (self._files[old].size if old is not None else 0)
            if (old is None and len(self._files) >= self.max_files) or self._bytes + growth > self.max_bytes:
                return False
            if old is not None:
                self._drop(old)
            file_id, self._next_id = self._next_id, self._next_id + 1
            first = self._table.add(file_id, windows)
            self._files[file_id] = IndexedFile(
                file_id, root, relative, language, len(text), first, len(windows), kept
            )
            self._by_path[path] = file_id
            for tail in _tails(relative):
                self._by_tail.setdefault(tail, []).append(file_id)
            self._bytes += len(text)
            self.generation += 1
        self._compact_if_needed()
        return True

    def remove(self, path: Path) -> bool:
        with self._lock:
            file_id = self._by_path.get(path)
            if file_id is None:
                return False
            self._drop(file_id)
            self.generation += 1
        self._compact_if_needed()
        return True

    def remove_folder(self, root: Path) -> None:
        for file in self.files():
            if file.root == root:
                self.remove(file.absolute)

    def _drop(self, file_id: int) -> None:
        file = self._files.pop(file_id)
        del self._by_path[file.absolute]
        for tail in _tails(file.path):
            ids = self._by_tail[tail]
            ids.remove(file_id)
            if not ids:
                del self._by_tail[tail]
        self._bytes -= file.size
        self._table.kill(file.first_window, file.windows)
        with self._text_lock:
            if (dropped := self._texts.pop(file_id, None)) is not None:
                self._cached_chars -= len(dropped)

    def _compact_if_needed(self) -> None:
        """Drop dead windows once they outnumber live ones (prepared outside the lock: the writer is this
        thread, so nothing changes meanwhile; readers keep the old table until the swap)."""
        with self._lock:
            if self._table.dead < max(1000, self._table.live):
                return
            old, files = self._table, list(self._files.values())
        table, moved = old.compacted()
        renumbered = {f.id: replace(f, first_window=int(moved[f.first_window])) for f in files if f.windows}
        with self._lock:
            self._table = table
            self._files.update(renumbered)


def _tails(relative: str) -> list[str]:
    """Every path suffix of whole components: "a/b/c.py" -> "c.py", "b/c.py", "a/b/c.py"."""
    parts = PurePosixPath(relative).parts
    return ["/".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)]
