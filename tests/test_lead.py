"""A lead: at the start of an empty line the model writes from the line break on, where it learned the
indentation as one token with the break, and the editor gets the line without it (real tiny checkpoint,
real sampler, real tree-sitter planning)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.inline.repair import repair_request
from dgemma_lsp.runtime.options import Options
from engine import InfillRequest
from engine.lead import lead_bias, offsets_without_lead, without_lead

REQUEST = InfillRequest(
    prefix="def add(a, b):", suffix="\n\nprint(add(1, 2))\n", language="python", lead="\n",
    max_new_tokens=8, min_new_tokens=1, max_steps=2,
)  # fmt: skip


@pytest.fixture
def engine(own_engine):
    return own_engine


def opens_with_lead(engine, token: int) -> bool:
    return engine.format.decode([token]).startswith("\n")


def test_only_tokens_that_begin_with_the_lead_may_open_the_middle(engine):
    vocab = engine.bias.shape[0]
    bias = lead_bias(vocab, engine.format.decode, "\n", engine.device)
    allowed = {t for t in range(vocab) if bias[t] == 0}
    assert allowed and allowed == {t for t in range(vocab) if opens_with_lead(engine, t)}
    assert engine.lead_bias("\n") is engine.lead_bias("\n")  # worked out once
    assert engine.lead_bias("") is None
    with pytest.raises(ValueError, match="no token begins"):
        lead_bias(vocab, engine.format.decode, "\x00\x01", engine.device)


@pytest.mark.parametrize("decoder", ["diffusion", "autoregressive"])
def test_the_middle_opens_with_the_lead_and_comes_without_it(engine, decoder):
    result = engine.infill(replace(REQUEST, decoder=decoder))
    for candidate in result.candidates:
        written = engine.format.clean(engine.format.decode(list(candidate.token_ids)))
        assert opens_with_lead(engine, candidate.token_ids[0])
        assert candidate.text == written[1:]
        assert all(0 <= offset <= len(candidate.text) for offset in candidate.offsets)


def test_next_token_drafts_and_code_drafts_are_read_after_the_lead(engine, canvas_specs):
    engine.infill(replace(REQUEST, next_token_draft=True))
    own = canvas_specs[-1]
    assert opens_with_lead(engine, int(own.init[0, 0])) and own.first_bias is not None
    engine.infill(replace(REQUEST, drafts=("    return a + b",)))
    draft = engine.format.encode("\n    return a + b")
    assert canvas_specs[-1].guess[0, : len(draft)].tolist() == draft


def test_a_second_canvas_is_free(engine, canvas_specs):
    engine.infill(replace(REQUEST, max_new_tokens=40, canvas_tokens=16, min_new_tokens=40))
    assert len(canvas_specs) >= 2
    assert canvas_specs[0].first_bias is not None and canvas_specs[1].first_bias is None


def test_a_seeded_request_takes_no_lead_and_repair_puts_it_back():
    with pytest.raises(ValueError, match="lead and a seed_canvas"):
        replace(REQUEST, seed_canvas="    return a")
    repaired = repair_request(REQUEST, "    return a +", [(13, 14)], [(0, 10), (10, 12), (12, 14)])
    assert repaired.prefix == "def add(a, b):\n" and not repaired.lead and repaired.seed_canvas


def test_an_engine_whose_model_learned_no_such_token_folds_it_back(engine, monkeypatch):
    monkeypatch.setattr(engine.format, "family", "gemma4-chat")  # only the family: no chat model here
    seen, real = [], engine.prompt_ids
    monkeypatch.setattr(engine, "prompt_ids", lambda request: seen.append(request) or real(request))
    engine.infill(REQUEST)
    assert seen[0].prefix == "def add(a, b):\n" and not seen[0].lead


def plan_at(engine, text: str, cursor: int):
    snapshot = standalone(text, "python", LanguageRegistry()).snapshot()
    return prepare(snapshot, cursor, Options(), engine, time.monotonic())


def test_the_planner_moves_an_empty_lines_break_into_the_lead(engine):
    text = "def add(a, b):\n\n    print(a)\n"
    plan = plan_at(engine, text, 15)  # the empty line, column 0
    assert plan.request.lead == "\n" and plan.request.prefix + "\n" == plan.context.prefix
    indented = "def add(a, b):\n    \n    print(a)\n"
    assert plan_at(engine, indented, 19).request.lead == ""  # typed indentation: the break is in the prompt
    assert plan_at(engine, "x = 1\nfoo()\n", 6).request.lead == ""  # code after the cursor on its line
    assert plan_at(engine, "x = 1", 5).request.lead == ""  # the end of a line: nothing to move


def test_offsets_and_text_without_the_lead():
    assert without_lead("\n    x", "\n") == "    x" and without_lead("    x", "\n") == "    x"
    assert offsets_without_lead((0, 5, 6), "\n") == (0, 4, 5)


def test_a_long_draft_is_not_cut_at_the_leads_own_line_break(engine):
    draft = engine.format.encode("\n    total = first + second + third + fourth + fifth")
    eos = min(engine.format.eos_ids)
    assert "\n" in engine.format.decode(draft[:1]) and "\n" not in engine.format.decode(draft[1:])
    assert engine._fitted(draft, 6, eos) == draft[:1] + [eos]  # without a lead: the break ends a line
    assert engine._fitted(draft, 6, eos, least=2) == draft[:6]  # with one: the next canvas goes on
