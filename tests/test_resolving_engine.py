"""The sampler's per-step observer (`InfillRequest.observer`), through the real tiny model: what it sees,
that it changes nothing of the answer, and that it costs nothing when it is not due."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from engine import InfillRequest, load_engine
from engine.api import CanvasStep, token_ranges

PREFIX = "def wrap(text, width=70):\n    lines = "
SUFFIX = "\n    return lines\n"


@dataclass
class Recorder:
    """An observer that is due every step (`every`: every n-th time it is asked)."""

    every: int = 1
    asked: int = 0
    steps: list[CanvasStep] = field(default_factory=list)

    def due(self) -> bool:
        self.asked += 1
        return self.asked % self.every == 0

    def __call__(self, step: CanvasStep) -> None:
        self.steps.append(step)


@pytest.fixture
def engine(tiny_model_dir):
    return load_engine(str(tiny_model_dir), device="cpu")


def answer(result) -> list[tuple]:
    return [(c.text, c.token_ids, c.confidence, c.draft) for c in result.candidates] + [result.steps]


@pytest.mark.parametrize(
    "request_",
    [
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=6, seed=3),
        # Two canvases, two candidates of which one is a draft, a lead: every path the report reads.
        InfillRequest(
            prefix=PREFIX,
            suffix=SUFFIX,
            max_new_tokens=40,
            canvas_tokens=16,
            max_steps=3,
            n_candidates=2,
            drafts=("textwrap.wrap(text)",),
            seed=5,
        ),
        InfillRequest(prefix="def f():\n    x = 1", suffix="\n", lead="\n", max_new_tokens=16, max_steps=4),
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, next_token_draft=True, max_new_tokens=16, max_steps=4),
    ],
)
def test_an_observer_sees_every_step_but_the_last_and_changes_nothing(engine, request_):
    plain = engine.infill(request_)
    engine.reset_cache()
    seen = Recorder()
    observed = engine.infill(replace(request_, observer=seen))
    assert answer(observed) == answer(plain)
    assert seen.steps, "nothing was reported"
    numbers = [s.step for s in seen.steps]
    assert numbers == sorted(numbers)  # step 0 more than once: a next-token draft as it is written
    assert len(set(numbers) - {0}) == len([n for n in numbers if n])
    assert numbers[-1] < observed.steps  # the last step is the answer itself
    for step in seen.steps:
        assert len(step.offsets) == len(step.confidence)
        assert all(0 <= a < b <= len(step.text) for a, b in step.settled)
        assert all(0.0 <= p <= 1.0 for p in step.confidence)


def test_a_draft_is_reported_before_the_first_step_unsettled(engine):
    seen = Recorder()
    draft = "textwrap.wrap(text)"
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, drafts=(draft,), max_steps=3, observer=seen))
    first = seen.steps[0]
    assert first.step == 0 and first.text == draft and first.draft == 0
    assert first.settled == () and set(first.confidence) == {0.0}


def test_a_next_token_draft_is_reported_as_it_is_written_before_the_first_step(engine):
    seen = Recorder()
    request = InfillRequest(
        prefix=PREFIX, suffix=SUFFIX, next_token_draft=True, max_new_tokens=16, max_steps=4
    )
    result = engine.infill(replace(request, observer=seen))
    written = [s for s in seen.steps if s.step == 0]
    assert len(written) >= 2, f"the draft was shown {len(written)} times, not as it was written"
    lengths = [len(s.offsets) for s in written]
    assert lengths[:-1] == list(range(1, len(lengths)))  # one more token each time, then the seeded canvas
    assert all(s.settled == () and s.draft == 0 for s in written)
    assert all(p > 0.0 for s in written[:-1] for p in s.confidence)  # the head's own probabilities
    assert written[-2].text == written[-1].text  # the canvas starts from what was written
    assert result.steps > 0


def test_earlier_canvases_text_stays_in_the_report_and_is_settled(engine):
    seen = Recorder()
    request = InfillRequest(
        prefix=PREFIX, suffix=SUFFIX, max_new_tokens=48, canvas_tokens=16, max_steps=3, seed=3, observer=seen
    )
    result = engine.infill(request)
    later = [s for s in seen.steps if s.step > 3]  # in the second canvas
    assert later, f"one canvas only: {result.steps} steps, stop {result.stop_reason}"
    emitted, _ = engine.text_of(list(result.candidates[0].token_ids[:16]))  # the first canvas's
    assert later[0].text.startswith(emitted)
    assert later[0].settled[0][0] == 0 and later[0].settled[0][1] >= len(emitted)


def test_an_observer_that_is_not_due_is_asked_once_a_step_and_shown_nothing(engine):
    never = Recorder(every=10**9)
    result = engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_steps=5, observer=never))
    assert never.steps == []
    assert never.asked == result.steps - 1  # after each step another one follows


def test_token_ranges_join_runs_of_chosen_tokens():
    assert token_ranges((0, 2, 5, 6), [True, True, False, True], 9) == ((0, 5), (6, 9))
    assert token_ranges((0, 0, 3), [True, True, True], 3) == ((0, 3),)  # an empty token joins nothing
    assert token_ranges((0, 4), [False, True], 3) == ()  # offsets past a cut text
    assert token_ranges((), [], 0) == ()
