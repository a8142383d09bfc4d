"""The workspace index: the text of every file read, and an inverted index of windows of lines by the
identifiers they hold, for BM25 retrieval of the windows most like the code at the cursor.

Windows are WINDOW_LINES lines every WINDOW_STRIDE lines. Postings are compact arrays (window ids and
term counts); a file that changes gets new windows and its old ones are marked dead, and the table is
rebuilt once dead windows outnumber live ones. One thread writes (the indexer); readers take the lock
for one lookup or scoring pass, and a writer holds it only to swap in what it prepared outside it.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
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


@dataclass(frozen=True)
class IndexedFile:
    id: int
    root: Path  # the workspace folder it was found under
    path: str  # relative to root, posix
    language: str
    text: str
    first_window: int
    windows: int
    from_buffer: bool = False  # the text of an open document, which supersedes the file on disk

    @property
    def absolute(self) -> Path:
        return self.root / self.path

    def lines(self, start: int, count: int) -> str:
        return "\n".join(self.text.split("\n")[start : start + count])


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


class WindowTable:
    """Windows (their file, first line, length in terms, alive or not) and the postings of their terms."""

    def __init__(self) -> None:
        self.file = array("i")
        self.line = array("i")
        self.length = array("H")
        self.alive = bytearray()
        self.live = 0
        self.live_length = 0
        self.postings: dict[str, array] = {}  # term -> window ids
        self.counts: dict[str, array] = {}  # term -> its count in each of those windows

    def add(self, file_id: int, windows: list[tuple[int, Counter[str]]]) -> int:
        """Append a file's windows; returns the id of the first."""
        first = len(self.file)
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
                postings = self.postings.get(term)
                if postings is None:
                    postings = self.postings[term] = array("i")
                    self.counts[term] = array("H")
                postings.append(window)
                self.counts[term].append(min(count, 65535))
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

    def scores(self, query_terms: Iterable[str]) -> np.ndarray:
        """BM25 of every window against the query's terms (dead windows 0)."""
        scores = np.zeros(len(self.file), dtype=np.float32)
        if not self.live:
            return scores
        average = max(self.live_length / self.live, 1.0)
        lengths = np.frombuffer(self.length, dtype=np.uint16).astype(np.float32)
        alive = np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
        for term in set(query_terms):
            postings = self.postings.get(term)
            if postings is None:
                continue
            ids = np.frombuffer(postings, dtype=np.int32).copy()
            tf = np.frombuffer(self.counts[term], dtype=np.uint16).astype(np.float32)
            if self.dead:  # a changed file's old windows still have postings
                ids, tf = ids[alive[ids]], tf[alive[ids]]
            df = len(ids)
            if not df or df > max(MAX_DF_SHARE * self.live, COMMON):
                continue
            idf = math.log(1.0 + (self.live - df + 0.5) / (df + 0.5))
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[ids] / average)
            scores[ids] += idf * tf * (BM25_K1 + 1.0) / (tf + norm)
        return scores


class RepositoryIndex:
    """Files by path and windows by identifier, bounded by a file count and a byte count."""

    def __init__(self, max_files: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes
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
            if not table.live:
                return []
            scores = table.scores(query_terms)
            owners = np.frombuffer(table.file, dtype=np.int32).copy()
            for path, factor in (boost or {}).items():
                if (file_id := self._by_path.get(path)) is not None:
                    scores[owners == file_id] *= factor
            if exclude is not None and (file_id := self._by_path.get(exclude)) is not None:
                scores[owners == file_id] = 0.0
            count = min(limit, len(scores))
            best = np.sort(np.argpartition(-scores, count - 1)[:count])  # ties: the earlier window first
            best = best[np.argsort(-scores[best], kind="stable")]
            return [
                WindowHit(self._files[int(owners[w])], table.line[int(w)], float(scores[w]))
                for w in best
                if scores[w] > 0
            ]

    # --- changes (one writer thread)

    def add(self, root: Path, path: Path, language: str, text: str, from_buffer: bool = False) -> bool:
        """Index `text` as the file `path` under `root`, replacing what was held for it. False when a cap
        would be passed (the file is left out)."""
        relative = path.relative_to(root).as_posix()
        windows = windows_of(text)  # the costly part, outside the lock
        with self._lock:
            old = self._by_path.get(path)
            growth = len(text) - (len(self._files[old].text) if old is not None else 0)
            if (old is None and len(self._files) >= self.max_files) or self._bytes + growth > self.max_bytes:
                return False
            if old is not None:
                self._drop(old)
            file_id, self._next_id = self._next_id, self._next_id + 1
            first = self._table.add(file_id, windows)
            self._files[file_id] = IndexedFile(
                file_id, root, relative, language, text, first, len(windows), from_buffer
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
        self._bytes -= len(file.text)
        self._table.kill(file.first_window, file.windows)

    def _compact_if_needed(self) -> None:
        """Rebuild the table from the live files once dead windows outnumber live ones (built outside the
        lock from the files as they are: the writer is this thread, so nothing changes meanwhile)."""
        with self._lock:
            if self._table.dead < max(1000, self._table.live):
                return
            files = list(self._files.values())
        table, moved = WindowTable(), {}
        for file in files:
            moved[file.id] = replace(file, first_window=table.add(file.id, windows_of(file.text)))
        with self._lock:
            self._table = table
            self._files.update(moved)


def _tails(relative: str) -> list[str]:
    """Every path suffix of whole components: "a/b/c.py" -> "c.py", "b/c.py", "a/b/c.py"."""
    parts = PurePosixPath(relative).parts
    return ["/".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)]
