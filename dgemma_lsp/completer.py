"""Answers for completion requests, reusing work across keystrokes before asking the model.

In order, for each request:
1. typing through: the user typed the start of what we showed last -> show the rest at once;
2. a recent identical context (undo, backspace, re-trigger) -> the cached answer;
3. a speculative job already computing this very context (started right after an accept) -> await it;
4. otherwise a model job on the worker, superseding the document's previous one.
Each answer says where it came from, for the benchmark's counters.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from dgemma_lsp.completion import Outcome, Plan, Proposal, complete_with_repair, plan
from dgemma_lsp.context import CompletionContext
from dgemma_lsp.options import Options
from dgemma_lsp.scheduler import Scheduler, Superseded
from dgemma_lsp.workspace import Snapshot
from engine import Engine, InfillResult

Source = Literal["model", "typed_through", "cache", "speculative"]
ContextKey = tuple[str, str, str, str]
CACHE_SIZE = 64


@dataclass(frozen=True)
class Answer:
    proposals: tuple[Proposal, ...]
    source: Source
    context: CompletionContext
    result: InfillResult | None  # the model's result when it ran for this request
    queued_ms: float = 0.0  # waiting for the worker (it was finishing or cancelling another job)


@dataclass(frozen=True)
class Shown:
    """The last answer of a document: what typing through or an accept is compared with."""

    context: CompletionContext
    proposals: tuple[Proposal, ...]


def context_key(context: CompletionContext) -> ContextKey:
    return (context.language or "", context.mode, context.prefix, context.suffix)


def typed_through(shown: Shown, context: CompletionContext) -> tuple[Proposal, ...]:
    """The rest of each shown proposal that starts with what was typed since it was shown."""
    old = shown.context
    if context.suffix != old.suffix or not context.prefix.startswith(old.prefix):
        return ()
    typed = context.prefix[len(old.prefix) :]
    if not typed:
        return ()
    return tuple(
        Proposal(text=p.text[len(typed) :], cursor=context.cursor, confidence=p.confidence)
        for p in shown.proposals
        if p.text.startswith(typed) and len(p.text) > len(typed) and p.text[len(typed) :].strip()
    )


class Completer:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.shown: dict[str, Shown] = {}
        self.cache: OrderedDict[ContextKey, tuple[Proposal, ...]] = OrderedDict()
        self.speculating: dict[str, tuple[ContextKey, asyncio.Future]] = {}

    def forget(self, uri: str) -> None:
        self.shown.pop(uri, None)
        self.speculating.pop(uri, None)

    def _remember(self, uri: str, context: CompletionContext, proposals: tuple[Proposal, ...]) -> None:
        self.shown[uri] = Shown(context=context, proposals=proposals)
        key = context_key(context)
        self.cache[key] = proposals
        self.cache.move_to_end(key)
        while len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)

    def _rebase(self, proposals: tuple[Proposal, ...], cursor: int) -> tuple[Proposal, ...]:
        return tuple(replace(p, cursor=cursor) for p in proposals)

    async def complete(
        self,
        uri: str,
        snapshot: Snapshot,
        cursor: int,
        options: Options,
        engine: Engine,
        started: float,
        is_current: Callable[[], bool],
    ) -> Answer | None:
        """The answer at `cursor`, or None when it was superseded or the text moved on meanwhile."""
        planned = plan(snapshot, cursor, options, engine, started)
        context = planned.context
        shown = self.shown.get(uri)
        if shown is not None and (rest := typed_through(shown, context)):
            self.shown[uri] = Shown(context=context, proposals=rest)
            return Answer(rest, "typed_through", context, None)
        key = context_key(context)
        if key in self.cache:
            self.cache.move_to_end(key)
            proposals = self._rebase(self.cache[key], context.cursor)
            self.shown[uri] = Shown(context=context, proposals=proposals)
            return Answer(proposals, "cache", context, None)
        speculative = self.speculating.pop(uri, None)
        if speculative is not None and speculative[0] == key:
            try:
                outcome = await speculative[1]
            except Superseded:
                outcome = None
            if outcome is not None and is_current():
                proposals = self._rebase(outcome.proposals, context.cursor)
                self._remember(uri, context, proposals)
                return Answer(proposals, "speculative", context, outcome.result)
        submitted = time.monotonic()
        future = self._submit(uri, planned, engine)
        try:
            outcome = await future
        except Superseded:
            return None
        except asyncio.CancelledError:
            self.scheduler.cancel(future)
            raise
        if not is_current():
            return None  # the text moved on while the model worked: this answer is stale
        self._remember(uri, context, outcome.proposals)
        queued_ms = (outcome.began - submitted) * 1000
        return Answer(outcome.proposals, "model", context, outcome.result, queued_ms)

    def _submit(self, uri: str, planned: Plan, engine: Engine) -> asyncio.Future:
        def work(cancel: threading.Event) -> Outcome:
            began = time.monotonic()
            outcome = complete_with_repair(planned, engine, replace(planned.request, cancel=cancel))
            return replace(outcome, began=began)

        return self.scheduler.submit(uri, work)

    def accepted(self, uri: str, offset: int, text: str) -> bool:
        """Was inserting `text` at `offset` the acceptance of a proposal we showed there?"""
        shown = self.shown.get(uri)
        return shown is not None and any(p.cursor == offset and p.text == text for p in shown.proposals)

    def speculate(
        self, uri: str, snapshot: Snapshot, cursor: int, options: Options, engine: Engine, started: float
    ):
        """Start computing the completion the user will ask for next (right after an accept)."""
        planned = plan(snapshot, cursor, options, engine, started)
        key = context_key(planned.context)
        if key in self.cache:
            return
        future = self._submit(uri, planned, engine)

        def store(done: asyncio.Future) -> None:
            if not done.cancelled() and done.exception() is None:
                self.cache[key] = done.result().proposals
                self.cache.move_to_end(key)

        future.add_done_callback(store)
        self.speculating[uri] = (key, future)
