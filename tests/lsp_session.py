"""Start the real server over stdio and drive it with pytest-lsp's real LSP client."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = [sys.executable, "-m", "dgemma_lsp", "--stdio"]


def capabilities(
    encodings: list[str] | None = None, experimental: dict | None = None
) -> types.ClientCapabilities:
    # pytest-lsp's bundled client profiles declare no inline completion: say what an editor says, and
    # that this client reads dgemma/status (the server sends it only to clients that say so), and
    # any other dgemma/* notification a test declares.
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None,
        experimental={"dgemma": {"status": True, **(experimental or {})}},
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(
            workspace_folders=True,
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
        ),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(),
            inline_completion=types.InlineCompletionClientCapabilities(),
        ),
    )


async def wait_until(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def model_loaded(client: LanguageClient) -> bool:
    return any("loaded in" in m.message for m in client.log_messages)


@contextlib.asynccontextmanager
async def lsp_session(
    model: Path | str | None,
    encodings: list[str] | None = None,
    options: dict | None = None,
    wait_for_model: bool = True,
    folders: list[Path] | None = None,
    server: list[str] | None = None,
    experimental: dict | None = None,
) -> AsyncIterator[tuple[LanguageClient, types.InitializeResult]]:
    client = await ClientServerConfig(server_command=server or SERVER).start()
    client.statuses = []  # the server's dgemma/status notifications, in order

    @client.feature("dgemma/status")
    def on_status(params) -> None:
        client.statuses.append(params)

    init_options = dict(options or {})
    if model is not None:
        init_options["model"] = str(model)
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities(encodings, experimental),
            initialization_options=init_options,
            process_id=None,
            workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders or []]
            or None,
        )
    )
    try:
        if wait_for_model:
            await wait_until(lambda: model_loaded(client), what="the model to load")
        yield client, result
    finally:
        await client.shutdown_session()
        await client.stop()


def open_document(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )


def change(client: LanguageClient, uri: str, version: int, line: int, char: int, end_line: int, end_char: int,
           text: str) -> None:  # fmt: skip
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=line, character=char),
                        end=types.Position(line=end_line, character=end_char),
                    ),
                    text=text,
                )
            ],
        )
    )


async def inline(
    client: LanguageClient, uri: str, line: int, character: int
) -> types.InlineCompletionList | None:
    # A server that never answers must fail the test, not hang it.
    return await asyncio.wait_for(_inline(client, uri, line, character), timeout=30)


async def _inline(
    client: LanguageClient, uri: str, line: int, character: int
) -> types.InlineCompletionList | None:
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
    )
