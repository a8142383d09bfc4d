"""One thin function per LSP method: fetch the document, call the core, convert the answer.

`register` attaches them to a server; pygls passes the server as `ls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from dgemma_lsp.documents.positions import InvalidPosition
from dgemma_lsp.documents.text_sync import UnknownDocument
from dgemma_lsp.documents.workspace import OpenDocument, Workspace
from dgemma_lsp.lsp import messages, to_lsp
from dgemma_lsp.lsp.server import DgemmaServer
from dgemma_lsp.rewrite.targets import Target, next_edit_target, target_at
from dgemma_lsp.runtime.stats import record
from engine import Engine, EngineError

logger = logging.getLogger(__name__)

REWRITE_TITLE = "Rewrite block with DiffusionGemma"


def initialize(ls: DgemmaServer, params: types.InitializeParams) -> None:
    ls.follow_trace(params.trace)
    ls.repository.stop()  # an index an earlier initialize started (with its trust) ends here
    ls.documents = Workspace(ls.registry, ls.workspace.position_encoding or "utf-16", ls.repository.retrieval)
    raw = params.initialization_options
    if ls.tcp_token is not None:
        presented = raw.pop("tcpToken", None) if isinstance(raw, dict) else None
        ls.repository.trusted = presented is not None and _same_secret(presented, ls.tcp_token)
        if not ls.repository.trusted:
            ls.log(
                "no tcpToken from this client: its workspace folders are not read, and it names no model "
                "server or API key",
                types.MessageType.Warning,
            )
    ls.apply_options(raw)
    ls.repository.set_folders(folder_uris(params))


def _same_secret(presented: object, token: str) -> bool:
    """Whether the client presented the token (compared in constant time, whatever it sent)."""
    return secrets.compare_digest(str(presented).encode(), token.encode())


def folder_uris(params: types.InitializeParams) -> list[str]:
    """The workspace folders the client declares (rootUri and rootPath in older clients)."""
    if params.workspace_folders:
        return [folder.uri for folder in params.workspace_folders]
    if params.root_uri:
        return [params.root_uri]
    if params.root_path and not Path(params.root_path).is_absolute():
        logger.warning("rootPath %r is not an absolute path: ignored", params.root_path)
        return []
    return [Path(params.root_path).as_uri()] if params.root_path else []


def set_trace(ls: DgemmaServer, params: types.SetTraceParams) -> None:
    ls.follow_trace(params.value)


def initialized(ls: DgemmaServer, params: types.InitializedParams) -> None:
    ls.start_index_reports()
    ls.start_loading()  # the workspace index starts once the model is loaded: it would slow the load


def did_change_configuration(ls: DgemmaServer, params: types.DidChangeConfigurationParams) -> None:
    ls.apply_options(params.settings)
    ls.start_loading()
    ls.configure_repository()


def did_change_workspace_folders(ls: DgemmaServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    event = params.event
    ls.repository.add_folders([f.uri for f in event.added], [f.uri for f in event.removed])
    ls.configure_repository()  # the first folder may start the index


def did_change_watched_files(ls: DgemmaServer, params: types.DidChangeWatchedFilesParams) -> None:
    # Read lazily on the indexer's thread: one notification may hold 100,000 events.
    deleted = types.FileChangeType.Deleted
    ls.repository.watched((change.uri, change.type == deleted) for change in params.changes)


def did_open(ls: DgemmaServer, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    ls.documents.open(doc.uri, doc.language_id, doc.version, doc.text)
    ls.repository.opened(doc.uri, doc.text)


def did_save(ls: DgemmaServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri in ls.documents:
        ls.repository.saved(uri, ls.documents.get(uri).document.text)


def did_change(ls: DgemmaServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.stop_resolving(uri)  # a partial of the text before this change would be drawn in the wrong place
    try:
        edit = ls.documents.change(uri, params.text_document.version, params.content_changes)
    except UnknownDocument:
        ls.log(f"didChange for a document that is not open: {uri}", types.MessageType.Warning)
        return
    except (InvalidPosition, TypeError) as err:
        # Our copy no longer matches the client's: drop it rather than complete on wrong text.
        ls.documents.close(uri)
        ls.log(
            f"bad didChange for {uri} ({err}); completions stop until it is reopened",
            types.MessageType.Warning,
        )
        return
    opened = ls.documents.get(uri)
    if edit is not None:
        ls.inline.edited(opened, edit.offset, len(edit.old), edit.new)
    else:  # several changes at once, or the whole text: whatever was on screen was typed over
        ls.inline.edited(opened, -1, 0, "")
    engine = ls.engine_for(opened.document.language_id)
    # Right after an accepted proposal, start on the completion the user will ask for next.
    accepted = edit is not None and not edit.old and opened.inline.accepted(edit.offset, edit.new)
    if accepted and engine is not None:
        ls.in_background(_speculate(ls, opened, edit.offset + len(edit.new), engine))


async def _speculate(ls: DgemmaServer, opened: OpenDocument, cursor: int, engine: Engine) -> None:
    """Once the accepted text is parsed, start on the completion after it (unless the user typed on)."""
    uri, version = opened.document.uri, opened.document.version
    if await ls.documents.parsed(uri, version):
        ls.inline.speculate(opened, ls.documents.snapshot(uri), cursor, ls.options, engine)


def did_close(ls: DgemmaServer, params: types.DidCloseTextDocumentParams) -> None:
    with contextlib.suppress(UnknownDocument):  # closing twice is harmless
        ls.documents.close(params.text_document.uri)
    ls.repository.closed(params.text_document.uri)


async def inline_completion(
    ls: DgemmaServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    started = time.monotonic()
    uri = params.text_document.uri
    opened = _opened(ls, uri)
    cursor = _offset(ls, opened, params.position)
    explicit = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    if ls.options.completion.trigger == "manual" and not explicit:
        return types.InlineCompletionList(items=[])  # only when the user asks (the editor's trigger key)
    engine = ls.engine_for(opened.document.language_id)
    if engine is None:
        return types.InlineCompletionList(items=[])
    version = opened.document.version
    if not await ls.documents.parsed(uri, version):  # the keystroke's parse, on the parser thread
        return types.InlineCompletionList(items=[])  # typed on (or closed) meanwhile: a newer request comes
    resolving = ls.resolving_for(uri, version, params.position, started)  # dgemma/resolving, or None
    try:
        is_current = lambda: ls.documents.is_current(uri, version)  # noqa: E731 - read once the model is done
        answer = await ls.inline.complete(
            opened, ls.documents.snapshot(uri), cursor, ls.options, engine, started, is_current, explicit,
            resolving,
        )  # fmt: skip
    except asyncio.CancelledError:
        ls.stats.cancelled += 1
        raise
    except EngineError as err:  # a remote server down, slow or confused: said in the status
        ls.engine_failed(err)
        return types.InlineCompletionList(items=[])
    finally:
        ls.stop_resolving(uri, resolving)  # no partial after the answer
    if answer is None:
        return types.InlineCompletionList(items=[])
    ls.send_suggestion_facts(uri, version, params.position, answer.considered)
    if answer.result is not None and answer.result.stop_reason != "deadline":
        ls.engine_answered()
    latency_ms = (time.monotonic() - started) * 1000
    ls.answered(answer.source, latency_ms)
    multi_line = answer.context.mode != "single_line"
    ls.stats.add(
        record(answer.source, multi_line, latency_ms, answer.result, answer.queued_ms, answer.drafts)
    )
    ls.send_status()
    logger.debug(
        "completion at %d:%d: %d proposal(s) from %s in %.0f ms",
        params.position.line, params.position.character, len(answer.proposals), answer.source, latency_ms,
    )  # fmt: skip
    if ls.options.debug_log:
        logger.debug("completion at %s (%s): %r", cursor, answer.source, [p.text for p in answer.proposals])
    ls.send_confidence(uri, version, params.position, answer.proposals)  # dgemma/confidence, if declared
    return to_lsp.inline_completion_list(answer.proposals, opened.document, ls.documents.encoding)


async def code_action(ls: DgemmaServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    only = params.context.only
    if only and not any(types.CodeActionKind.RefactorRewrite.value.startswith(k) for k in only):
        return None
    opened = _opened(ls, params.text_document.uri)
    if ls.engine_for(opened.document.language_id) is None:
        return None
    start, end = _offset(ls, opened, params.range.start), _offset(ls, opened, params.range.end)
    version = opened.document.version
    if not await ls.documents.parsed(params.text_document.uri, version):
        return None  # the offsets are the older text's
    target = target_at(opened.document.lines, opened.snapshot().tree, min(start, end), max(start, end))
    if target is None:
        return None
    data = {
        "uri": opened.document.uri,
        "version": opened.document.version,
        "start": target.start,
        "end": target.end,
    }
    return [types.CodeAction(title=REWRITE_TITLE, kind=types.CodeActionKind.RefactorRewrite, data=data)]


async def code_action_resolve(ls: DgemmaServer, action: types.CodeAction) -> types.CodeAction:
    if action.data is None:
        return action  # not one of ours to resolve (VS Code asks for every action it shows): nothing to add
    data = action.data if isinstance(action.data, dict) else getattr(action.data, "_asdict", dict)()
    try:
        uri, version, start, end = data["uri"], int(data["version"]), int(data["start"]), int(data["end"])
        if not isinstance(uri, str) or not 0 <= start <= end:
            raise ValueError("the uri must be a string and 0 <= start <= end")
    except (KeyError, TypeError, ValueError, OverflowError) as err:  # int(Infinity): OverflowError
        raise JsonRpcInvalidParams(f"not a {REWRITE_TITLE!r} action: {err}") from err
    opened = _opened(ls, uri)
    document, engine = opened.document, ls.engine_for(opened.document.language_id)
    if engine is None or document.version != version or end > len(document.text):
        return action  # no edit: the text moved on, or no model; the client shows nothing to apply
    target = Target(start=start, end=end, text=document.text[start:end])
    try:
        rewritten = await ls.rewrites.rewrite(
            opened, target, ls.options, engine, lambda: ls.documents.is_current(uri, version)
        )
    except EngineError as err:
        ls.engine_failed(err)
        return action
    if rewritten is not None:
        action.edit = to_lsp.workspace_edit(uri, version, rewritten.changes, document, ls.documents.encoding)
    return action


async def next_edit(ls: DgemmaServer, params: object) -> dict | None:
    """params: {textDocument: {uri}, position}; result: null or {range, newText, confidence}."""
    try:
        asked = messages.NextEditParams.parse(params)
    except ValueError as err:
        raise JsonRpcInvalidParams(str(err)) from err
    opened = _opened(ls, asked.uri)
    document, engine = opened.document, ls.engine_for(opened.document.language_id)
    if engine is None:
        return None
    cursor = _offset(ls, opened, types.Position(line=asked.line, character=asked.character))
    target = next_edit_target(document.lines, cursor, ls.options.rewrite.next_edit_lines)
    if target is None:
        return None
    version = document.version
    try:
        rewritten = await ls.rewrites.rewrite(
            opened, target, ls.options, engine, lambda: ls.documents.is_current(asked.uri, version), True
        )
    except EngineError as err:
        ls.engine_failed(err)
        return None
    if rewritten is None or not rewritten.changes:
        return None
    first = rewritten.changes[0]
    span = to_lsp.range_of(document, first.start, first.end, ls.documents.encoding)
    return messages.NextEditResult(
        range=to_lsp.plain(span), newText=first.text, confidence=round(rewritten.confidence, 4)
    ).to_json()


def stats(ls: DgemmaServer, params: object) -> dict:
    """Counters and latency figures of this session; `{"reset": true}` starts them afresh."""
    summary = ls.stats.summary(superseded=ls.scheduler.superseded)
    if messages.wants_reset(params):
        ls.stats.reset()
        ls.scheduler.superseded = 0
    return summary


def shutdown(ls: DgemmaServer, params: None) -> None:
    ls.scheduler.stop()
    ls.repository.stop()
    if ls.client_log is not None:
        ls.client_log.detach()


def _opened(ls: DgemmaServer, uri: str) -> OpenDocument:
    try:
        return ls.documents.get(uri)
    except UnknownDocument as err:
        raise JsonRpcInvalidParams(str(err)) from err


def _offset(ls: DgemmaServer, opened: OpenDocument, position: types.Position) -> int:
    try:
        return opened.document.offset_at(position.line, position.character, ls.documents.encoding)
    except InvalidPosition as err:
        raise JsonRpcInvalidParams(str(err)) from err


def register(server: DgemmaServer) -> None:
    """Attach every handler; features with options are advertised in the capabilities."""
    rewrite_options = types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=True
    )
    for method, handler, options in (
        (types.INITIALIZE, initialize, None),
        (types.INITIALIZED, initialized, None),
        (types.SET_TRACE, set_trace, None),
        (types.WORKSPACE_DID_CHANGE_CONFIGURATION, did_change_configuration, None),
        (types.TEXT_DOCUMENT_DID_OPEN, did_open, None),
        (types.TEXT_DOCUMENT_DID_CHANGE, did_change, None),
        (types.TEXT_DOCUMENT_DID_CLOSE, did_close, None),
        (types.TEXT_DOCUMENT_DID_SAVE, did_save, None),
        (types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, did_change_workspace_folders, None),
        (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, did_change_watched_files, None),
        # pygls advertises inline completion only when the feature is registered with options.
        (types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_completion, types.InlineCompletionOptions()),
        (types.TEXT_DOCUMENT_CODE_ACTION, code_action, rewrite_options),
        (types.CODE_ACTION_RESOLVE, code_action_resolve, None),
        (messages.NEXT_EDIT, next_edit, None),
        (messages.STATS, stats, None),
        (types.SHUTDOWN, shutdown, None),
    ):
        server.feature(method, options)(handler)
