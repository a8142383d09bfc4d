"""The server side of the suggestion as it settles (dgemma_lsp/inline/resolving.py): when a partial is
due, how a canvas becomes spans, and which parts of a final suggestion count as unsure."""

from __future__ import annotations

import asyncio
import threading

from dgemma_lsp.inline.evidence import Evidence
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.resolving import (
    DECODE_FROM_S,
    EVERY_S,
    FIRST_AFTER_S,
    Outbox,
    Resolving,
    Span,
    low_confidence,
    spans_of,
)
from dgemma_lsp.runtime.options import parse_options
from engine.api import CanvasStep


def step(text: str, settled: tuple[tuple[int, int], ...] = ()) -> CanvasStep:
    return CanvasStep(step=1, text=text, settled=settled, confidence=(), offsets=())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_spans_alternate_settled_and_unsettled_text_and_keep_it_whole():
    spans = spans_of(step("x = compute(a, b)", ((4, 11), (14, 16))), single_line=True, max_lines=1)
    assert spans == (
        Span("x = ", False),
        Span("compute", True),
        Span("(a,", False),
        Span(" b", True),
        Span(")", False),
    )
    assert "".join(s.text for s in spans) == "x = compute(a, b)"


def test_a_single_line_partial_stops_at_the_first_line_break_and_a_block_at_its_last_line():
    text = "total = 0\nfor v in values:\n    total += v\n"
    assert spans_of(step(text, ((0, 12),)), True, 1) == (Span("total = 0", True),)
    two = spans_of(step(text), False, 2)
    assert "".join(s.text for s in two) == "total = 0\nfor v in values:"
    assert spans_of(step(""), True, 1) == ()


def test_no_partial_before_the_first_wait_then_at_most_one_per_interval():
    clock = Clock()
    sent: list[tuple[Span, ...]] = []
    resolving = Resolving(clock.now, sent.append, clock)
    clock.now += DECODE_FROM_S * 0.9
    assert not resolving.due()  # an answer this soon shows nothing: not even decoded
    clock.now += DECODE_FROM_S * 0.2
    assert resolving.due()  # decoded now; the server's Outbox holds it until FIRST_AFTER_S
    resolving(step("a"))
    assert sent == [(Span("a", False),)]
    clock.now += EVERY_S * 0.5
    assert not resolving.due()
    clock.now += EVERY_S * 0.6
    assert resolving.due()
    resolving(step("a"))  # nothing new: not sent, and the interval does not restart
    assert len(sent) == 1 and resolving.due()
    resolving(step("ab", ((0, 1),)))
    assert sent[-1] == (Span("a", True), Span("b", False))
    resolving.stop()
    clock.now += 10
    assert not resolving.due()


def test_low_confidence_ranges_join_unsure_tokens_and_prefer_the_heads_scores():
    evidence = Evidence(confidence=(0.9, 0.2, 0.3, 0.8, 0.1), offsets=(0, 3, 5, 8, 10))
    proposal = Proposal("abc(de, fg)", 0, 0.4, evidence=evidence)
    assert low_confidence(proposal) == [(3, 8), (10, 11)]  # the last token runs to the text's end
    assert low_confidence(proposal, threshold=0.05) == []
    scored = Evidence(confidence=(0.1, 0.1), offsets=(0, 2), head_confidence=(0.9, 0.2))
    assert low_confidence(Proposal("abcd", 0, 0.1, evidence=scored)) == [(2, 4)]
    assert low_confidence(Proposal("x", 0, 1.0)) == []  # no evidence: nothing to dim


def test_show_confidence_is_on_by_default_and_can_be_turned_off():
    assert parse_options({})[0].completion.show_confidence
    options, problems = parse_options({"completion": {"showConfidence": False}})
    assert not options.completion.show_confidence and not problems
    _, problems = parse_options({"completion": {"showConfidence": "no"}})
    assert problems


def test_the_bench_reports_first_partials_answers_and_gaps():
    from evaluation.bench.resolving import Timed, figures

    samples = [Timed(sent=0.0, partials=[0.12, 0.18, 0.25], answered=0.9), Timed(sent=1.0, answered=1.05)]
    result = figures(samples)
    assert result["requests"] == 2 and result["with_partials"] == 1
    assert round(result["first_partial_p50_ms"]) == 120 and round(result["answer_p95_ms"]) == 900
    assert round(result["gap_p50_ms"]) == 70 and result["partials_per_answer"] == 1.5


async def test_the_outbox_sends_only_the_newest_partial_and_spaces_them_on_the_loop():
    loop = asyncio.get_running_loop()
    got: list[tuple[str, float]] = []
    arrived = asyncio.Event()

    def deliver(message: str) -> None:
        got.append((message, loop.time()))
        arrived.set()

    outbox = Outbox(loop, deliver)
    worker = threading.Thread(target=lambda: [outbox.put(m) for m in ("a", "b", "c")])
    worker.start()
    worker.join()  # three queued before the loop runs a single callback: only the newest goes out
    await asyncio.wait_for(arrived.wait(), 10)
    assert [m for m, _ in got] == ["c"]
    arrived.clear()
    outbox.put("d")
    outbox.put("e")
    await asyncio.wait_for(arrived.wait(), 10)
    assert [m for m, _ in got] == ["c", "e"]
    assert got[1][1] - got[0][1] >= EVERY_S  # held back until the interval had passed


async def test_the_outbox_holds_the_first_partial_until_its_time():
    loop = asyncio.get_running_loop()
    got: list[float] = []
    arrived = asyncio.Event()

    def deliver(message: str) -> None:
        got.append(loop.time())
        arrived.set()

    first_at = loop.time() + FIRST_AFTER_S
    outbox = Outbox(loop, deliver, first_at)
    outbox.put("decoded early")  # the worker decodes the first one before FIRST_AFTER_S
    await asyncio.wait_for(arrived.wait(), 10)
    assert got[0] >= first_at - 0.001  # asyncio runs a timer up to its clock's resolution early
