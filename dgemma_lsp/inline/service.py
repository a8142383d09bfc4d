"""Inline completions in the server: reuse across keystrokes first, then the pipeline on the worker.

In order, for each request:
1. typing through: the user typed the start of what we showed last -> show the rest at once;
2. a recent identical context (undo, backspace, re-trigger) -> the answer given then;
3. a speculative job already computing this very context (started right after an accept) -> await it;
4. otherwise the pipeline's `execute` on the model worker, superseding the document's previous job.
Each answer says where it came from, for the stats and the status bar: for the model, the row that
won (fresh noise, or a draft: lookup, structure).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dgemma_lsp.documents.workspace import OpenDocument, Snapshot
from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.pipeline import Completion, execute
from dgemma_lsp.inline.planning import Plan, prepare
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.reuse import Source, context_key, read_by
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.scheduler import Scheduler, Superseded
from engine import Engine, InfillResult


@dataclass(frozen=True)
class Answer:
    proposals: tuple[Proposal, ...]
    source: Source
    context: CompletionContext
    result: InfillResult | None  # the model's result when it ran for this request
    queued_ms: float = 0.0  # waiting for the worker (it was finishing or cancelling another job)
    drafts: int = 0  # rows of drafts from the code the engine ran for it (not its own next-token draft)


class InlineService:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def complete(
        self,
        opened: OpenDocument,
        snapshot: Snapshot,
        cursor: int,
        options: Options,
        engine: Engine,
        started: float,
        is_current: Callable[[], bool],
    ) -> Answer | None:
        """The answer at `cursor`, or None when it was superseded or the text moved on meanwhile."""
        plan = prepare(snapshot, cursor, options, engine, started)
        context, memory, read = plan.context, opened.inline, read_by(plan.request)
        opened.anchor = context.anchor
        recalled = memory.recall(context, read)
        if recalled is not None:
            return Answer(recalled[0], recalled[1], context, None)
        speculative = memory.take_speculation(context_key(context, read))
        if speculative is not None:
            try:
                completion = await speculative
            except Superseded:
                completion = None
            if completion is not None and is_current():
                proposals = tuple(
                    Proposal(p.text, context.cursor, p.confidence) for p in completion.proposals
                )
                memory.remember(context, proposals, read, completion.whole)
                return Answer(proposals, "speculative", context, completion.result)
        submitted = time.monotonic()
        future = self._submit(opened.document.uri, plan, engine)
        try:
            completion = await future
        except Superseded:
            return None
        except asyncio.CancelledError:
            self.scheduler.cancel(future)
            raise
        if not is_current():
            return None  # the text moved on while the model worked: this answer is stale
        memory.remember(context, completion.proposals, read, completion.whole)
        queued_ms = (completion.began - submitted) * 1000
        source = completion.proposals[0].origin if completion.proposals else "model"
        drafts = len(plan.request.drafts)
        return Answer(completion.proposals, source, context, completion.result, queued_ms, drafts)

    def _submit(self, uri: str, plan: Plan, engine: Engine) -> asyncio.Future:
        def work(cancel: threading.Event) -> Completion:
            return execute(plan, engine, cancel)

        return self.scheduler.submit(uri, work)

    def speculate(
        self, opened: OpenDocument, snapshot: Snapshot, cursor: int, options: Options, engine: Engine
    ) -> None:
        """Start computing the completion the user will ask for next (right after an accept)."""
        plan = prepare(snapshot, cursor, options, engine, time.monotonic())
        key = context_key(plan.context, read_by(plan.request))
        memory = opened.inline
        if key in memory.recent:
            return
        future = self._submit(opened.document.uri, plan, engine)

        def store(done: asyncio.Future) -> None:
            if not done.cancelled() and done.exception() is None and done.result().whole:
                memory.store(key, done.result().proposals)

        future.add_done_callback(store)
        memory.speculation = (key, future)
