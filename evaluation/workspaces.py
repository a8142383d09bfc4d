"""Held-out rows scored with their package as the workspace, as the server would read it: one index per
package (built once, by the server's own indexing rules), and for each row its own file superseded by the
row's buffer, as an open document's is, so the answer is never read from disk."""

from __future__ import annotations

from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.files import allowed
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import index_file, index_folder
from dgemma_lsp.repository.retrieval import Definitions, DocumentRetrieval
from dgemma_lsp.repository.service import rules_of
from dgemma_lsp.runtime.options import Options
from evaluation.benchmarks import Item
from evaluation.heldout.workspaces import row_workspace


class RowWorkspaces:
    """Each row's package indexed as the server would; `open_row` and `close_row` around a row."""

    def __init__(self, root: Path, options: Options, registry: LanguageRegistry) -> None:
        self.root = root
        self.options = options
        self.registry = registry
        self.rules = rules_of(options, registry)
        self.definitions = Definitions(registry)
        self.indexes: dict[Path, RepositoryIndex] = {}

    def index(self, folder: Path) -> RepositoryIndex:
        found = self.indexes.get(folder)
        if found is None:
            context = self.options.context
            found = RepositoryIndex(context.workspace_max_files, context.workspace_max_bytes)
            index_folder(found, self.registry, self.rules, folder)
            self.indexes[folder] = found
        return found

    def open_row(self, item: Item, text: str) -> DocumentRetrieval:
        """The row's retrieval, its file in the index replaced by `text` (the row's buffer)."""
        folder, relative = row_workspace(item.id, self.root)
        folder = folder.resolve()
        index, path = self.index(folder), folder / relative
        spec = self.registry.spec_for_path(path)
        index.add(folder, path, spec.name if spec else item.language, text, from_buffer=True)
        return DocumentRetrieval(index, self.definitions, path, folder, lambda: frozenset({path}))

    def close_row(self, retrieval: DocumentRetrieval) -> None:
        """The row's file as it is on disk again, for the next rows of its package."""
        path, folder = retrieval.path, retrieval.root
        if path is None or folder is None:
            return
        index = self.indexes[folder]
        if not (allowed(path, folder, self.rules) and index_file(index, self.registry, folder, path)):
            index.remove(path)
