"""Invariants of the infill sampler, through the real DiffusionGemma classes (tiny random model)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from engine import InfillRequest, load_engine
from engine.prompt_cache import common_prefix_length
from engine.sampler import (
    CanvasSpec,
    SamplerSettings,
    argmax_last,
    denoise,
    entropy_bound_accept,
    noise_canvas,
    temperature,
)


class BackboneSpy:
    """Wraps the engine's backbone to record each decoder step's canvas; `on_call` may act (set a flag)
    after a step."""

    def __init__(self, backbone, on_call=None) -> None:
        self.backbone = backbone
        self.canvases: list[torch.Tensor] = []
        self.handed: list[tuple[torch.Tensor | None, torch.Tensor | None]] = []  # (previous, probabilities)
        self.on_call = on_call

    def canvas_step(self, cache, canvas, positions):
        step = self.backbone.canvas_step(cache, canvas, positions)

        def spied(tokens, previous, out=None, probabilities=None):
            self.canvases.append(tokens.clone())
            self.handed.append(tuple(None if t is None else t.clone() for t in (previous, probabilities)))
            out = step(tokens, previous, out, probabilities)
            if self.on_call is not None:
                self.on_call(len(self.canvases))
            return out

        return spied

    def __getattr__(self, name):  # the encoder and everything else: the real backbone's
        return getattr(self.backbone, name)


@pytest.fixture
def engine(tiny_model_dir):
    return load_engine(str(tiny_model_dir), device="cpu")


def spy_on(engine, on_call=None) -> BackboneSpy:
    spy = BackboneSpy(getattr(engine.backbone, "backbone", engine.backbone), on_call)
    engine.backbone = spy
    return spy


PREFIX = "def wrap(text, width=70):\n    lines = "
SUFFIX = "\n    return lines\n"


def test_fixed_positions_never_change(engine):
    seed = "while chunks:\n"
    seed_ids = engine.format.encode(seed)
    fixed = tuple(range(len(seed_ids)))
    spy = spy_on(engine)
    request = InfillRequest(
        prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, fixed_positions=fixed, max_new_tokens=16, max_steps=6,
        n_candidates=2,
    )  # fmt: skip
    result = engine.infill(request)
    assert len(spy.canvases) == result.steps >= 1
    for canvas in spy.canvases:  # every step's input, every candidate row
        assert canvas[:, : len(seed_ids)].tolist() == [seed_ids] * 2
    for candidate in result.candidates:
        assert list(candidate.token_ids[: len(seed_ids)]) == seed_ids


def test_each_step_after_the_first_is_handed_the_softmax_of_the_logits_it_reads(engine):
    spy = spy_on(engine)
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=4))
    assert len(spy.handed) >= 2 and spy.handed[0] == (None, None)
    for previous, probabilities in spy.handed[1:]:
        assert probabilities is not None
        assert torch.allclose(probabilities, previous.float().softmax(dim=-1), rtol=1e-5, atol=1e-7)


def test_one_millisecond_deadline_returns_after_one_step_with_a_valid_canvas(engine):
    result = engine.infill(
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, deadline=time.monotonic() + 0.001, max_steps=40)
    )
    assert result.steps == 1
    assert result.stop_reason == "deadline"
    vocab = engine.format.vocab_size
    suppressed = set(engine.format.suppressed_ids)
    tokens = result.candidates[0].token_ids
    assert all(0 <= t < vocab and t not in suppressed for t in tokens)


def test_cancellation_stops_within_one_step(engine):
    cancel = threading.Event()
    spy_on(engine, on_call=lambda calls: cancel.set() if calls == 3 else None)
    result = engine.infill(
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, cancel=cancel, max_steps=40, max_new_tokens=64)
    )
    assert result.stop_reason == "cancelled"
    assert result.steps == 3


def test_same_seed_same_output_and_other_seed_other_output(engine, tiny_model_dir):
    request = InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=8, seed=7)
    first = engine.infill(request)
    again = load_engine(str(tiny_model_dir), device="cpu").infill(request)
    other = engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=8, seed=8))
    assert first.candidates[0].token_ids == again.candidates[0].token_ids
    assert first.candidates[0].token_ids != other.candidates[0].token_ids


def test_eos_ends_the_middle(engine):
    # The seed puts EOS at canvas position 3 and keeps it there: the middle is the three tokens before it.
    head = engine.format.encode("lines = []")[:3]
    seed = engine.format.decode(head) + "<eos>"
    seed_ids = engine.format.encode(seed)
    assert seed_ids == [*head, engine.format.special.eos]
    result = engine.infill(
        InfillRequest(
            prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, fixed_positions=(0, 1, 2, 3), max_new_tokens=48
        )
    )
    assert result.stop_reason == "eos"
    assert result.candidates[0].token_ids == tuple(head)
    assert result.text == engine.format.decode(head)


def test_long_requests_go_canvas_after_canvas(engine):
    canvas = engine.canvas_length
    spy = spy_on(engine)
    result = engine.infill(
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=3 * canvas, max_steps=2, seed=3)
    )
    emitted = len(result.candidates[0].token_ids)
    assert emitted > canvas, "a second canvas must have been denoised"
    # Each canvas after the first is denoised against a prompt extended by the canvases before it.
    assert len(spy.canvases) == result.steps and result.steps >= 4
    assert engine.prompt_cache.cache.get_seq_length() == len(engine.prompt_cache.tokens)


def test_a_smaller_canvas_per_request_goes_on_canvas_after_canvas(engine):
    # A single-line request asks for canvases smaller than the model's: each step is over fewer
    # positions, and a middle longer than one canvas is written by the next.
    block = engine.canvas_length // 2
    spy = spy_on(engine)
    result = engine.infill(
        InfillRequest(
            prefix=PREFIX, suffix=SUFFIX, max_new_tokens=2 * block, min_new_tokens=2 * block,
            canvas_tokens=block, max_steps=2, seed=3,
        )
    )  # fmt: skip
    assert {canvas.shape[1] for canvas in spy.canvases} == {block}
    assert len(result.candidates[0].token_ids) == 2 * block


def test_an_anchored_request_keeps_the_whole_canvas_whatever_canvas_tokens_asks(engine):
    # An anchor ends the middle in the first canvas, so that canvas must have room for all of it.
    spy = spy_on(engine)
    engine.infill(
        InfillRequest(
            prefix=PREFIX, suffix=SUFFIX, anchor=")", max_new_tokens=engine.canvas_length,
            canvas_tokens=engine.canvas_length // 2, max_steps=2,
        )
    )  # fmt: skip
    assert {canvas.shape[1] for canvas in spy.canvases} == {engine.canvas_length}


def test_candidates_are_distinct_and_ranked(engine):
    result = engine.infill(
        InfillRequest(prefix=PREFIX, suffix=SUFFIX, n_candidates=4, max_new_tokens=16, max_steps=4)
    )
    texts = [c.text for c in result.candidates]
    assert len(texts) == len(set(texts)) >= 2
    means = [c.mean_confidence for c in result.candidates]
    assert means == sorted(means, reverse=True)


def test_reused_kv_cache_gives_the_same_output_as_a_fresh_encode(engine, tiny_model_dir):
    typed = InfillRequest(prefix=PREFIX + "[li", suffix=SUFFIX, max_new_tokens=16, max_steps=8)
    engine.infill(InfillRequest(prefix=PREFIX + "[", suffix=SUFFIX, max_new_tokens=16, max_steps=8))
    warm = engine.infill(typed)
    fresh = load_engine(str(tiny_model_dir), device="cpu").infill(typed)
    assert warm.reused_prompt_tokens > 0
    assert fresh.reused_prompt_tokens == 0
    assert warm.candidates[0].token_ids == fresh.candidates[0].token_ids


def test_entropy_bound_accepts_lowest_entropies_within_the_bound():
    entropy = torch.tensor([[0.5, 0.01, 0.02, 0.3, 0.05]])
    accepted = entropy_bound_accept(entropy, bound=0.1)
    # sorted: 0.01, 0.02, 0.05, 0.3, 0.5 -> sums before the largest: 0, .01, .03, .08, .38
    assert accepted.tolist() == [[False, True, True, True, True]]


def test_argmax_last_is_torch_max_with_ties_going_to_the_first():
    logits = torch.randn(3, 16, 8192, generator=torch.Generator().manual_seed(0))
    logits[1, 4, [7, 700, 7000]] = 50.0  # a three-way tie
    logits[2, 0] = 0.0  # a whole row tied
    found = argmax_last(logits)
    assert found.shape == (3, 16) and found.dtype == torch.long
    assert torch.equal(found, logits.max(dim=-1).indices)
    assert found[1, 4] == 7 and found[2, 0] == 0
    assert int(argmax_last(logits[0, 0])) == int(logits[0, 0].argmax())  # one row, as next-token decoding has
    # Other dtypes and non-contiguous views take torch's own path, with the same answer.
    assert torch.equal(argmax_last(logits.bfloat16()), logits.bfloat16().max(dim=-1).indices)
    assert torch.equal(argmax_last(logits[:, ::2]), logits[:, ::2].max(dim=-1).indices)


def test_temperature_follows_the_reference_schedule():
    # transformers' LinearTemperatureScheduleLogitsProcessor: t_min + (t_max - t_min) * remaining / N.
    settings = SamplerSettings(max_steps=5, t_max=0.8, t_min=0.4)
    assert temperature(settings, 5) == pytest.approx(0.8)
    assert temperature(settings, 1) == pytest.approx(0.4 + 0.4 / 5)


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([1, 2], [1, 2]) == 2


def test_bad_requests_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match="max_new_tokens"):
        InfillRequest(prefix="x", max_new_tokens=0)
    with pytest.raises(ValueError, match="canvas_tokens"):
        InfillRequest(prefix="x", canvas_tokens=-1)
    with pytest.raises(ValueError, match="seed_canvas"):
        InfillRequest(prefix="x", fixed_positions=(0,))


def test_fixed_positions_outside_the_seed_are_refused(engine):
    with pytest.raises(ValueError, match="outside"):
        engine.infill(InfillRequest(prefix="x", seed_canvas="ab", fixed_positions=(9,)))


def test_an_anchor_sits_fixed_at_the_canvas_end_and_is_not_part_of_the_middle(engine):
    anchor = ") + 1"
    anchor_ids = engine.format.encode(anchor)
    spy = spy_on(engine)
    result = engine.infill(InfillRequest(prefix=PREFIX, suffix=anchor + SUFFIX, anchor=anchor, max_steps=4))
    for canvas in spy.canvases:
        assert canvas[0, -len(anchor_ids) :].tolist() == anchor_ids
    length = spy.canvases[0].shape[1]
    assert len(result.candidates[0].token_ids) <= length - len(anchor_ids)
    assert result.stop_reason in ("eos", "converged", "max_steps")


def test_a_sticky_seed_starts_the_canvas_and_stays_where_the_model_is_unsure(engine):
    seed = "result.append(line)"
    seed_ids = engine.format.encode(seed)
    spy = spy_on(engine)
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, max_steps=3))
    assert spy.canvases[0][0, : len(seed_ids)].tolist() == seed_ids  # no noise at strength 0
    noisy = spy_on(engine)
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, seed_noise=1.0, max_steps=3))
    assert noisy.canvases[0][0, : len(seed_ids)].tolist() != seed_ids  # strength 1 renoises the seed


def test_a_rewrite_seed_keeps_its_fixed_tokens_and_noises_a_seed_noise_share_of_the_rest(engine):
    """A rewrite: the kept tokens fixed, the others renoised at the strength asked, each candidate row
    drawn apart; with seed_noise ignored the start canvas would be the seed itself."""
    seed = "total = sum(price * count for price, count in items)\n"
    seed_ids = engine.format.encode(seed)
    fixed = tuple(range(0, len(seed_ids), 3))
    free = [p for p in range(len(seed_ids)) if p not in fixed]
    spy = spy_on(engine)
    request = InfillRequest(prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, fixed_positions=fixed,
                            seed_noise=0.5, n_candidates=4, max_steps=1, seed=3)  # fmt: skip
    engine.infill(request)
    start = spy.canvases[0][:, : len(seed_ids)].tolist()  # the first step's input: the start canvas
    assert all(row[p] == seed_ids[p] for row in start for p in fixed)
    noised = sum(row[p] != seed_ids[p] for row in start for p in free) / (len(start) * len(free))
    assert 0.25 <= noised <= 0.75  # about half of the free positions, never none nor all
    assert len({tuple(row) for row in start}) == len(start)  # each row noised apart


def test_token_spans_cover_the_text(engine):
    text = "for item in items:\n    total += item.price"
    spans = engine.token_spans(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a < b for a, b in spans) and len(spans) == engine.count_tokens(text)


def test_a_seed_and_an_anchor_both_fit_with_every_fixed_position_kept(engine):
    seed = "value = compute(alpha, beta, gamma)"
    seed_ids = engine.format.encode(seed)
    anchor = ") + offset  # trailing"
    request = InfillRequest(
        prefix=PREFIX, suffix=SUFFIX, seed_canvas=seed, fixed_positions=tuple(range(len(seed_ids))),
        anchor=anchor, max_steps=2, max_new_tokens=64,
    )  # fmt: skip
    result = engine.infill(request)
    assert list(result.candidates[0].token_ids[: len(seed_ids)]) == seed_ids


def test_min_new_tokens_keeps_eos_out_of_the_first_positions(engine):
    # A bias that makes EOS win everywhere: only the positions min_tokens protects hold anything else.
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=1))
    eos = engine.format.special.eos
    favour_eos = engine.bias.clone()
    favour_eos[eos] = 60.0
    generator = torch.Generator().manual_seed(0)
    init = noise_canvas(1, 16, favour_eos.shape[0], generator)
    spec = CanvasSpec(init=init, fixed=torch.zeros(1, 16, dtype=torch.bool), min_tokens=2)
    settings = SamplerSettings(max_steps=3)
    outcome = denoise(
        engine.backbone, engine.prompt_cache.cache, spec, settings, favour_eos, engine.eos_ids, generator
    )
    tokens = outcome.tokens[0].tolist()
    assert eos not in tokens[:2] and tokens[2:] == [eos] * 14
    with pytest.raises(ValueError, match="min_new_tokens"):
        InfillRequest(prefix="x", min_new_tokens=5, max_new_tokens=4)


def test_enough_converged_rows_end_the_canvas(engine):
    # Row 0 is wholly fixed (a draft the model cannot change): stable from its first step and with no
    # live position left to doubt. Row 1 is noise and will not converge in 8 steps.
    engine.infill(InfillRequest(prefix="x = ", max_new_tokens=4, max_steps=1))  # a prompt in the cache
    generator = torch.Generator().manual_seed(0)
    init = noise_canvas(2, 16, engine.bias.shape[0], generator)
    fixed = torch.zeros(2, 16, dtype=torch.bool)
    fixed[0] = True
    settings = SamplerSettings(max_steps=8)
    for enough, steps in ((1, 1), (0, 8)):
        spec = CanvasSpec(init=init.clone(), fixed=fixed, guess=init.clone(), enough=enough)
        outcome = denoise(
            engine.backbone,
            engine.prompt_cache.working_cache(2),
            spec,
            settings,
            engine.bias,
            engine.eos_ids,
            generator,
        )
        assert (outcome.steps, outcome.reason) == (steps, "converged" if enough else "max_steps")
        assert outcome.tokens[0].tolist() == init[0].tolist()


def test_a_sticky_row_shows_its_draft_until_the_model_is_sure_of_a_replacement(engine):
    # Row 0 is a sticky draft, row 1 fresh noise. The random tiny model is unsure everywhere: after one
    # step it may have accepted a replacement at its single lowest-entropy position, no more.
    engine.infill(InfillRequest(prefix=PREFIX, suffix=SUFFIX, max_new_tokens=16, max_steps=1))
    generator = torch.Generator().manual_seed(0)
    init = noise_canvas(2, 16, engine.bias.shape[0], generator)
    fixed = torch.zeros(2, 16, dtype=torch.bool)
    sticky = torch.zeros(2, 16, dtype=torch.bool)
    sticky[0] = True
    cache = engine.prompt_cache.working_cache(2)

    def run(bias: torch.Tensor):
        spec = CanvasSpec(init=init.clone(), fixed=fixed, sticky=sticky, guess=init.clone())
        settings = SamplerSettings(max_steps=1)
        return denoise(engine.backbone, cache, spec, settings, bias, engine.eos_ids, generator)

    unsure = run(engine.bias)
    assert int((unsure.tokens[0] != init[0]).sum()) <= 1
    # A bias that makes EOS certain everywhere: the model is sure, and the draft is replaced.
    eos = engine.format.special.eos
    certain = engine.bias.clone()
    certain[eos] = 60.0
    assert run(certain).tokens[0].tolist() == [eos] * 16
