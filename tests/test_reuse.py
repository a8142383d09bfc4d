"""Answers reused across keystrokes: typing through a shown completion, recent contexts, speculation."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.pipeline import execute
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.reuse import RECENT_CONTEXTS, InlineMemory, context_key
from dgemma_lsp.inline.service import InlineService
from dgemma_lsp.runtime.options import CompletionOptions, Options
from dgemma_lsp.runtime.scheduler import Scheduler


def count(text: str) -> int:
    return len(text.split()) + 1


def context_at(text: str, cursor: int):
    return build_context(text, cursor, count_tokens=count, language_id="python")


TEXT = "total = 0\nfor x in xs:\n    total = \nprint(total)\n"
CURSOR = TEXT.index("total = \n") + len("total = ")


def test_typing_the_start_of_the_shown_proposal_shows_its_rest():
    memory = InlineMemory()
    shown = context_at(TEXT, CURSOR)
    memory.remember(shown, (Proposal("total + x", CURSOR, 0.9), Proposal("x * 2", CURSOR, 0.5)))
    typed = TEXT[:CURSOR] + "to" + TEXT[CURSOR:]
    rest, source = memory.recall(context_at(typed, CURSOR + 2))
    assert source == "typed_through"
    assert rest == (Proposal("tal + x", CURSOR + 2, 0.9),)  # the other proposal does not start with "to"
    # Typing all of it leaves nothing to show; typing something else is not a typing-through.
    done = TEXT[:CURSOR] + "total + x" + TEXT[CURSOR:]
    assert memory.recall(context_at(done, CURSOR + 9)) is None
    other = TEXT[:CURSOR] + "y" + TEXT[CURSOR:]
    assert memory.recall(context_at(other, CURSOR + 1)) is None


def test_a_context_seen_moments_ago_gets_its_answer_again_at_the_new_cursor():
    memory = InlineMemory()
    memory.remember(context_at(TEXT, CURSOR), (Proposal("total + x", CURSOR, 0.9),))
    memory.remember(context_at(TEXT, 0), (Proposal("grand_", 0, 0.4),))  # the user moved away...
    proposals, source = memory.recall(context_at(TEXT, CURSOR))  # ... and came back (undo, re-trigger)
    assert source == "cache" and proposals == (Proposal("total + x", CURSOR, 0.9),)
    assert memory.shown.proposals == proposals  # what typing through is compared with from now on


def test_recent_contexts_are_bounded_oldest_first():
    memory = InlineMemory()
    contexts = [context_at(f"x{i} = \n", 5 if i < 10 else 6) for i in range(RECENT_CONTEXTS + 1)]
    for i, context in enumerate(contexts):
        memory.remember(context, (Proposal(str(i), context.cursor, 1.0),))
    assert len(memory.recent) == RECENT_CONTEXTS
    assert context_key(contexts[0]) not in memory.recent and context_key(contexts[-1]) in memory.recent


def test_accept_detection_and_a_speculation_handed_out_once():
    memory = InlineMemory()
    context = context_at(TEXT, CURSOR)
    memory.remember(context, (Proposal("total + x", CURSOR, 0.9),))
    assert memory.accepted(CURSOR, "total + x")
    assert not memory.accepted(CURSOR, "total") and not memory.accepted(CURSOR + 1, "total + x")
    future = asyncio.new_event_loop().create_future()
    memory.speculation = (context_key(context), future)
    assert memory.take_speculation(context_key(context_at(TEXT, 0))) is None  # another context: dropped
    memory.speculation = (context_key(context), future)
    assert memory.take_speculation(context_key(context)) is future
    assert memory.take_speculation(context_key(context)) is None


# No deadline: how many steps fit in a time budget varies from run to run; without one the tiny model's
# answer for a context is always the same.
OPEN_GATES = Options(completion=CompletionOptions(latency_budget_ms=0))
CLOSED_GATES = Options(
    completion=replace(
        OPEN_GATES.completion, min_mean_confidence_percent=100, min_next_token_confidence_percent=100
    )
)


@pytest.mark.parametrize("options", [OPEN_GATES, CLOSED_GATES], ids=["open gates", "closed gates"])
async def test_a_speculative_answer_passes_the_same_gates_as_any_other(tiny_engine, options):
    # The completion started right after an accept is the pipeline's answer for that context: the same
    # confidence gates, post-processing and parse guard (closed gates: nothing is offered, speculated
    # or not).
    text = "import textwrap\n\ndef shorten(text, width):\n    words = text.split()\n    result = \n"
    cursor = text.index("result = ") + len("result = ")
    opened = standalone(text, "python", LanguageRegistry(), "file:///shorten.py")
    snapshot = opened.snapshot()
    scheduler = Scheduler()
    try:
        service = InlineService(scheduler)
        service.speculate(opened, snapshot, cursor, options, tiny_engine)
        answer = await service.complete(
            opened, snapshot, cursor, options, tiny_engine, time.monotonic(), lambda: True
        )
    finally:
        scheduler.stop()
    fresh = execute(prepare(snapshot, cursor, options, tiny_engine, time.monotonic()), tiny_engine)
    assert answer is not None and answer.source == "speculative"
    assert [p.text for p in answer.proposals] == [p.text for p in fresh.proposals]
    assert bool(fresh.proposals) == (options is OPEN_GATES)


async def test_an_answer_cut_short_by_the_deadline_is_never_served_again_from_the_cache(tiny_engine):
    # A request whose deadline has passed before the engine starts gets the sampler's best canvas so
    # far (stop reason "deadline"). Recalling it later would replay a worse answer than the time or the
    # server's speed then allow (raising latencyBudgetMs, a server back to speed): the next request at
    # the same context runs the engine again. An answer that finished in time is recalled as before.
    text = "import textwrap\n\ndef shorten(text, width):\n    words = text.split()\n    result = \n"
    cursor = text.index("result = ") + len("result = ")
    opened = standalone(text, "python", LanguageRegistry(), "file:///shorten.py")
    snapshot = opened.snapshot()
    # From noise (no drafts): one step cannot settle a canvas, so a passed deadline cuts it.
    noise = replace(OPEN_GATES.completion, drafts=False, next_token_draft=False)
    timed = Options(completion=replace(noise, latency_budget_ms=250))
    untimed = Options(completion=noise)
    scheduler = Scheduler()
    try:
        service = InlineService(scheduler)
        sources = []
        for options, started in ((timed, time.monotonic() - 10), (timed, time.monotonic() - 10)):
            answer = await service.complete(
                opened, snapshot, cursor, options, tiny_engine, started, lambda: True
            )
            assert answer is not None
            sources.append((answer.source, answer.result.stop_reason if answer.result else None))
        assert all(source != "cache" for source, _ in sources), sources
        assert sources[0][1] == "deadline"
        for _ in range(2):
            answer = await service.complete(
                opened, snapshot, cursor, untimed, tiny_engine, time.monotonic(), lambda: True
            )
            sources.append((answer.source, answer.result.stop_reason if answer.result else None))
        assert sources[2][1] != "deadline" and sources[3][0] == "cache", sources
    finally:
        scheduler.stop()
