"""Kept buffers: the same memory for the usual shapes, and no answer that depends on what they held."""

from __future__ import annotations

import torch

from engine import InfillRequest, load_engine
from engine.buffers import Buffers

PREFIX = "def wrap(text, width=70):\n    lines = "
SUFFIX = "\n    return lines\n"


def test_a_buffer_is_the_same_memory_for_shapes_up_to_the_largest_asked():
    buffers = Buffers(max_kept_bytes=1 << 20)
    first = buffers.get("logits", (2, 16, 100), torch.float32, "cpu")
    smaller = buffers.get("logits", (1, 16, 100), torch.float32, "cpu")
    assert smaller.data_ptr() == first.data_ptr() and smaller.shape == (1, 16, 100)
    larger = buffers.get("logits", (4, 16, 100), torch.float32, "cpu")
    assert larger.shape == (4, 16, 100)
    assert buffers.get("logits", (2, 16, 100), torch.float32, "cpu").data_ptr() == larger.data_ptr()
    assert buffers.get("probs", (2, 16, 100), torch.float32, "cpu").data_ptr() != larger.data_ptr()
    assert buffers.get("rounded", (2, 16, 100), torch.bfloat16, "cpu").dtype == torch.bfloat16
    assert buffers.nbytes == 4 * 16 * 100 * 4 + 2 * 16 * 100 * 4 + 2 * 16 * 100 * 2


def test_a_buffer_over_the_cap_is_not_kept():
    buffers = Buffers(max_kept_bytes=1000)
    big = buffers.get("logits", (1, 256, 100), torch.float32, "cpu")
    assert big.shape == (1, 256, 100) and buffers.nbytes == 0


def test_answers_do_not_depend_on_what_the_kept_buffers_held(tiny_model_dir):
    # Each request's own engine has fresh buffers; the shared one has run requests of other shapes
    # (more candidates, longer canvases, a seed) in between, in its sampler's and its step's buffers.
    requests = [
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=6, seed=3),
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=40, max_steps=5, n_candidates=3, seed=4),
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, seed_canvas="while text:\n", max_new_tokens=16, seed=5),
        InfillRequest(prefix="x = [", suffix="]\n", max_new_tokens=8, max_steps=4, min_new_tokens=2, seed=6),
    ]
    shared = load_engine(str(tiny_model_dir), device="cpu")
    for request in requests + requests[::-1]:
        fresh = load_engine(str(tiny_model_dir), device="cpu").infill(request)
        shared.reset_cache()
        got = shared.infill(request)
        assert [c.token_ids for c in got.candidates] == [c.token_ids for c in fresh.candidates]
        assert [c.confidence for c in got.candidates] == [c.confidence for c in fresh.candidates]
    assert shared.buffers.nbytes > 0
