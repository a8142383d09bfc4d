"""The next-token gate: a completion from the model's own next-token draft is offered by the head's
probabilities of its tokens, not by the canvas's confidence in its own head's text (real tiny
checkpoint, real fused layers, real sampler and tree-sitter)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace

import pytest
import torch

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import finish
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.runtime.options import CompletionOptions, Options, parse_options
from engine import Candidate, InfillRequest, InfillResult, Timings, load_engine
from evaluation.benchmarks import BENCHMARKS
from evaluation.calibrate import Decoded, point

REQUEST = InfillRequest(
    prefix="def add(a, b):\n    return ", suffix="\n", language="python", max_new_tokens=12,
    min_new_tokens=1, max_steps=2, next_token_draft=True, next_token_confidence=True,
)  # fmt: skip


@pytest.fixture
def engine(own_engine):
    """An engine of its own: the tests sharpen its head and read its prompt cache."""
    return own_engine


def teacher_forced(engine, request: InfillRequest, tokens: tuple[int, ...]) -> list[float]:
    """The next-token head's probability of each token after the prompt and the ones before it, from
    one pass over the whole sequence with a fresh cache (no reuse, no batching, no padding)."""
    ids = engine.prompt_ids(request)
    with torch.inference_mode():
        states = engine.backbone.encode(torch.tensor([ids + list(tokens)]), engine.backbone.new_cache())[0]
        logits = engine.backbone.next_token_logits(states[len(ids) - 1 : -1]) + engine.bias
    return logits.softmax(dim=-1)[torch.arange(len(tokens)), torch.tensor(tokens)].tolist()


@pytest.mark.parametrize(
    "change",
    [
        {},  # the canvas keeps the draft: the probabilities are read off it
        {"max_new_tokens": 40, "canvas_tokens": 16, "min_new_tokens": 40},
    ],  # the row goes on past the draft over three canvases (appended to the kept cache): one more pass
    ids=["kept-draft", "three-canvases"],
)
def test_the_next_token_drafts_candidate_carries_the_heads_probabilities_of_its_tokens(engine, change):
    # The random model's head is near uniform, where a wrong state or position would hardly move a
    # probability: sharpen it (for the engine and the reference alike) so that any slip shows.
    head = engine.backbone.next_token_logits
    engine.backbone.next_token_logits = lambda states: head(states) * 40
    request = replace(REQUEST, **change)
    result = engine.infill(request)
    drafted = [c for c in result.candidates if c.draft == 0]
    assert len(drafted) == 1 and result.draft_forwards > 0
    for candidate in result.candidates:
        if candidate.draft == 0:
            assert len(candidate.head_confidence) == len(candidate.token_ids)
            assert candidate.head_confidence == pytest.approx(
                teacher_forced(engine, request, candidate.token_ids), abs=2e-3
            )
        else:  # the fresh-noise row is gated by the canvas
            assert candidate.head_confidence == ()
    prompt = engine.prompt_ids(request)
    assert engine.prompt_cache.cache.get_seq_length() == len(engine.prompt_cache.tokens)
    if "canvas_tokens" not in change:
        assert engine.prompt_cache.tokens == prompt


def test_a_candidate_the_canvas_revised_is_scored_by_one_more_pass(engine, monkeypatch):
    # Force a revision: the canvas's answer for the draft row differs from the draft from its first token.
    head = engine.backbone.next_token_logits
    engine.backbone.next_token_logits = lambda states: head(states) * 40
    written = engine._next_token_draft(
        engine.prompt_cache.encode(engine.prompt_ids(REQUEST))[1][0, -1], 8, REQUEST
    )
    engine.reset_cache()
    assert written.tokens
    revised = [t + 1 for t in written.tokens[:4]]
    ids = engine.prompt_ids(REQUEST)
    _, hidden = engine.prompt_cache.encode(ids)
    probs = engine._head_probabilities(ids, hidden[0, -1], revised, written)
    assert probs == pytest.approx(teacher_forced(engine, REQUEST, tuple(revised)), abs=2e-3)
    kept = engine._head_probabilities(ids, hidden[0, -1], written.tokens[:3], written)
    assert kept == tuple(written.confidence[:3])  # a head of the draft: read off it, no pass
    assert engine.prompt_cache.tokens == ids and engine.prompt_cache.cache.get_seq_length() == len(ids)


def test_the_scoring_changes_no_candidate_and_without_the_flag_there_is_none(engine):
    scored = engine.infill(REQUEST)
    engine.reset_cache()
    plain = engine.infill(replace(REQUEST, next_token_confidence=False))
    assert [(c.text, c.confidence, c.draft) for c in scored.candidates] == [
        (c.text, c.confidence, c.draft) for c in plain.candidates
    ]
    assert all(not c.head_confidence for c in plain.candidates)
    with_code_drafts = engine.infill(replace(REQUEST, drafts=("a + b",)))  # no next-token draft: no scores
    assert all(not c.head_confidence for c in with_code_drafts.candidates)


def candidate(text: str, canvas: float, head: float | None, draft: int | None = None) -> Candidate:
    """Two tokens of `text` at the given canvas and head probabilities (None: no head confidences)."""
    return Candidate(
        text=text, token_ids=(1, 2), confidence=(canvas, canvas), offsets=(0, 1), draft=draft,
        head_confidence=() if head is None else (head, head),
    )  # fmt: skip


def result_of(*candidates: Candidate) -> InfillResult:
    return InfillResult(
        candidates=candidates, steps=1, tokens_per_forward=2.0, stop_reason="eos",
        timings=Timings(0.0, 0.0, 0.0), prompt_tokens=8, reused_prompt_tokens=0,
    )  # fmt: skip


def plan_at(tiny_engine, completion: CompletionOptions, text: str = "x = 1\ny = ", cursor: int = 10):
    snapshot = standalone(text, "python", LanguageRegistry()).snapshot()
    return prepare(snapshot, cursor, Options(completion=completion), tiny_engine, time.monotonic())


GATES = {"min_mean_confidence_percent": 50, "min_next_token_confidence_percent": 30}


def test_the_next_token_drafts_candidate_is_gated_by_the_head_and_the_others_by_the_canvas(tiny_engine):
    plan = plan_at(tiny_engine, CompletionOptions(**GATES))
    assert plan.min_next_token_confidence == 0.3 and plan.request.next_token_confidence
    unsure_head = candidate("ab", canvas=0.9, head=0.2, draft=0)  # the canvas trusts its head's text
    sure_head = candidate("cd", canvas=0.1, head=0.4, draft=0)
    unsure_canvas = candidate("ef", canvas=0.45, head=None)
    sure_canvas = candidate("gh", canvas=0.55, head=None)
    shown = finish(plan, result_of(unsure_head, sure_head, unsure_canvas, sure_canvas)).proposals
    assert [p.text for p in shown] == ["cd", "gh"]
    gate_off = plan_at(tiny_engine, CompletionOptions(**GATES | {"min_next_token_confidence_percent": 0}))
    shown = finish(gate_off, result_of(unsure_head, sure_head, unsure_canvas, sure_canvas)).proposals
    assert [p.text for p in shown] == ["ab", "gh"]  # off: the canvas's mean gate reads them all, as before
    open_gates = plan_at(
        tiny_engine, CompletionOptions(min_mean_confidence_percent=0, min_next_token_confidence_percent=0)
    )
    assert not open_gates.request.next_token_confidence  # nothing reads the head's probabilities: no pass
    no_draft = plan_at(tiny_engine, CompletionOptions(**GATES, next_token_draft=False))
    assert not no_draft.request.next_token_confidence


def test_the_model_ships_the_next_token_gate_and_an_older_calibration_leaves_it_open(
    tiny_model_dir, tmp_path
):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "calibration.json").write_text(json.dumps(GATES | {"min_line_confidence_percent": 0}))
    loaded = load_engine(str(folder), device="cpu", threads=1)
    assert loaded.info.gates == GATES | {"min_line_confidence_percent": 0}
    plan = plan_at(loaded, CompletionOptions())  # the server's defaults: the model's gates
    assert plan.min_next_token_confidence == 0.3 and plan.request.next_token_confidence
    older = {"min_mean_confidence_percent": 40, "min_line_confidence_percent": 0}
    (folder / "calibration.json").write_text(json.dumps(older))
    loaded = load_engine(str(folder), device="cpu", threads=1)
    assert loaded.info.gates == older  # kept, though it names no next-token gate
    plan = plan_at(loaded, CompletionOptions())
    assert plan.min_mean_confidence == 0.4 and plan.min_next_token_confidence == 0.0
    assert not plan.request.next_token_confidence


def test_the_option_is_a_percentage():
    options, problems = parse_options({"completion": {"minNextTokenConfidencePercent": 35}})
    assert options.completion.min_next_token_confidence_percent == 35 and not problems
    options, problems = parse_options({"completion": {"minNextTokenConfidencePercent": 135}})
    assert options.completion.min_next_token_confidence_percent is None and problems


def test_calibration_points_gate_the_same_answers_by_each_confidence(tiny_engine):
    # The right answer came from the next-token draft (the head sure, the canvas not); the wrong one
    # from noise, with a sure canvas.
    plan = plan_at(
        tiny_engine, CompletionOptions(min_mean_confidence_percent=0, min_line_confidence_percent=0)
    )
    right = Decoded(plan, result_of(candidate("x + 1", canvas=0.3, head=0.9, draft=0)), None, "x + 1")
    wrong = Decoded(plan, result_of(candidate("zzz_wrong", canvas=0.9, head=None)), None, "x + 1")
    rows, benchmark = [right, wrong], BENCHMARKS["heldout"]
    by_canvas_only = point(rows, 50, 0, benchmark, 0)  # the next-token gate off: the canvas gates both
    assert by_canvas_only.offered == 0.5 and by_canvas_only.precision == 0.0
    both = point(rows, 95, 0, benchmark, 50)
    assert both.offered == 0.5 and both.precision == 1.0 and both.min_next_token_confidence_percent == 50
    assert both.accepted_chars_per_request == len("x + 1") / 2
    assert point(rows, 0, 0, benchmark, 95).offered == 0.5  # the head's 90% is below 95%
    assert point(rows, 0, 0, benchmark, 0).offered == 1.0
