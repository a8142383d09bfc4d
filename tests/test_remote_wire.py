"""What the remote engine sends and how it reads answers: the canvas rows, the JSON, the candidates."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from engine import InfillRequest, Snippet
from engine.remote_server import ServerFacts
from engine.remote_wire import Emitted, Layout, Row, body, candidate, emitted, layout, prompt_fields, rows

EOS = 1
FACTS = ServerFacts(
    model="m", max_model_len=1024, version="0.32.0", family="fim", family_reason="", tokenize=True,
    extras=True, canvas=16, vocab_size=512, eos_ids=(EOS,), control_ids=tuple(range(32)),
)  # fmt: skip


def test_a_draft_row_holds_the_draft_its_end_then_noise_and_the_pinned_anchor():
    request = InfillRequest(prefix="x = ", anchor=")", drafts=("f(a",), n_candidates=2, max_new_tokens=16)
    canvas = layout(request, FACTS, seed_len=0, anchor_len=1)
    assert (canvas.width, canvas.middle, canvas.read_only) == (16, 15, True)
    draft_row, noise_row = rows(request, FACTS, canvas, drafts=[[100, 101]], seed=[], anchor=[40])
    assert draft_row.seed[:3] == (100, 101, EOS) and draft_row.seed[-1] == 40 and len(draft_row.seed) == 16
    assert draft_row.pinned == (15,) and draft_row.draft == 0 and draft_row.count == 1
    assert noise_row.count == 1 and noise_row.draft is None and noise_row.pinned == (15,)


def test_a_rewrite_seed_keeps_its_fixed_tokens_pinned_and_noises_the_rest():
    request = InfillRequest(prefix="x = ", seed_canvas="abc", fixed_positions=(0, 2), seed_noise=1.0)
    canvas = layout(request, FACTS, seed_len=3, anchor_len=0)
    (row,) = rows(request, FACTS, canvas, drafts=[], seed=[200, 201, 202], anchor=[])
    assert canvas.width == 11 and row.pinned == (0, 2)  # the seed, and room for the rewrite to grow
    assert row.seed[0] == 200 and row.seed[2] == 202 and len(row.seed) == 11
    assert row.seed[1] != 201  # the free position renoised (at strength 1, as good as surely)
    kept = rows(replace(request, seed_noise=0.0), FACTS, canvas, drafts=[], seed=[200, 201, 202], anchor=[])
    assert kept[0].seed[:3] == (200, 201, 202)  # strength 0: the seed as it was


def test_a_plain_request_leaves_the_canvas_to_the_server():
    plain = ServerFacts(model="m", max_model_len=None, version=None, family="gemma4-chat",
                        family_reason="", tokenize=False, extras=False, canvas=0, vocab_size=0)  # fmt: skip
    request = InfillRequest(prefix="x", drafts=("1",), n_candidates=3)
    canvas = layout(request, plain, 0, 0)
    assert rows(request, plain, canvas, [], [], []) == [Row(count=3)]
    sent = body("m", {"messages": []}, canvas, Row(count=3), plain)
    assert sent == {"model": "m", "messages": [], "max_tokens": 64, "n": 3, "logprobs": True}


def test_the_body_carries_the_extras_and_no_sampling_parameter_a_diffusion_model_refuses():
    canvas = Layout(width=8, middle=7, max_tokens=8, read_only=True, max_steps=3)
    row = Row(count=1, seed=tuple(range(8)), pinned=(7,))
    sent = body("m", {"prompt": "p"}, canvas, row, FACTS)
    assert sent["vllm_xargs"] == {
        "diffusion_canvas_length": 8, "diffusion_seed_canvas": list(range(8)), "diffusion_pinned": [7],
        "diffusion_max_steps": 3, "diffusion_read_only": 1,
    }  # fmt: skip
    assert not {"temperature", "seed", "min_p", "min_tokens", "logit_bias"} & sent.keys()


def test_pinned_positions_come_back_as_sent_whatever_the_server_answered_there():
    canvas = Layout(width=4, middle=4, max_tokens=4, read_only=True)
    row = Row(count=1, seed=(100, 101, 102, 103), pinned=(0, 2))
    answer = Emitted("abcd", (300, 301, 302, 303), ("a", "b", "c", "d"), (math.log(0.5),) * 4, "length")
    made, ended = candidate(answer, row, canvas, FACTS, {0: "X", 2: "Y"})
    assert made.token_ids == (100, 301, 102, 303) and made.text == "XbYd" and not ended
    assert made.confidence == (1.0, 0.5, 1.0, 0.5) and made.offsets == (0, 1, 2, 3)


def test_the_middle_ends_at_the_first_control_token_and_before_the_anchor():
    canvas = Layout(width=5, middle=4, max_tokens=5, read_only=True)
    ended_early = Emitted("ab", (300, 301, EOS, 302, 40), ("a", "b", "", "c", ")"), (0.0,) * 5, "length")
    made, ended = candidate(ended_early, Row(count=1, draft=0), canvas, FACTS, {})
    assert (made.text, made.token_ids, made.draft, ended) == ("ab", (300, 301), 0, True)
    anchored = Emitted("abcd)", (300, 301, 302, 303, 40), ("a", "b", "c", "d", ")"), (0.0,) * 5, "length")
    made, ended = candidate(anchored, Row(count=1), canvas, FACTS, {})
    assert made.text == "abcd" and not ended


def test_chat_and_completion_choices_are_read_alike():
    chat = {
        "message": {"content": "ab"}, "finish_reason": "stop", "token_ids": [5, 6],
        "logprobs": {"content": [{"token": "a", "logprob": -1.0}, {"token": "b", "logprob": -2.0}]},
    }  # fmt: skip
    completion = {
        "text": "ab", "finish_reason": "stop", "token_ids": [5, 6],
        "logprobs": {"tokens": ["a", "b"], "token_logprobs": [-1.0, -2.0], "text_offset": [0, 1]},
    }  # fmt: skip
    assert emitted(chat, chat=True) == emitted(completion, chat=False)
    with pytest.raises(ValueError):
        emitted({"message": None}, chat=True)


def test_other_files_snippets_come_first_in_either_family_and_only_where_the_tokenizer_has_a_separator():
    request = InfillRequest(
        prefix="x = ", suffix="\n", language="python", context=(Snippet("a.py", "A = 1"),)
    )
    with_sep = replace(FACTS, file_sep=True)
    assert prompt_fields(request, with_sep, 2.0, 16)["prompt"] == (
        "<|lang:python|><|file_sep|>a.py\nA = 1<|fim_suffix|>\n<|fim_prefix|>x = <|fim_middle|>"
    )
    assert "a.py" not in prompt_fields(request, FACTS, 2.0, 16)["prompt"]  # an older tokenizer: no separator
    chat = replace(FACTS, family="gemma4-chat")
    (message,) = prompt_fields(request, chat, 2.0, 16)["messages"]
    assert message["content"].index("--- a.py ---\nA = 1") < message["content"].index("x = <|missing code|>")


def test_the_windows_are_cut_to_the_served_length():
    short = replace(FACTS, max_model_len=64)
    request = InfillRequest(prefix="p" * 1000 + "END", suffix="BEGIN" + "s" * 1000)
    prompt = prompt_fields(request, short, 2.0, 16)["prompt"]
    windows = prompt.count("p") + len("END") + len("BEGIN") + prompt.count("s")
    assert "pEND<|fim_middle|>" in prompt and "<|fim_suffix|>BEGINs" in prompt  # the ends at the cursor
    assert windows <= (64 - 16) * 2.0  # the served length less the canvas, in characters at 2 per token
