"""What a completion reads from the repository: the definitions of the names its file imports, then the
windows of other files most like the code above the cursor, within a token budget; and the files the
lookup draft searches after the open documents. The server, the benchmarks and the trainer use it alike.

A document's retrieval remembers its last answer: the query is the identifiers of the lines above the
cursor (not the word being typed), a window once chosen stays while it is still among the candidates,
and the snippets change only when what was chosen does, so typing keeps the prompt's cache. In the
server it runs on the indexer's thread: a completion gets at once the answer computed for an earlier
keystroke, and hands its own to that thread for the next (nothing read nor scored on the event loop).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Tree

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.definitions import definitions
from dgemma_lsp.repository.imports import Import, imports_of, resolve
from dgemma_lsp.repository.index import WINDOW_LINES, IndexedFile, RepositoryIndex, terms
from engine.api import Snippet

QUERY_LINES = 20  # lines above the cursor that make the query
CANDIDATES = 16  # windows considered; a chosen one stays while it is among them
WINDOWS = 3  # windows in the prompt at most
DEFINITIONS_SHARE = 0.6  # of the budget, at most, for imported definitions
MODULE_NAMES = 8  # definitions shown of a module imported whole, when none of its names is used yet
LOOKUP_FILES = 8
LOOKUP_CHARS = 512 * 1024
OPEN_BOOST = 1.5  # open documents' windows weigh more: the user works there
RECENT_BOOST = 1.25  # and so do files saved or changed lately
REQUERY_S = 1.0  # after the index changed, a query whose terms did not runs again at most this often
IMPORTS_S = 1.0  # the document's imports are read again at most this often (a walk of its top level)
_ATTRIBUTE = re.compile(r"\b([^\W\d]\w*)\.([^\W\d]\w*)")


@dataclass(frozen=True)
class Related:
    """Snippets for the prompt, and texts for the lookup draft to search."""

    snippets: tuple[Snippet, ...] = ()
    lookup_texts: tuple[str, ...] = ()


NOTHING = Related()


def query_terms(text: str, cursor: int) -> frozenset[str]:
    """The identifiers of the QUERY_LINES lines above the cursor and of its line, the word being typed
    left out (it changes with every key and is half written)."""
    start = cursor
    for _ in range(QUERY_LINES + 1):
        start = text.rfind("\n", 0, max(start - 1, 0))
        if start < 0:
            start = 0
            break
    return frozenset(terms(_without_typed_word(text[start:cursor])))


def _without_typed_word(text: str) -> str:
    """`text` less the word at its end (a loop, not `\\w+$`: that is quadratic in the word's length)."""
    end = len(text)
    while end and (text[end - 1].isalnum() or text[end - 1] == "_"):
        end -= 1
    return text[:end]


class Definitions:
    """What each indexed file defines, parsed once per version of the file (a bounded memo).

    `of` parses on the calling thread; with a `later` (the server's indexer thread; it says whether it
    took the work), `known` hands a file it has not parsed to it instead and answers None meanwhile, so
    no completion waits for a parse.
    """

    def __init__(
        self,
        registry: LanguageRegistry,
        capacity: int = 4096,
        later: Callable[[Callable[[], object]], bool] | None = None,
    ) -> None:
        self.registry = registry
        self.capacity = capacity
        self.later = later
        self.generation = 0  # counts the files parsed: a retrieval that waited for one looks again
        self._memo: OrderedDict[tuple[Path, int], dict[str, str]] = OrderedDict()
        self._asked: set[tuple[Path, int]] = set()
        self._lock = threading.Lock()

    def of(self, file: IndexedFile, index: RepositoryIndex) -> dict[str, str]:
        key = (file.root, file.id)  # ids are an index's own: several indexes may share the memo
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                return found
        grammar = self.registry.grammar(file.language)
        found = definitions(index.text_of(file), file.language, grammar) if grammar is not None else {}
        with self._lock:
            self._memo[key] = found
            self._asked.discard(key)
            if len(self._memo) > self.capacity:
                self._memo.popitem(last=False)
            self.generation += 1
        return found

    def known(self, file: IndexedFile, index: RepositoryIndex) -> dict[str, str] | None:
        """The file's definitions if parsed, else None (parsed later when there is a `later`, else now)."""
        if self.later is None:
            return self.of(file, index)
        key = (file.root, file.id)
        with self._lock:
            found = self._memo.get(key)
            if found is not None or key in self._asked:
                return found
            self._asked.add(key)
        if not self.later(lambda: self._parse_asked(file, index, key)):
            with self._lock:
                self._asked.discard(key)  # not taken: asked again next time
        return None

    def _parse_asked(self, file: IndexedFile, index: RepositoryIndex, key: tuple[Path, int]) -> None:
        try:
            self.of(file, index)
        finally:  # parsed or failed, it may be asked for again
            with self._lock:
                self._asked.discard(key)


@dataclass(frozen=True)
class _Ask:
    """What a completion asks retrieval for: its document's text and tree, the cursor, the budget."""

    text: str
    source: bytes
    cursor: int
    language: str
    tree: Tree | None
    budget_tokens: int
    count_tokens: Callable[[str], int]


@dataclass(frozen=True)
class _Window:
    file: IndexedFile
    start_line: int

    @property
    def key(self) -> tuple[Path, int]:
        return self.file.absolute, self.start_line


class DocumentRetrieval:
    """Retrieval for one document (`path` under workspace folder `root`; None for either when it has
    no file), remembering what it chose."""

    def __init__(
        self,
        index: RepositoryIndex,
        definitions_: Definitions,
        path: Path | None,
        root: Path | None,
        open_paths: Callable[[], frozenset[Path]] = frozenset,
        recent_paths: Callable[[], frozenset[Path]] = frozenset,
        clock: Callable[[], float] = time.monotonic,
        later: Callable[[Callable[[], object]], bool] | None = None,
    ) -> None:
        self.index = index
        self.definitions = definitions_
        self.path = path
        self.root = root
        self.open_paths = open_paths  # the files of open documents: favoured, and searched as such
        self.recent_paths = recent_paths  # files saved or changed lately: favoured
        self.clock = clock
        self.later = later  # runs the retrieval on another thread (it says whether it took it); None: here
        self._answer = NOTHING  # the last answer computed there
        self._asked: _Ask | None = None  # the newest ask waiting for it
        self._asked_lock = threading.Lock()
        self._terms: frozenset[str] | None = None
        self._queried_at = 0.0
        self._generation_seen = -1
        self._chosen: tuple[_Window, ...] = ()
        self._imports: tuple[Import, ...] | None = None
        self._definitions: tuple[Snippet, ...] = ()
        self._parsed_seen = -1  # the definitions' generation the imports were read at
        self._imports_at = -IMPORTS_S
        self._import_files: tuple[IndexedFile, ...] = ()
        self._rendered: tuple[tuple, Related] | None = None

    def related(
        self,
        text: str,
        source: bytes,
        cursor: int,
        language: str,
        tree: Tree | None,
        budget_tokens: int,
        count_tokens: Callable[[str], int],
    ) -> Related:
        """Snippets within `budget_tokens` and lookup texts for a completion at `cursor` of `text`: with a
        `later`, at once the answer computed for the last ask, this one handed to it for the next."""
        ask = _Ask(text, source, cursor, language, tree, budget_tokens, count_tokens)
        if self.later is None:
            return self._related(ask)
        with self._asked_lock:
            queued, self._asked = self._asked is not None, ask
        if not queued and not self.later(self._answer_asked):
            with self._asked_lock:
                self._asked = None
        return self._answer

    def _answer_asked(self) -> None:
        with self._asked_lock:
            ask, self._asked = self._asked, None
        if ask is not None:
            self._answer = self._related(ask)

    def _related(self, ask: _Ask) -> Related:
        open_paths = self.open_paths()
        generation, now = self.index.generation, self.clock()
        changed = generation != self._generation_seen and now - self._queried_at >= REQUERY_S
        if changed:  # files indexed, changed, opened or closed since: read them again
            self._generation_seen, self._queried_at = generation, now
        parsed = self.definitions.generation != self._parsed_seen  # an imported file parsed since
        if changed or parsed or now - self._imports_at >= IMPORTS_S:
            self._imports_at = now
            self._update_imports(ask.text, ask.source, ask.language, ask.tree, changed or parsed)
        self._update_windows(query_terms(ask.text, ask.cursor), open_paths, changed)
        key = (self._chosen, self._definitions, ask.budget_tokens, open_paths)
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = (key, self._render(ask.budget_tokens, ask.count_tokens, open_paths))
        return self._rendered[1]

    # --- the two sources

    def _update_imports(
        self, text: str, source: bytes, language: str, tree: Tree | None, changed: bool
    ) -> None:
        imports = tuple(imports_of(tree.root_node, source, language)) if tree is not None else ()
        if imports == self._imports and not changed:
            return
        self._imports, self._parsed_seen = imports, self.definitions.generation
        relative = self.path.relative_to(self.root).as_posix() if self.path and self.root else ""
        importer = self.index.get(self.path) if self.path else None
        attributes = _attributes(text) if any(i.alias for i in imports) else {}
        shown: dict[IndexedFile, dict[str, str]] = {}  # each imported file, what is shown of it
        for imported in imports:
            for file in resolve(self.index, imported, importer, self.root, relative, language):
                defined = self.definitions.known(file, self.index)
                if defined is not None:
                    taken = shown.setdefault(file, {})
                    taken |= {name: defined[name] for name in _names(defined, imported, attributes)}
        snippets = [Snippet(file.path, "\n\n".join(taken.values())) for file, taken in shown.items() if taken]
        self._definitions, self._import_files = tuple(snippets), tuple(shown)

    def _update_windows(self, query: frozenset[str], open_paths: frozenset[Path], changed: bool) -> None:
        if query == self._terms and not changed:
            return
        self._terms = query
        boost = dict.fromkeys(self.recent_paths(), RECENT_BOOST) | dict.fromkeys(open_paths, OPEN_BOOST)
        hits = self.index.query(query, CANDIDATES, exclude=self.path, boost=boost)
        candidates = {window.key: window for window in (_Window(hit.file, hit.start_line) for hit in hits)}
        if self._chosen and all(window.key in candidates for window in self._chosen):
            # What was chosen is still good: the same windows (their files' latest text), the prompt as it is.
            self._chosen = tuple(candidates[window.key] for window in self._chosen)
        else:
            self._chosen = _pick(list(candidates.values()))

    # --- the answer

    def _render(
        self, budget: int, count_tokens: Callable[[str], int], open_paths: frozenset[Path]
    ) -> Related:
        snippets: list[Snippet] = []
        used = 0
        for snippet in self._definitions:
            cost = count_tokens(f"{snippet.path}\n{snippet.text}") + 1
            if used + cost > budget * DEFINITIONS_SHARE:
                break
            snippets.append(snippet)
            used += cost
        for window in self._chosen:
            lines = self.index.text_of(window.file).split("\n")
            shown = "\n".join(lines[window.start_line : window.start_line + WINDOW_LINES]).strip("\n")
            if not shown:
                continue  # gone from disk, or may no longer be read
            cost = count_tokens(f"{window.file.path}\n{shown}") + 1
            if used + cost > budget:
                break
            snippets.append(Snippet(window.file.path, shown))
            used += cost
        lookup, size = [], 0
        for file in dict.fromkeys([*(w.file for w in self._chosen), *self._import_files]):
            if file.absolute in open_paths:
                continue  # an open document is searched as one already
            if len(lookup) >= LOOKUP_FILES or size + file.size > LOOKUP_CHARS:
                break
            text = self.index.text_of(file)
            if text:
                lookup.append(text)
                size += file.size
        return Related(tuple(snippets), tuple(lookup))


def _attributes(text: str) -> dict[str, list[str]]:
    """`name.attribute` uses in `text`: each name's attributes, in order of first use."""
    found: dict[str, dict[str, None]] = {}
    for name, attribute in _ATTRIBUTE.findall(text):
        found.setdefault(name, {})[attribute] = None
    return {name: list(attributes) for name, attributes in found.items()}


def _names(defined: dict[str, str], imported: Import, attributes: dict[str, list[str]]) -> list[str]:
    """The names of a file an import takes: those it names, else those the document uses of the module
    (`alias.name`), else the first few the module defines."""
    wanted = [name for name in imported.names if name in defined]
    if not wanted and imported.alias:
        wanted = [name for name in attributes.get(imported.alias, ()) if name in defined]
    return wanted or list(defined)[:MODULE_NAMES]


def _pick(candidates: list[_Window]) -> tuple[_Window, ...]:
    """The best WINDOWS windows that do not overlap, at most two from one file."""
    chosen: list[_Window] = []
    for window in candidates:
        same_file = [c for c in chosen if c.file.id == window.file.id]
        overlaps = any(abs(c.start_line - window.start_line) < WINDOW_LINES for c in same_file)
        if len(same_file) < 2 and not overlaps:
            chosen.append(window)
        if len(chosen) == WINDOWS:
            break
    return tuple(chosen)
