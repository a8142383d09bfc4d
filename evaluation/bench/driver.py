"""Replays typing scripts against a real server over stdio, as an editor would.

Each key is a didChange followed by an inlineCompletion request; a request still unanswered when
the next key comes is cancelled with $/cancelRequest (VS Code does the same). Latency is measured
here, from sending the request to receiving its response; the server's own figures (overhead,
steps, reuse) come from its `dgemma/stats` request.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import LineIndex
from dgemma_lsp.inline.context import build_context
from evaluation.bench.scripts import Pace, Script

STATS = "dgemma/stats"


@dataclass
class Sample:
    multi_line: bool
    sent: float
    latency_ms: float | None = None  # None: cancelled, or an error
    items: int = 0


@dataclass
class SessionLog:
    samples: list[Sample] = field(default_factory=list)
    accepted: int = 0


def _position(lines: LineIndex, offset: int) -> types.Position:
    line, character = lines.position_at(offset, "utf-16")
    return types.Position(line=line, character=character)


class BenchClient:
    def __init__(self) -> None:
        self.client = LanguageClient("dgemma-bench", "1")
        self.status: list = []
        self.log_lines: list[str] = []
        self.registry = LanguageRegistry()

        @self.client.feature("dgemma/status")
        def on_status(params) -> None:
            self.status.append(params)

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params: types.LogMessageParams) -> None:
            self.log_lines.append(params.message)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params: types.ShowMessageParams) -> None:
            self.log_lines.append(params.message)

    def experimental(self) -> dict:
        """The client's experimental capabilities: dgemma/status, as the editors declare it."""
        return {"dgemma": {"status": True}}

    async def start(self, model: str, options: dict, folders: list[Path] = ()) -> float:
        """Start the server (with `folders` as its workspace); returns the time from process start to
        initialize's answer."""
        started = time.monotonic()
        await self.client.start_io(sys.executable, "-m", "dgemma_lsp", "--stdio", "--model", model)
        await self.client.initialize_async(
            types.InitializeParams(
                process_id=None,
                capabilities=types.ClientCapabilities(
                    experimental=self.experimental(),
                    general=types.GeneralClientCapabilities(position_encodings=["utf-16"]),
                    text_document=types.TextDocumentClientCapabilities(
                        inline_completion=types.InlineCompletionClientCapabilities()
                    ),
                ),
                initialization_options=options,
                workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]
                or None,
            )
        )
        self.client.initialized(types.InitializedParams())
        return time.monotonic() - started

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    def open(self, uri: str, language_id: str, text: str) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
            )
        )

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def insert(self, uri: str, version: int, lines: LineIndex, offset: int, text: str) -> LineIndex:
        at = _position(lines, offset)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)
                ],
            )
        )
        return lines.replace(offset, offset, text)

    def request(self, uri: str, lines: LineIndex, offset: int) -> tuple[str, asyncio.Future]:
        msg_id = str(uuid.uuid4())
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=_position(lines, offset),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        future = self.client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
        )
        return msg_id, asyncio.ensure_future(future)

    def cancel(self, msg_id: str) -> None:
        self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    async def stats(self, reset: bool) -> dict:
        reply = await self.client.protocol.send_request_async(STATS, {"reset": reset})
        return plain(reply)

    def is_multi_line(self, lines: LineIndex, offset: int, language_id: str) -> bool:
        """The server's own mode rule, applied here to label each request."""
        context = build_context(
            lines, offset, count_tokens=lambda s: len(s) // 4 + 1, spec=self.registry.spec(language_id)
        )
        return context.mode != "single_line"

    async def first_completion(self, uri: str, lines: LineIndex, offset: int, timeout: float = 120) -> None:
        """Ask until the model has answered one (the server counts it): it has loaded and completes.
        The answer may be empty: the confidence gates can hide what the model wrote at this cursor."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, future = self.request(uri, lines, offset)
            await future
            if (await self.stats(reset=False))["answered"]:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no completion within {timeout}s; server said: {self.log_lines[-3:]}")

    async def run(
        self, script: Script, pace: Pace, rng: random.Random, keys_per_segment: int | None
    ) -> SessionLog:
        log = SessionLog()
        uri = f"file:///bench/{script.name}"
        lines = LineIndex(script.initial)
        version = 1
        self.open(uri, script.language_id, script.initial)
        shift = 0  # text accepted from completions moves later segments
        pending: tuple[str, asyncio.Future, Sample] | None = None
        for segment in script.segments:
            offset = segment.offset + shift
            text = segment.text if keys_per_segment is None else segment.text[:keys_per_segment]
            for char in text:
                if pending is not None and not pending[1].done():
                    self.cancel(pending[0])
                version += 1
                lines = self.insert(uri, version, lines, offset, char)
                offset += 1
                sample = Sample(
                    multi_line=self.is_multi_line(lines, offset, script.language_id), sent=time.monotonic()
                )
                msg_id, future = self.request(uri, lines, offset)
                future.add_done_callback(lambda f, s=sample: _finish(s, f))
                log.samples.append(sample)
                pending = (msg_id, future, sample)
                await asyncio.sleep(pace.key_gap(rng))
            # The user stops, reads the ghost text, and sometimes takes it.
            await asyncio.sleep(pace.read_pause(rng))
            if pending is not None:
                result = await pending[1] if not pending[1].done() else pending[1].result()
                pending = None
                if result is not None and result.items and rng.random() < pace.accept_probability:
                    accepted = result.items[0].insert_text
                    version += 1
                    lines = self.insert(uri, version, lines, offset, accepted)
                    shift += len(accepted)
                    log.accepted += 1
                    await asyncio.sleep(pace.key_gap(rng))
            shift -= len(segment.text) - len(text)  # keys a quick run did not type
        if pending is not None:
            await asyncio.gather(pending[1], return_exceptions=True)
        self.close(uri)
        return log


def _finish(sample: Sample, future: asyncio.Future) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    sample.latency_ms = (time.monotonic() - sample.sent) * 1000
    result = future.result()
    sample.items = len(result.items) if result is not None else 0


def plain(value):
    """pygls hands back custom results as namedtuple-like objects; make them dicts again."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
