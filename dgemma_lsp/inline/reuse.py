"""Answers a document already has: the shown completion being typed through, and recent contexts.

Typing the start of what was shown leaves its rest to show at once; undo, backspace or a re-trigger
bring back a context seen moments ago. Both are answered without the model. A speculation (the
completion computed right after an accept) is remembered here too, so the next request can await it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Literal

from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.habits import Outcome, Watch, outcome_of_edit
from dgemma_lsp.inline.proposal import Proposal
from engine.api import InfillRequest, Snippet

Source = Literal["model", "lookup", "structure", "next_token", "typed_through", "cache", "speculative"]
# What an answer was computed from besides the windows: other files' snippets and the drafts.
Read = tuple[tuple[Snippet, ...], tuple[str, ...]]
ContextKey = tuple[str, str, str, str, Read]
RECENT_CONTEXTS = 16


@dataclass(frozen=True)
class Shown:
    """The last answer of a document: what typing through or an accept is compared with (every
    proposal the decision considered: one it hid may show once typing through bears it out)."""

    context: CompletionContext
    proposals: tuple[Proposal, ...]


def read_by(request: InfillRequest) -> Read:
    """What a request gives the model to read besides its windows."""
    return request.context, request.drafts


def context_key(context: CompletionContext, read: Read = ((), ())) -> ContextKey:
    """What an answer was computed from: the windows, and what else the model read (the repository's
    snippets and the drafts, which other files may have changed meanwhile)."""
    return (context.language or "", context.mode, context.prefix, context.suffix, read)


def typed_through(shown: Shown, context: CompletionContext) -> tuple[Proposal, ...]:
    """The rest of each shown proposal that starts with what was typed since it was shown."""
    old = shown.context
    if context.suffix != old.suffix or not context.prefix.startswith(old.prefix):
        return ()
    typed = context.prefix[len(old.prefix) :]
    if not typed:
        return ()
    return tuple(
        replace(
            p,
            text=p.text[len(typed) :],
            cursor=context.cursor,
            evidence=p.evidence.rest(len(typed)),
            typed=p.typed + len(typed),
        )
        for p in shown.proposals
        if p.text.startswith(typed) and len(p.text) > len(typed) and p.text[len(typed) :].strip()
    )


class InlineMemory:
    """One document's shown answer, its recent answers by context, and a pending speculation."""

    def __init__(self) -> None:
        self.shown: Shown | None = None
        self.recent: OrderedDict[ContextKey, tuple[Proposal, ...]] = OrderedDict()
        self.speculation: tuple[ContextKey, asyncio.Future] | None = None
        self.watch: Watch | None = None  # the suggestion on screen, until the user's edits decide it
        self.previous: Outcome = "none"  # what became of the last one

    def watch_shown(self, proposals: tuple[Proposal, ...]) -> None:
        """`proposals` went to the editor: watch the first, which is the one on screen."""
        self.watch = Watch(proposals[0].cursor, proposals[0].text) if proposals else None

    def observe_edit(self, offset: int, removed: int, inserted: str) -> Outcome | None:
        """An edit of the document: what it says of the suggestion on screen (None: nothing yet)."""
        if self.watch is None:
            return None
        outcome, self.watch = outcome_of_edit(self.watch, offset, removed, inserted)
        return self._decided(outcome)

    def observe_request(self, cursor: int) -> Outcome | None:
        """A request at `cursor` with no edit since the suggestion was shown elsewhere: dismissed."""
        if self.watch is None or self.watch.cursor == cursor:
            return None
        self.watch = None
        return self._decided("dismissed")

    def _decided(self, outcome: Outcome | None) -> Outcome | None:
        if outcome is not None:
            self.previous = outcome
        return outcome

    def remember(
        self,
        context: CompletionContext,
        proposals: tuple[Proposal, ...],
        read: Read = ((), ()),
        whole: bool = True,
    ) -> None:
        """`proposals` are shown at `context`; kept for a recall too unless the deadline cut them short
        (`whole` False): a later request may have the time, or the server the speed, to do better."""
        self.shown = Shown(context=context, proposals=proposals)
        if whole:
            self.store(context_key(context, read), proposals)

    def store(self, key: ContextKey, proposals: tuple[Proposal, ...]) -> None:
        self.recent[key] = proposals
        self.recent.move_to_end(key)
        while len(self.recent) > RECENT_CONTEXTS:
            self.recent.popitem(last=False)

    def recall(
        self, context: CompletionContext, read: Read = ((), ())
    ) -> tuple[tuple[Proposal, ...], Source] | None:
        """An answer for `context` without the model: the rest of the shown one, or a recent one computed
        from the same code (other files' snippets and the drafts included)."""
        if self.shown is not None and (rest := typed_through(self.shown, context)):
            self.shown = Shown(context=context, proposals=rest)
            return rest, "typed_through"
        key = context_key(context, read)
        if key in self.recent:
            self.recent.move_to_end(key)
            proposals = tuple(replace(p, cursor=context.cursor) for p in self.recent[key])
            self.shown = Shown(context=context, proposals=proposals)
            return proposals, "cache"
        return None

    def take_speculation(self, key: ContextKey) -> asyncio.Future | None:
        """The speculative job computing `key`, if there is one (it is handed out once)."""
        speculation, self.speculation = self.speculation, None
        return speculation[1] if speculation is not None and speculation[0] == key else None

    def accepted(self, offset: int, text: str) -> bool:
        """Was inserting `text` at `offset` the acceptance of a proposal shown there?"""
        shown = self.shown
        return shown is not None and any(p.cursor == offset and p.text == text for p in shown.proposals)
