"""A file the index holds, swapped after it was indexed for a link out of the folder, a FIFO, a link to
/dev/zero or a 200 MB file: the completions that read it again are answered in time and open none of
them; a watched-file event for a path that is now a link removes its entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.service import Repository
from dgemma_lsp.runtime.options import Options
from tests.lsp_session import wait_until
from tests.repository.attacks import (
    HELPERS,
    Audit,
    complete_in_app,
    completion_text,
    indexed_lines,
    local_session,
    workspace,
    write,
)

pytestmark = pytest.mark.adversarial

STOLEN = "def build_report(rows):\n    table = render_table_with_stolen_text(rows)\n"
KINDS = ("link_out", "fifo", "dev_zero", "huge")


def swap(helpers: Path, kind: str, outside: Path) -> list[str]:
    """Replace the indexed `helpers` by `kind`; returns the paths the server must not open after."""
    helpers.unlink()
    if kind == "link_out":
        target = write(outside, "private.py", STOLEN)
        os.symlink(target, helpers)
        return [str(target), str(helpers)]
    if kind == "fifo":
        os.mkfifo(helpers)
        return [str(helpers)]
    if kind == "dev_zero":
        os.symlink("/dev/zero", helpers)
        return ["/dev/zero", str(helpers)]
    with open(helpers, "wb") as huge:
        huge.truncate(200 * 1024 * 1024)  # 200 MB, far over the size cap
    return [str(helpers)]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_file_swapped_after_it_was_indexed_is_not_read(tmp_path, tiny_model_dir, kind):
    root, outside = workspace(tmp_path), tmp_path / "outside"
    outside.mkdir()
    write(root, "report/other.py", HELPERS.replace("with_borders", "with_margins"))
    audit = Audit(tmp_path / "opened.log")
    async with local_session(tiny_model_dir, audit, [root]) as client:
        await wait_until(lambda: indexed_lines(client), what="the workspace index")
        forbidden = swap(root.resolve() / "report" / "helpers.py", kind, outside.resolve())
        mark = audit.mark()
        texts = [await complete_in_app(client, root)]
        # Retrieval read both files again (the one swapped, refused, and the other) once the answer
        # comes from the other one: every answer in time meanwhile.
        while not texts[-1].startswith("margins") and len(texts) < 50:
            texts.append(await completion_text(client, (root / "app.py").as_uri()))
        assert texts[-1].startswith("margins"), texts
        assert not any("stolen" in text for text in texts)
    opened = audit.since(mark)
    for path in forbidden:
        assert path not in opened, path


def test_a_watched_file_event_for_a_path_now_a_link_removes_its_entry(tmp_path) -> None:
    root, outside = workspace(tmp_path), tmp_path / "outside"
    target = write(outside, "private.py", STOLEN)
    repository = Repository(LanguageRegistry())
    repository.set_folders([root.as_uri()])
    repository.configure(Options(), lambda progress: None)
    try:
        assert repository.indexer.idle(timeout=60)
        helpers = root.resolve() / "report" / "helpers.py"
        assert repository.index.get(helpers) is not None
        helpers.unlink()
        os.symlink(target, helpers)
        repository.watched([(helpers.as_uri(), False)])
        assert repository.indexer.idle(timeout=60)
        assert repository.index.get(helpers) is None
    finally:
        repository.stop()
