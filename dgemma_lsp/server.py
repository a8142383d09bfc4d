"""The language server: one object holding the state, handlers named after their LSP methods.

Handlers stay thin: fetch the document, call the pure core (`completion.plan` / `finish`), convert
to lsprotocol types. The model runs on the scheduler's worker thread; nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcParseError
from pygls.lsp.server import LanguageServer

from dgemma_lsp import __version__, convert
from dgemma_lsp.completer import Answer, Completer
from dgemma_lsp.documents import Document, UnknownDocument
from dgemma_lsp.edit_history import EditHistory
from dgemma_lsp.languages import LanguageRegistry
from dgemma_lsp.model_host import ModelChoice, ModelHost, ModelState
from dgemma_lsp.options import Options, parse_options
from dgemma_lsp.positions import InvalidPosition
from dgemma_lsp.protocol import DgemmaProtocol
from dgemma_lsp.rewrite import Target, target_at
from dgemma_lsp.rewriter import Rewriter, next_edit_target
from dgemma_lsp.scheduler import Scheduler
from dgemma_lsp.stats import Stats, record
from dgemma_lsp.workspace import OpenFiles

logger = logging.getLogger(__name__)

STATUS_NOTIFICATION = "dgemma/status"
STATS_REQUEST = "dgemma/stats"
NEXT_EDIT_REQUEST = "dgemma/nextEdit"
REWRITE_TITLE = "Rewrite block with DiffusionGemma"


class DgemmaServer(LanguageServer):
    def __init__(self, model_override: str | None = None) -> None:
        super().__init__("dgemma-lsp", __version__, protocol_cls=DgemmaProtocol)
        self.model_override = model_override  # --model on the command line wins over client options
        self.options = self._with_override(Options())
        self.registry = LanguageRegistry()
        self.scheduler = Scheduler()
        self.model = ModelHost(self.scheduler)
        self.completer = Completer(self.scheduler)
        self.stats = Stats()
        self.history = EditHistory()
        self.rewriter = Rewriter(self.scheduler, self.history)
        self.files = OpenFiles(self.registry, "utf-16")
        self.last_latency_ms: float | None = None
        self.last_source: str | None = None  # where the last answer came from: model, cache, ...
        self._load_task: asyncio.Task | None = None

    def _with_override(self, options: Options) -> Options:
        return replace(options, model=self.model_override) if self.model_override else options

    # --- messages a user must see, and the log

    def tell(self, message: str, level: types.MessageType = types.MessageType.Error) -> None:
        """Show and log a message the user must act on."""
        self.window_show_message(types.ShowMessageParams(type=level, message=f"dgemma-lsp: {message}"))
        self.log(message, level)

    def log(self, message: str, level: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(type=level, message=message))

    def report_server_error(self, error: Exception, source: type) -> None:
        # pygls would show every out-of-band error (a malformed notification, say) as a popup; the log
        # is the place for them. Errors answering a request already go back in the response.
        if isinstance(error, json.JSONDecodeError):
            # JSON-RPC answers a message that is not JSON with Parse error and a null id (pygls does not).
            with contextlib.suppress(Exception):
                self.protocol.send_error(None, JsonRpcParseError(f"the message is not valid JSON: {error}"))
        logger.error("%s: %s", getattr(source, "__name__", source), error)
        with contextlib.suppress(Exception):  # the transport itself may be what failed
            self.log(f"{getattr(source, '__name__', source)}: {error}", types.MessageType.Error)

    def apply_options(self, raw: object) -> None:
        options, problems = parse_options(raw, self.options)
        self.options = self._with_override(options)
        # pygls logs every message it sends at INFO: completions and rewrites are code, kept out of
        # the log unless debugLog is on (then the root logger's level decides, -v for DEBUG).
        logging.getLogger("pygls.protocol.json_rpc").setLevel(
            logging.NOTSET if self.options.debug_log else logging.WARNING
        )
        for problem in problems:
            self.tell(problem, types.MessageType.Warning)

    # --- the model

    def start_loading(self) -> None:
        """Load the configured model in the background, with $/progress when the client shows it."""
        choice = ModelChoice.of(self.options)
        if self.model.choice == choice and self.model.state in (ModelState.READY, ModelState.LOADING):
            return
        self._load_task = asyncio.ensure_future(self._load(choice))

    async def _load(self, choice: ModelChoice) -> None:
        token = await self._begin_progress(f"Loading model {choice.spec}")
        started = time.monotonic()
        self.send_status()
        ok = await self.model.load(choice)
        self.send_status()
        if token is not None:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="ready" if ok else "failed"))
        if ok:
            info = self.model.engine.info
            seconds = time.monotonic() - started
            self.log(f"model {info.name} ({info.source}) on {info.device}, loaded in {seconds:.1f}s")
        elif self.model.state is ModelState.FAILED:
            self.tell(f"could not load model {choice.spec!r}: {self.model.error}")

    async def _begin_progress(self, title: str) -> str | None:
        window = self.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        token = str(uuid.uuid4())
        try:
            await self.work_done_progress.create_async(token)
        except Exception as err:  # a client may refuse progress; loading goes on without it
            logger.debug("no progress token: %s", err)
            return None
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=False))
        return token

    def status(self) -> dict:
        """What an editor's status bar shows; sent as the `dgemma/status` notification."""
        info = self.model.engine.info if self.model.ready else None
        return {
            "state": self.model.state.value,
            "model": info.name if info else (self.model.choice.spec if self.model.choice else None),
            "device": info.device if info else None,
            "lastLatencyMs": round(self.last_latency_ms, 1) if self.last_latency_ms is not None else None,
            "lastSource": self.last_source,
            "error": self.model.error,
        }

    def send_status(self) -> None:
        self.protocol.notify(STATUS_NOTIFICATION, self.status())

    # --- completion

    def enabled_for(self, language_id: str) -> bool:
        languages = self.options.completion.languages
        return not languages or language_id in languages

    async def inline_completion(self, params: types.InlineCompletionParams) -> Answer | None:
        started = time.monotonic()
        uri = params.text_document.uri
        try:
            snapshot = self.files.snapshot(uri)
            position = params.position
            cursor = snapshot.document.offset_at(position.line, position.character, self.files.encoding)
        except (UnknownDocument, InvalidPosition) as err:
            raise JsonRpcInvalidParams(str(err)) from err
        if not self.model.ready or not self.enabled_for(snapshot.document.language_id):
            return None
        is_current = self._is_current(uri, snapshot.document.version)
        try:
            answer = await self.completer.complete(
                uri, snapshot, cursor, self.options, self.model.engine, started, is_current
            )
        except asyncio.CancelledError:
            self.stats.cancelled += 1
            raise
        if answer is None:
            return None
        self.files.anchors[uri] = answer.context.anchor
        self.last_latency_ms = (time.monotonic() - started) * 1000
        self.last_source = answer.source
        multi_line = answer.context.mode != "single_line"
        self.stats.add(
            record(answer.source, multi_line, self.last_latency_ms, answer.result, answer.queued_ms)
        )
        self.send_status()
        if self.options.debug_log:
            logger.debug(
                "completion at %s (%s): %r", cursor, answer.source, [p.text for p in answer.proposals]
            )
        return answer

    # --- whole-block rewrites and next edits

    def _engine_or_none(self, uri: str):
        try:
            snapshot = self.files.snapshot(uri)
        except UnknownDocument as err:
            raise JsonRpcInvalidParams(str(err)) from err
        if not self.model.ready or not self.enabled_for(snapshot.document.language_id):
            return snapshot, None
        return snapshot, self.model.engine

    def _offset(self, snapshot, position: types.Position) -> int:
        try:
            return snapshot.document.offset_at(position.line, position.character, self.files.encoding)
        except InvalidPosition as err:
            raise JsonRpcInvalidParams(str(err)) from err

    def _is_current(self, uri: str, version: int) -> Callable[[], bool]:
        return lambda: uri in self.files.documents and self.files.documents.get(uri).version == version

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        only = params.context.only
        if only and not any(types.CodeActionKind.RefactorRewrite.value.startswith(k) for k in only):
            return None
        uri = params.text_document.uri
        snapshot, engine = self._engine_or_none(uri)
        if engine is None:
            return None
        start, end = self._offset(snapshot, params.range.start), self._offset(snapshot, params.range.end)
        target = target_at(snapshot.document.lines, snapshot.tree, min(start, end), max(start, end))
        if target is None:
            return None
        data = {"uri": uri, "version": snapshot.document.version, "start": target.start, "end": target.end}
        return [types.CodeAction(title=REWRITE_TITLE, kind=types.CodeActionKind.RefactorRewrite, data=data)]

    async def resolve_rewrite(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else getattr(action.data, "_asdict", dict)()
        try:
            uri, version, start, end = data["uri"], int(data["version"]), int(data["start"]), int(data["end"])
            if not isinstance(uri, str) or not 0 <= start <= end:
                raise ValueError("the uri must be a string and 0 <= start <= end")
        except (KeyError, TypeError, ValueError, OverflowError) as err:  # int(Infinity): OverflowError
            raise JsonRpcInvalidParams(f"not a {REWRITE_TITLE!r} action: {err}") from err
        snapshot, engine = self._engine_or_none(uri)
        if engine is None or snapshot.document.version != version or end > len(snapshot.document.text):
            return action  # no edit: the text moved on, or no model; the client shows nothing to apply
        target = Target(start=start, end=end, text=snapshot.document.text[start:end])
        rewritten = await self.rewriter.rewrite(
            uri, snapshot, target, self.options, engine, self._is_current(uri, version)
        )
        if rewritten is None:
            return action
        action.edit = convert.workspace_edit(
            uri, version, rewritten.changes, snapshot.document, self.files.encoding
        )
        return action

    async def next_edit(self, uri: str, position: types.Position) -> dict | None:
        snapshot, engine = self._engine_or_none(uri)
        if engine is None:
            return None
        document = snapshot.document
        target = next_edit_target(
            document.lines, self._offset(snapshot, position), self.options.rewrite.next_edit_lines
        )
        if target is None:
            return None
        is_current = self._is_current(uri, document.version)
        rewritten = await self.rewriter.rewrite(
            uri, snapshot, target, self.options, engine, is_current, with_recent_edits=True
        )
        if rewritten is None or not rewritten.changes:
            return None
        first = rewritten.changes[0]
        return {
            "range": convert.range_of(document, first.start, first.end, self.files.encoding),
            "newText": first.text,
            "confidence": round(rewritten.confidence, 4),
        }

    def after_change(self, uri: str, before: Document, changes: list) -> None:
        """Note the edit for next-edit suggestions; right after an accepted proposal, speculate."""
        if len(changes) != 1 or getattr(changes[0], "range", None) is None:
            return
        change = changes[0]
        start = change.range.start
        offset = before.offset_at(start.line, start.character, self.files.encoding)
        end = before.offset_at(change.range.end.line, change.range.end.character, self.files.encoding)
        self.history.record(uri, offset, before.text[offset:end], change.text)
        if change.range.start != change.range.end or not change.text or not self.model.ready:
            return
        if self.completer.accepted(uri, offset, change.text):
            snapshot = self.files.snapshot(uri)
            cursor = offset + len(change.text)
            self.completer.speculate(uri, snapshot, cursor, self.options, self.model.engine, time.monotonic())


def create_server(model_override: str | None = None) -> DgemmaServer:
    server = DgemmaServer(model_override)

    @server.feature(types.INITIALIZE)
    def initialize(ls: DgemmaServer, params: types.InitializeParams) -> None:
        ls.files = OpenFiles(ls.registry, ls.workspace.position_encoding or "utf-16")
        ls.apply_options(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: DgemmaServer, params: types.InitializedParams) -> None:
        ls.start_loading()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: DgemmaServer, params: types.DidChangeConfigurationParams) -> None:
        ls.apply_options(params.settings)
        ls.start_loading()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DgemmaServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.files.open(doc.uri, doc.language_id, doc.version, doc.text)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DgemmaServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        try:
            before = ls.files.documents.get(doc.uri)
            ls.files.change(doc.uri, doc.version, params.content_changes)
            ls.after_change(doc.uri, before, params.content_changes)
        except UnknownDocument:
            ls.log(f"didChange for a document that is not open: {doc.uri}", types.MessageType.Warning)
        except (InvalidPosition, TypeError) as err:
            # Our copy no longer matches the client's: drop it rather than complete on wrong text.
            ls.files.close(doc.uri)
            ls.log(f"bad didChange for {doc.uri} ({err}); completions stop until it is reopened",
                   types.MessageType.Warning)  # fmt: skip

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DgemmaServer, params: types.DidCloseTextDocumentParams) -> None:
        with contextlib.suppress(UnknownDocument):  # closing twice is harmless
            ls.files.close(params.text_document.uri)
        ls.completer.forget(params.text_document.uri)
        ls.history.forget(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: DgemmaServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList | None:
        answer = await ls.inline_completion(params)
        if answer is None:
            return types.InlineCompletionList(items=[])
        document = ls.files.documents.get(params.text_document.uri)
        return convert.inline_completion_list(answer.proposals, document, ls.files.encoding)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=True
        ),
    )
    def code_action(ls: DgemmaServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        return ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: DgemmaServer, action: types.CodeAction) -> types.CodeAction:
        return await ls.resolve_rewrite(action)

    @server.feature(NEXT_EDIT_REQUEST)
    async def next_edit(ls: DgemmaServer, params: object) -> dict | None:
        """params: {textDocument: {uri}, position}; result: null or {range, newText, confidence}."""
        try:
            uri, line, character = params.textDocument.uri, params.position.line, params.position.character
            # Untyped params: check what lsprotocol would (a list uri, a float line reached the store).
            if not isinstance(uri, str) or not all(type(v) is int for v in (line, character)):
                raise TypeError("the uri must be a string, line and character integers")
            position = types.Position(line=line, character=character)
        except (AttributeError, TypeError, ValueError) as err:
            raise JsonRpcInvalidParams(
                f"dgemma/nextEdit takes {{textDocument: {{uri}}, position}}: {err}"
            ) from err
        return await ls.next_edit(uri, position)

    @server.feature(STATS_REQUEST)
    def stats(ls: DgemmaServer, params: object) -> dict:
        """Counters and latency figures of this session; `{"reset": true}` starts them afresh."""
        summary = ls.stats.summary(superseded=ls.scheduler.superseded)
        if getattr(params, "reset", False) or (isinstance(params, dict) and params.get("reset")):
            ls.stats.reset()
            ls.scheduler.superseded = 0
        return summary

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DgemmaServer, params: None) -> None:
        ls.scheduler.stop()

    return server
