"""The suggestion as it settles, and the parts of the final one the model was unsure of.

`Resolving` is the engine's canvas observer (`engine.api.CanvasObserver`) for one completion request of a
client that declared `dgemma/resolving`. It runs on the model worker: `due` is a clock read (nothing is
decoded before the completion has run DECODE_FROM_S, nor more often than EVERY_S), and each step it is
shown becomes spans of settled and unsettled text, cut as the final answer's shape would cut it, handed to
`send` (which only queues them for the event loop, where `Outbox` holds the first until FIRST_AFTER_S).
`low_confidence` finds the character ranges of a
final suggestion whose tokens the model gave less than LOW_CONFIDENCE (`dgemma/confidence`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from dgemma_lsp.inline.planning import Plan
from dgemma_lsp.inline.proposal import Proposal
from engine.api import CanvasStep, token_ranges

# No partial before the completion has run this long: a pause is about 150 ms, and an answer that comes
# sooner than this needs no progress shown (it would only flicker before the suggestion).
FIRST_AFTER_S = 0.1
# The first partial is decoded from this on and held until FIRST_AFTER_S: else it waited for the end of
# the step under way at FIRST_AFTER_S, a whole step late on a loaded machine.
DECODE_FROM_S = 0.05
EVERY_S = 0.05  # at most one partial this often: enough to look alive, little for a client to redraw
# Below this probability a token is more likely some other token than the one shown: drawn dimmer.
LOW_CONFIDENCE = 0.5

Message = TypeVar("Message")


@dataclass(frozen=True)
class Span:
    text: str
    settled: bool  # the model is sure of it; the rest may still change


def spans_of(step: CanvasStep, single_line: bool, max_lines: int) -> tuple[Span, ...]:
    """The step's text as runs of settled and unsettled text, cut at the first line break for a
    single-line completion and after `max_lines` lines otherwise (as post-processing cuts the answer)."""
    text = step.text
    if single_line:
        text = text.split("\n", 1)[0]
    else:
        text = "\n".join(text.split("\n")[:max_lines])
    spans: list[Span] = []
    at = 0
    for start, end in step.settled:
        start, end = min(start, len(text)), min(end, len(text))
        if start > at:
            spans.append(Span(text[at:start], False))
        if end > start:
            spans.append(Span(text[start:end], True))
        at = max(at, end)
    if at < len(text):
        spans.append(Span(text[at:], False))
    return tuple(spans)


class Resolving:
    """The canvas observer of one completion request; `stop` ends its partials (a newer request, an
    edit, the answer), and is set on the event loop, where `stopped` is read again before sending."""

    def __init__(
        self,
        started: float,
        send: Callable[[tuple[Span, ...]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.started = started  # the request's monotonic time
        self.send = send
        self.clock = clock
        self.stopped = False
        self.single_line = True
        self.max_lines = 1
        self._sent_at: float | None = None
        self._sent: tuple[Span, ...] = ()

    def watching(self, plan: Plan) -> Plan:
        """`plan` with this observer on its engine request, cutting partials as its answer will be cut."""
        self.single_line = plan.context.mode == "single_line"
        self.max_lines = max(1, plan.context.max_lines)
        return replace(plan, request=replace(plan.request, observer=self))

    def due(self) -> bool:
        if self.stopped:
            return False
        now = self.clock()
        if now - self.started < DECODE_FROM_S:
            return False
        return self._sent_at is None or now - self._sent_at >= EVERY_S

    def __call__(self, step: CanvasStep) -> None:
        spans = spans_of(step, self.single_line, self.max_lines)
        if not spans or spans == self._sent:
            return  # nothing to show, or nothing new
        self._sent, self._sent_at = spans, self.clock()
        self.send(spans)

    def stop(self) -> None:
        self.stopped = True


class Outbox(Generic[Message]):
    """Partials from the model worker to the event loop: `put` (any thread) queues one, the loop hands
    `deliver` only the newest waiting, never before loop time `first_at` and never sooner than EVERY_S
    after the one before (a busy loop may run two queued callbacks back to back)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Message], None], first_at: float = 0.0
    ) -> None:
        self.loop = loop
        self.deliver = deliver
        self._waiting: deque[Message] = deque()  # appends and pops are atomic: no lock
        self._next = first_at  # loop time before which nothing more is delivered
        self._timer: asyncio.TimerHandle | None = None

    def put(self, message: Message) -> None:
        self._waiting.append(message)
        self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        newest = None
        while self._waiting:
            newest = self._waiting.popleft()  # an older one waiting is dropped: it is out of date
        if newest is None:
            return
        now = self.loop.time()
        if now < self._next:
            self._waiting.appendleft(newest)  # before any newer one the worker queued meanwhile
            if self._timer is None:
                self._timer = self.loop.call_at(self._next, self._after_wait)
            return
        self._next = now + EVERY_S
        self.deliver(newest)

    def _after_wait(self) -> None:
        self._timer = None
        self._flush()


def low_confidence(proposal: Proposal, threshold: float = LOW_CONFIDENCE) -> list[tuple[int, int]]:
    """Character ranges of `proposal.text` whose tokens the model gave less than `threshold`: by the
    next-token head where it scored the text (its own draft), else by the canvas. A token runs from its
    offset to the next token's (the last one to the end of the text, closers added after it included)."""
    evidence = proposal.evidence
    values = evidence.head_confidence or evidence.confidence
    return list(token_ranges(evidence.offsets, [value < threshold for value in values], len(proposal.text)))
