"""The language server object: the session's state, and what handlers share (messages, status, loading).

Handlers live in handlers.py, one function per LSP method; the model runs on the scheduler's
worker thread, so nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Coroutine
from dataclasses import replace

from lsprotocol import types
from pygls.exceptions import JsonRpcParseError
from pygls.lsp.server import LanguageServer

from dgemma_lsp import __version__
from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import index_to_column
from dgemma_lsp.documents.workspace import Workspace
from dgemma_lsp.inline.decision import Considered
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.resolving import FIRST_AFTER_S, Outbox, Resolving, Span, low_confidence
from dgemma_lsp.inline.service import InlineService
from dgemma_lsp.lsp import client_log, messages
from dgemma_lsp.lsp.guard import DgemmaProtocol
from dgemma_lsp.repository.indexer import Progress
from dgemma_lsp.repository.service import Repository
from dgemma_lsp.rewrite.service import RewriteService
from dgemma_lsp.runtime.model_host import ModelChoice, ModelHost, ModelState
from dgemma_lsp.runtime.options import Options, parse_options
from dgemma_lsp.runtime.scheduler import Scheduler
from dgemma_lsp.runtime.stats import MODEL_SOURCES, Stats
from engine import Engine, EngineError
from engine.api import AllocationWindow
from engine.loading import is_url

logger = logging.getLogger(__name__)

# A remote server that could not be reached is tried again when a completion is asked for, at most
# this often: the editor recovers when the server comes back, with no restart.
REMOTE_RETRY_S = 10.0
# A grammar whose code a model learned under another language's name: TypeScript with JSX is TypeScript.
TRAINED_AS = {"tsx": "typescript"}

# pygls' warning when a $/cancelRequest names a request it has answered already.
ANSWERED_CANCEL = 'Cancel notification for unknown message id "%s"'


class AnsweredCancels(logging.Filter):
    """pygls warns of a cancel for a request it has answered: an editor cancels what it no longer needs,
    and the answer often crosses the cancel on the way. Normal, so a debug line, not a warning on stderr
    (which editors file as an error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == ANSWERED_CANCEL and record.levelno == logging.WARNING:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


class DgemmaServer(LanguageServer):
    def __init__(self, model_override: str | None = None, window: AllocationWindow | None = None) -> None:
        super().__init__("dgemma-lsp", __version__, protocol_cls=DgemmaProtocol)
        self.model_override = model_override  # --model on the command line wins over client options
        self.options = self._with_override(Options())
        self.registry = LanguageRegistry()
        self.repository = Repository(self.registry)  # the workspace folders' files beyond the open ones
        self.documents = Workspace(
            self.registry, "utf-16", self.repository.retrieval
        )  # re-made at initialize
        self.tcp_token: str | None = None  # over TCP: the secret a client presents to have its folders read
        self.scheduler = Scheduler()
        self.model = ModelHost(self.scheduler, window=window)
        self.inline = InlineService(self.scheduler)
        self.rewrites = RewriteService(self.scheduler)
        self.stats = Stats()
        self.last_latency_ms: float | None = None  # of the last answer the model computed
        self.last_source: str | None = None  # where the last answer came from: model, cache, ...
        self.indexing: Progress | None = None  # the workspace walk under way, for the status
        self._load_task: asyncio.Task | None = None
        self._index_events: asyncio.Queue[Progress] | None = None  # the indexer's progress, on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False  # a file watcher was asked of the client
        self._failed_at = 0.0  # monotonic time the last load failed
        self._background: set[asyncio.Task] = set()  # held until done (the loop keeps only weak references)
        self.client_log: client_log.ClientLog | None = None  # set up at initialize
        rpc_log = logging.getLogger("pygls.protocol.json_rpc")
        if not any(isinstance(f, AnsweredCancels) for f in rpc_log.filters):
            rpc_log.addFilter(AnsweredCancels())
        self._resolving: dict[str, Resolving] = {}  # uri -> the canvas observer of its running completion

    def _with_override(self, options: Options) -> Options:
        return replace(options, model=self.model_override) if self.model_override else options

    @property
    def trusted(self) -> bool:
        """Whether this client may have its folders read and name a model server and key: over stdio
        always; over TCP once it presented the token (`initialize`)."""
        return self.repository.trusted

    def _within_trust(self, options: Options) -> Options:
        """An untrusted client's model URL and API key are refused (a local model is its to choose):
        its URL would have the server call any host it names, with the server's key."""
        if self.trusted:
            return options
        refused = []
        if is_url(options.model) and options.model != self.options.model:
            refused.append("a model server")
            options = replace(options, model=self.options.model)
        if options.remote.api_key != self.options.remote.api_key:
            refused.append("an API key")
            options = replace(options, remote=replace(options.remote, api_key=self.options.remote.api_key))
        if refused:
            self.log(
                f"refused {' and '.join(refused)} from a client without the tcpToken: only the server's "
                "command line, its environment or a client with the token say where completions are sent",
                types.MessageType.Warning,
            )
        return options

    # --- messages a user must see, and the log

    def tell(self, message: str, level: types.MessageType = types.MessageType.Error) -> None:
        """Show and log a message the user must act on."""
        self.window_show_message(types.ShowMessageParams(type=level, message=f"dgemma-lsp: {message}"))
        self.log(message, level)

    def log(self, message: str, level: types.MessageType = types.MessageType.Info) -> None:
        """A line for the log: the client's (`window/logMessage`, at the level its trace asks for), and
        stderr for warnings and errors."""
        logger.log(client_log.python_level(level), "%s", message)

    def follow_trace(self, trace: types.TraceValue | str | None) -> None:
        """Send the client the log lines its trace setting asks for (`initialize`, `$/setTrace`)."""
        level = client_log.level_for_trace(trace)
        if self.client_log is None:
            self.client_log = client_log.ClientLog(self._send_log, asyncio.get_running_loop(), level)
            self.client_log.attach()
        else:
            self.client_log.follow(level)

    def _send_log(self, kind: types.MessageType, text: str) -> None:
        if self.protocol.writer is not None:
            self.window_log_message(types.LogMessageParams(type=kind, message=text))

    def report_server_error(self, error: Exception, source: object) -> None:
        # pygls would show every out-of-band error (a malformed notification, say) as a popup; the log
        # is the place for them. Errors answering a request already go back in the response.
        if isinstance(error, json.JSONDecodeError):
            # JSON-RPC answers a message that is not JSON with Parse error and a null id (pygls does not).
            with contextlib.suppress(Exception):
                self.protocol.send_error(None, JsonRpcParseError(f"the message is not valid JSON: {error}"))
        logger.error("%s: %s", getattr(source, "__name__", source), error)

    def apply_options(self, raw: object) -> None:
        options, problems = parse_options(raw, self.options)
        self.options = self._with_override(self._within_trust(options))
        # pygls logs whole messages (InitializeParams, every message it sends): completions and
        # rewrites are code, kept out of the log unless debugLog is on (then -v shows them on stderr).
        logging.getLogger("pygls").setLevel(logging.NOTSET if self.options.debug_log else logging.WARNING)
        # httpx logs every call to a remote engine at INFO: a line per keystroke, kept for debugLog.
        logging.getLogger("httpx").setLevel(logging.NOTSET if self.options.debug_log else logging.WARNING)
        for problem in problems:
            self.tell(problem, types.MessageType.Warning)

    def in_background(self, work: Coroutine[object, object, None]) -> None:
        """Run `work` on the event loop without waiting for it; its failure is logged, not raised."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        error = None if task.cancelled() else task.exception()
        if isinstance(error, Exception):
            self.report_server_error(error, task.get_coro())  # named by its coroutine's function

    # --- the repository

    def configure_repository(self) -> None:
        """Start, stop or rebuild the workspace index for the options in force; open documents' buffers
        supersede their files in a new index."""
        was = self.repository.index
        self.repository.configure(self.options, self._index_progressed)
        if self.repository.index is not None and self.repository.index is not was:
            for opened in self.documents:
                self.repository.opened(opened.document.uri, opened.document.text)
            if not self._watching:
                self._watching = True
                self.in_background(self.watch_files())

    def _index_progressed(self, progress: Progress) -> None:
        """From the indexer thread: hand the news to the event loop."""
        if self._index_events is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._index_events.put_nowait, progress)

    def start_index_reports(self) -> None:
        """`$/progress` for each folder the indexer walks (begin, reports, end), one walk after another."""
        self._loop = asyncio.get_running_loop()
        self._index_events = asyncio.Queue()
        self.in_background(self._report_indexing(self._index_events))

    async def _report_indexing(self, events: asyncio.Queue[Progress]) -> None:
        while True:
            progress = await events.get()
            started = time.monotonic()
            self._indexed(progress)
            token = await self._begin_progress(f"Indexing {progress.folder}")
            while not progress.done:
                progress = await events.get()
                self._indexed(progress)
                if token is not None and not progress.done:
                    report = types.WorkDoneProgressReport(message=f"{progress.files} files")
                    self.work_done_progress.report(token, report)
            summary = f"{progress.files} files" + (" (capped)" if progress.capped else "")
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=summary))
            self.log(f"indexed {progress.folder}: {summary} in {time.monotonic() - started:.1f}s")

    def _indexed(self, progress: Progress) -> None:
        """The status carries the walk's progress (most editors show no `$/progress`), until it is done."""
        self.indexing = None if progress.done else progress
        self.send_status()

    async def watch_files(self) -> None:
        """Ask the client to report changes to files of the completed languages, when it can."""
        workspace = self.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if watched is None or not watched.dynamic_registration:
            return
        suffixes = ",".join(
            sorted(ext[1:] for ext in self.registry.extensions(self.options.completion.languages))
        )
        watcher = types.FileSystemWatcher(glob_pattern=f"**/*.{{{suffixes}}}")
        registration = types.Registration(
            id=str(uuid.uuid4()),
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[watcher]),
        )
        try:
            await self.client_register_capability_async(
                types.RegistrationParams(registrations=[registration])
            )
        except Exception as err:  # a client may refuse; saves and opens still keep the index current
            logger.info("no file watcher: %s", err)

    # --- the model

    def engine_for(self, language_id: str) -> Engine | None:
        """The engine, when it is ready and completion is on for this language (a remote server that
        could not be reached is tried again meanwhile, so the editor recovers when it comes back)."""
        if self._remote_retry_due():
            self.start_loading(retry=True)
        if not self.model.ready or not self.completes(language_id):
            return None
        return self.model.engine

    def completes(self, language_id: str) -> bool:
        """Whether completion is on for `language_id`: the languages the user listed, else those the
        loaded model was trained on (any, for a checkpoint made elsewhere)."""
        spec = self.registry.spec(language_id)
        name = spec.name if spec is not None else language_id
        listed = self.options.completion.languages
        if listed:
            return language_id in listed or name in listed
        trained = self.model.engine.info.languages if self.model.ready else None
        return trained is None or TRAINED_AS.get(name, name) in trained

    def start_loading(self, retry: bool = False) -> None:
        """Load the configured model in the background, with $/progress when the client shows it
        (`retry`: the same remote server again, quietly)."""
        # The server's own key goes to the URL its command line names, or to one a trusted client names.
        server_key = self.trusted or self.options.model == self.model_override
        choice = ModelChoice.of(self.options, server_key)
        if self.model.choice == choice and self.model.state in (ModelState.READY, ModelState.LOADING):
            return
        self._load_task = asyncio.ensure_future(self._load(choice, retry))

    def _remote_retry_due(self) -> bool:
        model = self.model
        return (
            model.state is ModelState.FAILED
            and model.choice is not None
            and model.choice.is_remote
            and time.monotonic() - self._failed_at >= REMOTE_RETRY_S
        )

    async def _load(self, choice: ModelChoice, retry: bool = False) -> None:
        token = None if retry else await self._begin_progress(f"Loading model {choice.spec}")
        started = time.monotonic()
        self.send_status()
        ok = await self.model.load(choice)
        self.send_status()
        self.configure_repository()  # now: indexing beside the load would slow it and the first completion
        if token is not None:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="ready" if ok else "failed"))
        if ok:
            info = self.model.engine.info
            seconds = time.monotonic() - started
            self.log(f"model {info.name} ({info.source}) on {info.device}, loaded in {seconds:.1f}s")
        elif self.model.state is ModelState.FAILED:
            self._failed_at = time.monotonic()
            if retry:  # said once already; the log keeps the tries
                warning = types.MessageType.Warning
                self.log(f"model {choice.spec!r} still unavailable: {self.model.error}", warning)
            else:
                self.tell(f"could not load model {choice.spec!r}: {self.model.error}")

    def engine_failed(self, error: EngineError) -> None:
        """An engine call failed (a remote server down, slow, or answering nonsense): the status carries
        the error, the user is told once per outage, and the server goes on serving."""
        first = self.model.error is None
        self.model.error = str(error)
        self.last_latency_ms = self.last_source = None  # from before the outage: not the model's now
        if first:
            self.tell(str(error), types.MessageType.Warning)
        else:
            logger.debug("%s", error)  # the status carries it; the log said it once
        self.send_status()

    def engine_answered(self) -> None:
        """An engine call succeeded: an error an earlier call left in the status is over."""
        if self.model.ready and self.model.error is not None:
            self.model.error = None
            self.log("the model answers again")
            self.send_status()

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

    def status(self) -> messages.Status:
        """What an editor's status bar shows."""
        info = self.model.engine.info if self.model.ready else None
        return messages.Status(
            state=self.model.state.value,
            model=info.name if info else (self.model.choice.spec if self.model.choice else None),
            device=info.device if info else None,
            lastLatencyMs=round(self.last_latency_ms, 1) if self.last_latency_ms is not None else None,
            lastSource=self.last_source,
            error=self.model.error,
            indexing=messages.Indexing(files=self.indexing.files) if self.indexing else None,
        )

    def send_suggestion_facts(
        self, uri: str, version: int, position: types.Position, considered: tuple[Considered, ...]
    ) -> None:
        """`dgemma/suggestion`, to a client that declared it (a typing benchmark): what the show-or-not
        decision read of each suggestion it considered, its probability and whether it was shown."""
        if not messages.client_handles(self.client_capabilities.experimental, messages.SUGGESTION):
            return
        self.protocol.notify(
            messages.SUGGESTION,
            messages.SuggestionFacts(
                uri=uri,
                version=version,
                line=position.line,
                character=position.character,
                items=[
                    {"facts": c.facts.to_json(), "probability": c.probability, "shown": c.shown}
                    for c in considered
                ],
            ).to_json(),
        )

    def answered(self, source: str, latency_ms: float) -> None:
        """The status's last answer: where it came from, and its time when the model computed it (a reused
        answer's millisecond says nothing about the model)."""
        self.last_source = source
        if source in MODEL_SOURCES:
            self.last_latency_ms = latency_ms

    # --- the suggestion as it settles, and its unsure parts (dgemma/resolving, dgemma/confidence)

    def resolving_for(
        self, uri: str, version: int, position: types.Position, started: float
    ) -> Resolving | None:
        """The canvas observer for the inline completion being handled, when the client declared
        `dgemma/resolving` (None otherwise: no partials and no work); the document's previous one stops."""
        if not messages.client_handles(self.client_capabilities.experimental, messages.RESOLVING):
            return None
        self.stop_resolving(uri)
        handler = asyncio.current_task()
        where = _where(uri, version, position, self.protocol.msg_id)

        def deliver(params: messages.ResolvingParams) -> None:  # on the event loop
            if resolving.stopped or (handler is not None and handler.cancelling()):
                return  # stopped meanwhile, or $/cancelRequest came before the handler saw it: dropped
            if self.protocol.writer is not None:
                self.protocol.notify(messages.RESOLVING, params.to_json())

        loop = asyncio.get_running_loop()
        first_at = loop.time() + max(0.0, started + FIRST_AFTER_S - time.monotonic())  # the request's 100 ms
        outbox = Outbox(loop, deliver, first_at)

        def send(spans: tuple[Span, ...]) -> None:  # on the model worker: only queue it for the loop
            params = messages.ResolvingParams(
                **where, spans=[{"text": s.text, "settled": s.settled} for s in spans]
            )
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                outbox.put(params)

        resolving = Resolving(started, send)
        self._resolving[uri] = resolving
        return resolving

    def stop_resolving(self, uri: str, resolving: Resolving | None = None) -> None:
        """No more partials for `uri` (its text changed, a newer request came); with `resolving`, for that
        request only (it was answered)."""
        current = self._resolving.get(uri)
        if current is not None and (resolving is None or current is resolving):
            del self._resolving[uri]
            current.stop()
        if resolving is not None:
            resolving.stop()

    def send_confidence(
        self, uri: str, version: int, position: types.Position, proposals: tuple[Proposal, ...]
    ) -> None:
        """`dgemma/confidence` before an inline completion's response, to a client that declared it (and
        with `completion.showConfidence` on): where each item's text is unsure, in the client's units."""
        if not self.options.completion.show_confidence or not messages.client_handles(
            self.client_capabilities.experimental, messages.CONFIDENCE
        ):
            return
        encoding = self.documents.encoding
        items = []
        for proposal in proposals:
            low = low_confidence(proposal)
            if low:
                text = proposal.text
                units = [
                    [index_to_column(text, a, encoding), index_to_column(text, b, encoding)] for a, b in low
                ]
                items.append({"insertText": text, "low": units})
        if items:
            where = _where(uri, version, position, self.protocol.msg_id)
            self.protocol.notify(
                messages.CONFIDENCE, messages.ConfidenceParams(**where, items=items).to_json()
            )

    def send_status(self) -> None:
        """`dgemma/status`, to a client that declared it handles it (the others get only standard LSP)."""
        if messages.client_handles(self.client_capabilities.experimental, messages.STATUS):
            self.protocol.notify(messages.STATUS, self.status().to_json())


def _where(uri: str, version: int, position: types.Position, request_id: object) -> dict:
    """The fields that say which document, position and request a notification is about."""
    return {
        "textDocument": {"uri": uri},
        "version": version,
        "position": {"line": position.line, "character": position.character},
        "requestId": request_id,
    }


def create_server(model_override: str | None = None, window: AllocationWindow | None = None) -> DgemmaServer:
    """The server, its handlers registered; `window`: the heap policy for the engine's long prefills."""
    from dgemma_lsp.lsp.handlers import register

    server = DgemmaServer(model_override, window)
    register(server)
    return server
