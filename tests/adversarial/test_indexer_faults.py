"""Faults injected into the indexer's reads and changes (an OSError, an unexpected error): the path is
skipped with a log line, the thread goes on, the walk is reported done and the indexer idle after each.
The faults are injected by replacing the indexer's file reader for chosen paths (no real file fails so
on demand as root)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository import indexer as indexer_module
from dgemma_lsp.repository.files import FileReader
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.indexer import Indexer, Progress
from dgemma_lsp.repository.service import rules_of
from dgemma_lsp.runtime.options import Options
from tests.repository.attacks import write

pytestmark = pytest.mark.adversarial
REGISTRY = LanguageRegistry()
FAULTS = {"b_fails.py": PermissionError(13, "Permission denied"), "c_breaks.py": RuntimeError("injected")}


@pytest.fixture
def faulty_reads(monkeypatch):
    """The indexer's reads of the files in FAULTS raise their error."""
    real = indexer_module.index_file

    def index_file(index, registry, root, path, *args, **kwargs):
        fault = FAULTS.get(Path(path).name)
        if fault is not None:
            raise fault
        return real(index, registry, root, path, *args, **kwargs)

    monkeypatch.setattr(indexer_module, "index_file", index_file)


def test_the_indexer_survives_faults_and_reports_idle_after_each(tmp_path, faulty_reads, caplog) -> None:
    root = tmp_path / "project"
    for name in ("a_fine.py", *FAULTS, "d_after.py"):
        write(root, name, f"def {name[:-3]}():\n    return 1\n")
    progress: list[Progress] = []
    index = RepositoryIndex()
    indexer = Indexer(index, REGISTRY, FileReader(rules_of(Options(), REGISTRY)), progress.append)
    try:
        with caplog.at_level(logging.INFO, logger="dgemma_lsp.repository"):
            indexer.add_folder(root)
            assert indexer.idle(timeout=60)
        assert progress[-1].done and progress[-1].files == 2
        assert {f.path for f in index.files()} == {"a_fine.py", "d_after.py"}
        for name in FAULTS:  # one line each
            assert sum(name in record.getMessage() for record in caplog.records) == 1, name
        # A change that fails, then one that works: both handled, idle after each.
        indexer.changed(root.resolve() / "c_breaks.py")
        assert indexer.idle(timeout=60)
        write(root, "e_new.py", "def e_new():\n    return 2\n")
        indexer.changed(root.resolve() / "e_new.py")
        assert indexer.idle(timeout=60)
        assert index.get(root.resolve() / "e_new.py") is not None
    finally:
        indexer.close()
