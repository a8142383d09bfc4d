"""What the server learns of what became of each shown suggestion: taken, partly, typed over, dismissed."""

from __future__ import annotations

import pytest

from dgemma_lsp.inline.habits import PRIOR_RATE, RATE_WEIGHT, Habits, Watch, outcome_of_edit
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.reuse import InlineMemory


@pytest.mark.parametrize(
    ("offset", "removed", "inserted", "outcome", "watch"),
    [
        (10, 0, "total + x", "taken", None),  # Tab: the whole of it at once
        (10, 0, "total", "partly", None),  # an accept-word key
        (10, 0, "t", None, Watch(11, "otal + x")),  # typing it key by key: not decided yet
        (10, 0, "y", "typed_over", None),  # something else typed there
        (10, 1, "", "typed_over", None),  # a deletion
        (20, 0, "t", "typed_over", None),  # an edit elsewhere
    ],
)
def test_an_edit_decides_what_became_of_the_watched_suggestion(offset, removed, inserted, outcome, watch):
    assert outcome_of_edit(Watch(10, "total + x"), offset, removed, inserted) == (outcome, watch)


def test_the_session_rate_follows_the_latest_outcomes_and_the_streak_counts_those_not_taken():
    habits = Habits()
    habits.record("typed_over")
    habits.record("dismissed")
    assert habits.streak == 2 and habits.taken_rate == pytest.approx(PRIOR_RATE * (1 - RATE_WEIGHT) ** 2)
    habits.record("partly")
    assert habits.streak == 0 and habits.taken_rate > PRIOR_RATE * (1 - RATE_WEIGHT) ** 2
    assert habits.history("partly").previous == "partly"


def test_a_document_watches_what_it_showed_until_edits_or_a_move_decide_it():
    memory = InlineMemory()
    memory.watch_shown((Proposal("total + x", 10, 0.9),))
    assert memory.observe_edit(10, 0, "t") is None  # typing through
    assert memory.observe_request(11) is None  # the request that follows the key: same place
    assert memory.observe_edit(11, 0, "otal + x") == "taken" and memory.previous == "taken"
    memory.watch_shown((Proposal("y", 30, 0.9),))
    assert memory.observe_request(5) == "dismissed"  # asked elsewhere with no edit: moved away
    assert memory.observe_request(5) is None  # said once
    memory.watch_shown(())
    assert memory.watch is None and memory.observe_edit(0, 0, "a") is None  # nothing shown, nothing decided
