"""What this user just did with what was shown: taken, taken in part, typed over, or dismissed.

Each shown suggestion is watched until the edits after it say what became of it: the whole of it
inserted at once (Tab), a head of it inserted at once (an accept-word key), something else typed or
deleted there, or the cursor gone elsewhere. Typing its characters one by one only moves the watch
on. The session keeps a running rate of suggestions taken; the show-or-not decision reads both.
Nothing leaves the process and nothing outlives the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["taken", "partly", "typed_over", "dismissed", "none"]
OUTCOMES: tuple[Outcome, ...] = ("taken", "partly", "typed_over", "dismissed", "none")
PRIOR_RATE = 0.2  # a session's taken rate before anything was shown: about what the model earns
RATE_WEIGHT = 0.1  # each outcome's weight in the running rate (about the last ten count)


@dataclass(frozen=True)
class History:
    """What the decision reads of the user's recent choices."""

    previous: Outcome = "none"  # this document's last shown suggestion
    taken_rate: float = PRIOR_RATE  # the session's suggestions taken (whole or in part), recent ones most
    streak: int = 0  # the session's suggestions not taken since the last one taken


NO_HISTORY = History()


@dataclass(frozen=True)
class Watch:
    """A shown suggestion whose fate is not known yet: where its rest would be inserted, and it."""

    cursor: int
    rest: str


def outcome_of_edit(
    watch: Watch, offset: int, removed: int, inserted: str
) -> tuple[Outcome | None, Watch | None]:
    """What an edit says of the watched suggestion: its outcome (None: not decided yet) and what to
    watch from now on (None: nothing)."""
    if removed or offset != watch.cursor or not inserted:
        return "typed_over", None
    if inserted == watch.rest:
        return "taken", None
    if watch.rest.startswith(inserted):
        if len(inserted) > 1:  # more than a key's worth at once: an accept-word key
            return "partly", None
        return None, Watch(watch.cursor + 1, watch.rest[1:])
    return "typed_over", None


class Habits:
    """The session's running record of outcomes."""

    def __init__(self) -> None:
        self.taken_rate = PRIOR_RATE
        self.streak = 0

    def record(self, outcome: Outcome) -> None:
        taken = outcome in ("taken", "partly")
        self.taken_rate += RATE_WEIGHT * ((1.0 if taken else 0.0) - self.taken_rate)
        self.streak = 0 if taken else self.streak + 1

    def history(self, previous: Outcome) -> History:
        return History(previous, self.taken_rate, self.streak)
