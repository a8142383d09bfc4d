"""Inline completions in the server: reuse across keystrokes first, then the pipeline on the worker.

In order, for each request:
1. typing through: the user typed the start of what we showed last -> show the rest at once;
2. a recent identical context (undo, backspace, re-trigger) -> the answer given then;
3. a speculative job already computing this very context (started right after an accept) -> await it;
4. otherwise the pipeline's `execute` on the model worker, superseding the document's previous job.
Each answer says where it came from, for the stats and the status bar: for the model, the row that
won (fresh noise, or a draft: lookup, structure). Reused answers pass the show-or-not decision again
(typing through a suggestion makes it likelier to be taken; the user's latest choices count), with
what the user did with the suggestions shown so far (`habits.py`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from dgemma_lsp.documents.workspace import OpenDocument, Snapshot
from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.decision import Considered, Decision, decide
from dgemma_lsp.inline.habits import Habits
from dgemma_lsp.inline.pipeline import Completion, execute
from dgemma_lsp.inline.planning import Plan, prepare
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.resolving import Resolving
from dgemma_lsp.inline.reuse import Source, context_key, read_by
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.scheduler import Scheduler, Superseded
from engine import Engine, EngineInfo, InfillResult


@dataclass(frozen=True)
class Answer:
    proposals: tuple[Proposal, ...]
    source: Source
    context: CompletionContext
    result: InfillResult | None  # the model's result when it ran for this request
    queued_ms: float = 0.0  # waiting for the worker (it was finishing or cancelling another job)
    drafts: int = 0  # rows of drafts from the code the engine ran for it (not its own next-token draft)
    considered: tuple[Considered, ...] = ()  # what the show-or-not decision looked at, shown or not


class InlineService:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.habits = Habits()  # what this session's user did with what was shown
        self._decision: tuple[EngineInfo, Decision | None] | None = None

    def decision_for(self, engine: Engine) -> Decision | None:
        """The engine's show-or-not decision, read once per loaded model."""
        if self._decision is None or self._decision[0] is not engine.info:
            self._decision = (engine.info, Decision.from_json(engine.info.decision))
        return self._decision[1]

    def edited(self, opened: OpenDocument, offset: int, removed: int, inserted: str) -> None:
        """A change to `opened`: what it says of the suggestion on screen counts in the session's habits."""
        outcome = opened.inline.observe_edit(offset, removed, inserted)
        if outcome is not None:
            self.habits.record(outcome)

    async def complete(
        self,
        opened: OpenDocument,
        snapshot: Snapshot,
        cursor: int,
        options: Options,
        engine: Engine,
        started: float,
        is_current: Callable[[], bool],
        explicit: bool = False,
        resolving: Resolving | None = None,
    ) -> Answer | None:
        """The answer at `cursor`, or None when it was superseded or the text moved on meanwhile;
        `explicit`: the user asked for it (an editor's trigger key), so every suggestion is shown;
        `resolving`: shown the engine's canvas as it settles (dgemma/resolving), when the engine runs."""
        memory = opened.inline
        if (outcome := memory.observe_request(cursor)) is not None:
            self.habits.record(outcome)
        history = self.habits.history(memory.previous)
        decision = self.decision_for(engine)
        eagerness = "eager" if explicit else options.completion.eagerness
        plan = prepare(snapshot, cursor, options, engine, started, history, decision, eagerness)
        context, read = plan.context, read_by(plan.request)
        opened.anchor = context.anchor
        recalled = memory.recall(context, read)
        if recalled is not None:
            shown, considered = decide(recalled[0], context, history, decision, eagerness, recalled[1])
            memory.watch_shown(shown)
            return Answer(shown, recalled[1], context, None, considered=considered)
        speculative = memory.take_speculation(context_key(context, read))
        if speculative is not None:
            try:
                completion = await speculative
            except Superseded:
                completion = None
            if completion is not None and is_current():
                moved = tuple(
                    replace(c, proposal=replace(c.proposal, cursor=context.cursor))
                    for c in completion.considered
                )
                memory.remember(context, tuple(c.proposal for c in moved), read, completion.whole)
                shown = tuple(c.proposal for c in moved if c.shown)
                memory.watch_shown(shown)
                return Answer(shown, "speculative", context, completion.result, considered=moved)
        if resolving is not None:  # dgemma/resolving (resolving.py): the engine shows it its canvas
            plan = resolving.watching(plan)
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
        memory.remember(context, tuple(c.proposal for c in completion.considered), read, completion.whole)
        memory.watch_shown(completion.proposals)
        queued_ms = (completion.began - submitted) * 1000
        source = completion.proposals[0].origin if completion.proposals else "model"
        drafts = len(plan.request.drafts)
        return Answer(
            completion.proposals, source, context, completion.result, queued_ms, drafts, completion.considered
        )

    def _submit(self, uri: str, plan: Plan, engine: Engine) -> asyncio.Future:
        def work(cancel: threading.Event) -> Completion:
            return execute(plan, engine, cancel)

        return self.scheduler.submit(uri, work)

    def speculate(
        self, opened: OpenDocument, snapshot: Snapshot, cursor: int, options: Options, engine: Engine
    ) -> None:
        """Start computing the completion the user will ask for next (right after an accept)."""
        history = self.habits.history(opened.inline.previous)
        plan = prepare(
            snapshot, cursor, options, engine, time.monotonic(), history, self.decision_for(engine)
        )
        key = context_key(plan.context, read_by(plan.request))
        memory = opened.inline
        if key in memory.recent:
            return
        future = self._submit(opened.document.uri, plan, engine)

        def store(done: asyncio.Future) -> None:
            if not done.cancelled() and done.exception() is None and done.result().whole:
                memory.store(key, tuple(c.proposal for c in done.result().considered))

        future.add_done_callback(store)
        memory.speculation = (key, future)
