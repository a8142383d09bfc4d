"""The fused layers compute what transformers' DiffusionGemma computes: the decoder step's logits and the
encoder prefill's hidden states and cached keys and values (within float rounding) on a random-weight
model of the released architecture (sliding and full attention layers, separate and shared values, MoE,
soft-capping) in fp32 and on the bundled bf16 model, with and without self-conditioning, over several
rows and prompts longer than the sliding window."""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest
import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

from engine.forward import decoder_masks, denoise_logits, new_cache, softcap_
from engine.fused_model import FusedModel, unsupported_reason
from engine.prompt_cache import extend_cache
from evaluation.gpu_bench import TINY_TEXT
from training.shapes import _TINY_VISION

BUNDLED = Path(__file__).parent.parent / "engine" / "default"


def released_shape(tied: bool = True) -> DiffusionGemmaForBlockDiffusion:
    torch.manual_seed(0)
    text = dict(TINY_TEXT, final_logit_softcapping=30.0, tie_word_embeddings=tied)
    config = DiffusionGemmaConfig(
        text_config=text, vision_config=dict(_TINY_VISION), canvas_length=16, tie_word_embeddings=tied
    )
    return DiffusionGemmaForBlockDiffusion(config).eval()


def compare(model, prompt: int, canvas: int, rows: int, tolerance: float) -> None:
    vocab = model.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(prompt + canvas + rows)
    cache = new_cache(model)
    extend_cache(model, cache, torch.randint(2, vocab, (1, prompt), generator=g))
    if rows > 1:
        cache.batch_repeat_interleave(rows)
    tokens = torch.randint(2, vocab, (rows, canvas), generator=g)
    positions = torch.arange(prompt, prompt + canvas)[None]
    with torch.inference_mode():
        masks = decoder_masks(model, tokens, cache)
        first = denoise_logits(model, tokens, cache, positions, masks)
        second = denoise_logits(model, tokens, cache, positions, masks, first)
        step = FusedModel(model).for_canvas(cache, positions, rows)
        assert (step(tokens) - first).abs().max() <= tolerance
        assert (step(tokens, first) - second).abs().max() <= tolerance
        again = step(tokens.flip(0), first.flip(0))  # a step reuses the canvas's buffers
        assert (
            again - denoise_logits(model, tokens.flip(0), cache, positions, masks, first.flip(0))
        ).abs().max() <= tolerance
        # Fusing leaves the model's own modules computing what they did (its weights became views).
        assert torch.equal(denoise_logits(model, tokens, cache, positions, masks, first), second)


@pytest.mark.parametrize(("prompt", "rows"), [(24, 1), (24, 3), (100, 2)])
def test_fused_step_matches_transformers_on_the_released_architecture(prompt, rows):
    compare(released_shape(), prompt, 16, rows, tolerance=1e-4)


@pytest.mark.parametrize(("canvas", "rows"), [(16, 1), (32, 3)])
def test_fused_step_matches_transformers_on_the_bundled_bf16_model(canvas, rows):
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16).eval()
    compare(model, 200, canvas, rows, tolerance=1e-3)


def compare_prefill(model, prompt: int, extension: int, rows: int, tolerance: float) -> None:
    """The encoder through the fused layers against transformers' encoder: the same hidden states and
    the same cache, for a prompt and then `extension` more tokens on `rows` rows."""
    vocab = model.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(prompt + extension + rows)
    first = torch.randint(2, vocab, (1, prompt), generator=g)
    more = torch.randint(2, vocab, (rows, extension), generator=g)
    fused = FusedModel(model)
    caches = {"reference": new_cache(model), "fused": new_cache(model)}
    with torch.inference_mode():
        hidden = {name: [extend_cache(model, cache, first, fused if name == "fused" else None)]
                  for name, cache in caches.items()}  # fmt: skip
        for name, cache in caches.items():
            if rows > 1:
                cache.batch_repeat_interleave(rows)
            if extension:
                hidden[name].append(extend_cache(model, cache, more, fused if name == "fused" else None))
    for want, got in zip(hidden["reference"], hidden["fused"], strict=True):
        assert want.shape == got.shape and (want - got).abs().max() <= tolerance
    reference, ours = caches["reference"], caches["fused"]
    assert ours.get_seq_length() == reference.get_seq_length() == prompt + extension
    for want, got in zip(reference.layers, ours.layers, strict=True):
        assert want.keys.shape == got.keys.shape and (want.keys - got.keys).abs().max() <= tolerance
        assert (want.values - got.values).abs().max() <= tolerance


@pytest.mark.parametrize(
    ("prompt", "extension", "rows"),
    [(24, 0, 1), (100, 0, 1), (40, 30, 1), (24, 1, 1), (90, 1, 1), (40, 8, 2)],
)
def test_fused_prefill_matches_transformers_encoder(prompt, extension, rows):
    # 100 and 40 + 30 tokens pass the sliding window (64); one token is autoregressive decoding's step;
    # two rows extend a copied cache as a multi-canvas completion does.
    compare_prefill(released_shape(), prompt, extension, rows, tolerance=1e-4)


def test_fused_prefill_matches_transformers_encoder_on_the_bundled_bf16_model():
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16).eval()
    compare_prefill(model, 300, 16, 1, tolerance=1e-3)


def test_the_engine_prefills_and_decodes_through_the_fused_layers_on_a_cpu(tiny_engine):
    assert tiny_engine.fused is not None and tiny_engine.prompt_cache.fused is tiny_engine.fused


def test_a_finished_canvas_step_is_freed_at_once():
    # A reference cycle would keep each canvas's key and value buffers until the garbage collector
    # runs: measured, that made a 3-row step's setup 10x slower.
    model = released_shape()
    cache = new_cache(model)
    extend_cache(model, cache, torch.arange(2, 30)[None])
    step = FusedModel(model).for_canvas(cache, torch.arange(28, 44)[None], 3)
    step(torch.arange(2, 18).repeat(3, 1))
    freed = weakref.ref(step)
    del step
    assert freed() is None


def test_softcap_in_place_is_tanh_within_rounding():
    logits = torch.randn(4, 1000) * 40
    expected = torch.tanh(logits / 30.0) * 30.0
    assert (softcap_(logits.clone(), 30.0) - expected).abs().max() < 1e-4


def test_models_the_fused_step_does_not_cover_are_named():
    model = released_shape()
    assert unsupported_reason(model) is None
    model.config.text_config.use_clipped_linears = True
    assert unsupported_reason(model) == "clipped linears"
    with pytest.raises(ValueError, match="clipped linears"):
        FusedModel(model)


def test_a_head_not_tied_to_the_embedding_keeps_transformers_modules():
    model = released_shape(tied=False)
    assert model.lm_head.weight.data_ptr() != model.model.decoder.embed_tokens.weight.data_ptr()
    assert unsupported_reason(model) == "a head not tied to the embedding"
