"""The workspace index through the real server over stdio and pytest-lsp's real client: what is read,
what supersedes what, and what a completion gets from a file the user never opened."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp_session import inline, lsp_session, open_document, wait_until
from tests.repository.attacks import AUDITED, CURSOR, HELPERS, MAIN, REMOTE, workspace


def audited(log: Path) -> list[str]:
    return [sys.executable, str(AUDITED), str(log), "--", "--stdio"]


def indexed(client) -> bool:
    return any(m.message.startswith("indexed ") for m in client.log_messages)


def opened_files(log: Path) -> set[str]:
    return set(log.read_text().splitlines()) if log.exists() else set()


async def completion_text(client, uri: str) -> str:
    result = await inline(client, uri, *CURSOR)
    return result.items[0].insert_text if result and result.items else ""


async def test_an_answer_only_an_unopened_file_holds_is_completed(tmp_path, tiny_model_dir):
    root = workspace(tmp_path)
    uri = (root / "app.py").as_uri()
    async with lsp_session(tiny_model_dir, folders=[root]) as (client, _):
        await wait_until(lambda: indexed(client), what="the workspace index")
        # dgemma/status told the walk's progress (editors show no $/progress), and nothing once it is done.
        assert [s.indexing.files for s in client.statuses if s.indexing is not None][:1] == [0]
        assert client.statuses[-1].indexing is None
        open_document(client, uri, MAIN)
        assert await eventually(client, uri, "borders")  # retrieval answers the keystrokes after it ran
    off = {"context": {"workspace": False}}
    async with lsp_session(tiny_model_dir, folders=[root], options=off) as (client, _):
        open_document(client, uri, MAIN)
        assert "borders" not in await completion_text(client, uri)
        assert not indexed(client)


async def test_ignored_secret_and_out_of_root_files_are_never_opened(tmp_path, tiny_model_dir):
    root, outside = workspace(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (outside / "private.py").write_text("PASSWORD = 'hunter2'\n")
    (root / ".gitignore").write_text("scratch/\n")
    forbidden = ["scratch/notes.py", ".env", "config/credentials.py", "node_modules/pkg/index.js",
                 ".venv/lib/site.py", "keys/deploy.pem"]  # fmt: skip
    for relative in forbidden:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("SECRET = 1\n")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    os.symlink(outside / "private.py", root / "linked.py")
    os.symlink(outside, root / "linked_dir")
    log = tmp_path / "opened.log"
    async with lsp_session(tiny_model_dir, folders=[root], server=audited(log)) as (client, _):
        await wait_until(lambda: indexed(client), what="the workspace index")
    opened = opened_files(log)
    resolved = root.resolve()
    assert str(resolved / "report" / "helpers.py") in opened and str(resolved / "app.py") in opened
    for relative in forbidden:
        assert str(resolved / relative) not in opened, relative
    assert not any(path.startswith(str(outside.resolve())) for path in opened)
    assert not any("linked" in path for path in opened)


async def test_an_open_buffer_supersedes_its_file_and_a_changed_file_is_read_again(tmp_path, tiny_model_dir):
    root = workspace(tmp_path)
    uri, helpers = (root / "app.py").as_uri(), root / "report" / "helpers.py"
    async with lsp_session(tiny_model_dir, folders=[root]) as (client, _):
        await wait_until(lambda: indexed(client), what="the workspace index")
        edited = HELPERS.replace("with_borders", "with_frames")
        open_document(client, helpers.as_uri(), edited)  # not saved: the buffer is what counts
        open_document(client, uri, MAIN)
        assert await eventually(client, uri, "frames")
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=helpers.as_uri()))
        )
        assert await eventually(client, uri, "borders")  # closed: the file on disk again
        helpers.write_text(HELPERS.replace("with_borders", "with_margins"))
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=helpers.as_uri(), type=types.FileChangeType.Changed)]
            )
        )
        assert await eventually(client, uri, "margins")


async def eventually(client, uri: str, expected: str, timeout: float = 60) -> bool:
    """The completion starts with `expected` within `timeout` s (the indexer applies changes in turn)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await completion_text(client, uri)).startswith(expected):
            return True
        await asyncio.sleep(0.2)
    return False


async def test_a_large_repository_does_not_delay_the_first_completion(tmp_path, tiny_model_dir):
    root = workspace(tmp_path)
    body = "".join(f"def function_{i}(value):\n    return value * {i} + offset_{i}\n\n" for i in range(60))
    for n in range(5000):
        folder = root / "pkg" / f"m{n // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module_{n}.py").write_text(body)
    uri = (root / "app.py").as_uri()
    async with lsp_session(tiny_model_dir, folders=[root]) as (client, _):
        open_document(client, uri, MAIN)
        result = await inline(client, uri, *CURSOR)
        assert result is not None and result.items  # answered with what is indexed so far
        assert not indexed(client), "the index of 5,000 files was done before the first completion"
        begun = [r for reports in client.progress_reports.values() for r in reports if r.kind == "begin"]
        assert any("Indexing" in r.title for r in begun)


@pytest.mark.parametrize("workspace_option", [None, True])
async def test_a_remote_model_reads_no_workspace_unless_it_is_turned_on(
    tmp_path, tiny_model_dir, workspace_option
):
    root = workspace(tmp_path)
    log = tmp_path / "opened.log"
    options = {"context": {"workspace": workspace_option}} if workspace_option is not None else {}
    # Nothing listens at REMOTE: what matters is what is read before any request. The index would start
    # once the load failed; the server says instead that it reads no folder.
    async with lsp_session(
        REMOTE, folders=[root], options=options, server=audited(log), wait_for_model=False
    ) as (client, _):
        if workspace_option:
            await wait_until(lambda: indexed(client), what="the workspace index")
        else:
            said = "the workspace folders are not read: the model is remote"
            await wait_until(lambda: any(said in m.message for m in client.log_messages), what="its word")
    helpers = str((root / "report" / "helpers.py").resolve())
    assert (helpers in opened_files(log)) is bool(workspace_option)
