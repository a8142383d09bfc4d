"""Workspaces and server sessions for the attacks on what the index reads (tests/adversarial, and the
workspace tests here): the real server over stdio under an audit hook that logs every file it opens, a
bound on every answer, and a teardown that kills a server that stopped answering. Test material."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient, make_test_lsp_client

from tests.lsp_session import capabilities, model_loaded, open_document, wait_until

AUDITED = Path(__file__).with_name("audited_server.py")
BOUND_S = 10.0  # every request is answered within this (the tiny model answers in well under a second)
HELPERS = (
    "def build_report(rows):\n    table = render_table_with_borders(rows, padding=2)\n    return table\n"
)
MAIN = "def build_summary(rows):\n    table = render_table_with_\n"
CURSOR = (1, len("    table = render_table_with_"))
REMOTE = "http://127.0.0.1:9/v1"  # nothing listens: the load fails at once and the index starts


def workspace(base: Path) -> Path:
    """report/helpers.py, which holds the answer, and app.py, where the completion is asked for."""
    root = base / "project"
    (root / "report").mkdir(parents=True)
    (root / "report" / "helpers.py").write_text(HELPERS)
    (root / "app.py").write_text(MAIN)
    return root


def write(root: Path, relative: str, text: str = "MARKER = 'forbidden'\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class Audit:
    """The files the audited server opened, in order."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def opened(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def mark(self) -> int:
        return len(self.opened())

    def since(self, mark: int) -> list[str]:
        return self.opened()[mark:]

    def command(self, *, without_root_reads: bool = False) -> list[str]:
        """The audited server's command; `without_root_reads`: root's power to read and list any file is
        dropped (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that permissions bite as for any user."""
        dropped = (
            ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if without_root_reads else []
        )
        return [*dropped, sys.executable, str(AUDITED), str(self.log), "--", "--stdio"]


def indexed_lines(client: LanguageClient) -> list[str]:
    return [m.message for m in client.log_messages if m.message.startswith("indexed ")]


def logged(client: LanguageClient, text: str) -> bool:
    return any(text in m.message for m in client.log_messages)


@contextlib.asynccontextmanager
async def session(
    command: list[str],
    model: str,
    folders: list[Path] | None = None,
    options: dict | None = None,
    folder_uris: list[str] | None = None,
    root_path: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[LanguageClient]:
    """A real server session; a server that no longer answers `shutdown` within BOUND_S is killed."""
    client = make_test_lsp_client()
    await client.start_io(*command, cwd=cwd, env=env)
    uris = folder_uris if folder_uris is not None else [f.as_uri() for f in folders or []]
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities(),
                    initialization_options={**(options or {}), "model": model},
                    process_id=None,
                    root_path=root_path,
                    workspace_folders=[types.WorkspaceFolder(uri=u, name=str(i)) for i, u in enumerate(uris)]
                    or None,
                )
            ),
            BOUND_S * 3,
        )
        yield client
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), BOUND_S)
        except Exception:
            if client._server is not None and client._server.returncode is None:
                client._server.kill()
        await client.stop()


@contextlib.asynccontextmanager
async def local_session(tiny_model_dir: Path, audit: Audit, folders: list[Path], **kwargs):
    """`session` with the tiny model, once it is loaded."""
    async with session(audit.command(), str(tiny_model_dir), folders, **kwargs) as client:
        await wait_until(lambda: model_loaded(client), what="the model to load")
        yield client


async def completion_text(client: LanguageClient, uri: str, position: tuple[int, int] = CURSOR) -> str:
    """The first proposal at `position`; fails the test when the server takes longer than BOUND_S."""
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=position[0], character=position[1]),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
    )
    try:
        result = await asyncio.wait_for(client.text_document_inline_completion_async(params), BOUND_S)
    except TimeoutError:
        raise AssertionError(f"no answer within {BOUND_S:.0f} s") from None
    return result.items[0].insert_text if result and result.items else ""


async def complete_in_app(client: LanguageClient, root: Path) -> str:
    uri = (root / "app.py").as_uri()
    open_document(client, uri, MAIN)
    return await completion_text(client, uri)


def watched(client: LanguageClient, changes: list[tuple[str, types.FileChangeType]]) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=u, type=t) for u, t in changes])
    )


def add_folder(client: LanguageClient, folder: Path) -> None:
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)], removed=[]
            )
        )
    )
