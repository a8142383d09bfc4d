"""The next-token draft: where the code offers no draft, the engine's next-token head writes one greedily
and the canvas revises it as a draft row (real tiny checkpoint, real fused layers, real sampler)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.inline.planning import NEXT_TOKEN, prepare
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import InfillRequest
from engine.autoregressive import decode_autoregressive

REQUEST = InfillRequest(
    prefix="def add(a, b):\n    return ", suffix="\n", language="python", max_new_tokens=12,
    min_new_tokens=1, max_steps=2, next_token_draft=True,
)  # fmt: skip


@pytest.fixture
def engine(own_engine):
    """An engine of its own: the tests read and spy on its prompt cache and sampler."""
    return own_engine


def greedy(engine, request: InfillRequest, tokens: int) -> list[int]:
    """What plain autoregressive decoding writes for the same prompt (the engine's cache reset after)."""
    plain = replace(request, next_token_draft=False, max_new_tokens=tokens, max_steps=None)
    ids = list(decode_autoregressive(engine, plain).candidates[0].token_ids)
    engine.reset_cache()
    return ids


def test_without_drafts_the_greedy_answer_seeds_the_one_sticky_row(engine, canvas_specs):
    room = min(REQUEST.max_new_tokens, 16)  # the first canvas: 16 tokens for 12 new ones
    expected = greedy(engine, REQUEST, room)
    result = engine.infill(REQUEST)
    spec = canvas_specs[0]
    assert spec.init.shape[0] == 1  # the next-token draft's row takes the one candidate place
    eos = min(engine.format.eos_ids)
    seeded = (expected + [eos])[: spec.init.shape[1]]
    assert spec.init[0, : len(seeded)].tolist() == seeded
    assert bool(spec.sticky[0, : len(seeded)].all())
    assert {c.draft for c in result.candidates} == {0}
    two = engine.infill(replace(REQUEST, n_candidates=2))
    assert canvas_specs[-1].init.shape[0] == 2 and not bool(canvas_specs[-1].sticky[1].any())  # + a noise row
    assert {c.draft for c in two.candidates} <= {0, None}
    # The draft's forwards are counted apart from the canvas's steps: one per greedy token written.
    assert result.draft_forwards == len(expected) + (len(expected) < room) and result.steps >= 1


def test_the_prompt_cache_holds_the_prompt_alone_after_the_draft(engine, canvas_specs):
    engine.infill(REQUEST)
    prompt = engine.prompt_ids(REQUEST)
    assert engine.prompt_cache.tokens == prompt
    assert engine.prompt_cache.cache.get_seq_length() == len(prompt)
    # The canvas attended to the prompt only: the same request again reuses all of it and answers the same.
    first = engine.infill(REQUEST)
    again = engine.infill(REQUEST)
    assert again.reused_prompt_tokens == len(prompt) - 1  # one token is always encoded again
    assert [c.token_ids for c in again.candidates] == [c.token_ids for c in first.candidates]


def test_drafts_from_the_code_or_a_seed_leave_the_next_token_head_out(engine, canvas_specs):
    engine.infill(replace(REQUEST, drafts=("a + b",)))
    assert canvas_specs[-1].init.shape[0] == 1  # the code's draft alone: no next-token row, no noise row
    assert canvas_specs[-1].init[0, :3].tolist() == engine.format.encode("a + b")[:3]
    engine.infill(replace(REQUEST, seed_canvas="a + b", max_new_tokens=8))
    assert canvas_specs[-1].init.shape[0] == 1
    engine.infill(replace(REQUEST, next_token_draft=False))
    assert canvas_specs[-1].init.shape[0] == 1


def test_the_draft_takes_half_the_time_left_and_the_canvas_still_runs(engine, canvas_specs):
    # A deadline already passed: the draft stops after its first token, and the canvas gets its step.
    result = engine.infill(replace(REQUEST, deadline=time.monotonic(), max_steps=4))
    spec = canvas_specs[0]
    assert spec.init.shape[0] == 1  # the draft row alone
    assert bool(spec.sticky[0, :1].all()) and not bool(spec.sticky[0, 2:].any())  # 1 token + EOS
    assert (result.draft_forwards, result.steps) == (1, 1) and result.candidates  # one of each, an answer


def test_the_pipeline_names_a_next_token_row_and_the_option_turns_it_off(engine):
    text = "def add(a, b):\n    return \n"
    opened = standalone(text, "python", LanguageRegistry())
    cursor = len("def add(a, b):\n    return ")
    # Two candidates: the next-token row and a noise row, so the tiny model's answer has two chances.
    budget = CompletionOptions(latency_budget_ms=0, max_steps=2, min_mean_confidence_percent=0, candidates=2)
    options = Options(completion=budget)
    plan = prepare(opened.snapshot(), cursor, options, engine, time.monotonic())
    assert plan.request.next_token_draft and not plan.request.drafts  # nothing to copy in this file
    assert (plan.origin(None), plan.origin(0)) == ("model", NEXT_TOKEN)
    shown = complete(opened.snapshot(), cursor, options, engine)
    assert shown.proposals and shown.proposals[0].origin in ("model", NEXT_TOKEN)
    off = Options(completion=replace(budget, next_token_draft=False))
    assert not prepare(opened.snapshot(), cursor, off, engine, time.monotonic()).request.next_token_draft


def test_only_checkpoints_trained_for_it_write_next_token_drafts(engine, canvas_specs):
    from transformers import PreTrainedTokenizerFast

    from engine.local_engine import LocalEngine
    from engine.prompts import Gemma4ChatFormat

    assert engine.writes_next_token_drafts  # our fill-in-the-middle format: its head trained on middles
    tokenizer = engine.format.tokenizer
    hf = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<eos>")
    chat = LocalEngine(engine.backbone, Gemma4ChatFormat(hf), engine.settings, engine.info)
    assert not chat.writes_next_token_drafts  # the released chat checkpoint: nothing says it can
    engine.writes_next_token_drafts = False
    engine.infill(REQUEST)
    assert canvas_specs[-1].init.shape[0] == 1  # the request's flag alone does not make a draft row
