"""Fidelity to the reference: our sampler against transformers' own `generate` on a random-weight
model of the released architecture (sliding and full attention layers, MoE, soft-capping), and the
Gemma 4 chat prompt against the chat template it comes from."""

from __future__ import annotations

import pytest
import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerFast
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)

from engine.backbone import ModuleBackbone
from engine.forward import new_cache
from engine.fused_model import FusedModel
from engine.prompts import CURSOR_MARK, INSTRUCTION, Gemma4ChatFormat
from engine.sampler import CanvasSpec, SamplerSettings, denoise, sample
from evaluation.gpu_bench import TINY_TEXT
from training.shapes import _TINY_VISION

CANVAS, PROMPT, EOS, PAD = 16, 24, 1, 0


@pytest.fixture(scope="module")
def released_shape() -> DiffusionGemmaForBlockDiffusion:
    torch.manual_seed(0)
    text = dict(TINY_TEXT, eos_token_id=EOS, pad_token_id=PAD, final_logit_softcapping=30.0)
    config = DiffusionGemmaConfig(text_config=text, vision_config=dict(_TINY_VISION), canvas_length=CANVAS)
    return DiffusionGemmaForBlockDiffusion(config).eval()


def reference(model, prompt: torch.Tensor, canvas: torch.Tensor, steps: int, **sampler) -> torch.Tensor:
    config = DiffusionGemmaGenerationConfig(
        max_denoising_steps=steps,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=sampler["entropy_bound"]),
        t_min=sampler["t_min"],
        t_max=sampler["t_max"],
        stability_threshold=sampler["stability_steps"],
        confidence_threshold=sampler["confidence_threshold"],
        max_new_tokens=CANVAS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    with torch.inference_mode():
        out = model.generate(input_ids=prompt, decoder_input_ids=canvas.clone(), generation_config=config)
    sequences = out.sequences if hasattr(out, "sequences") else out
    return sequences[:, PROMPT:]


def ours(
    model, prompt: torch.Tensor, canvas: torch.Tensor, steps: int, fused: bool = False, **sampler
) -> torch.Tensor:
    backbone = FusedModel.of_module(model) if fused else ModuleBackbone(model)
    cache = new_cache(model)
    backbone.encode(prompt, cache)
    vocab = model.config.get_text_config().vocab_size
    spec = CanvasSpec(init=canvas.clone(), fixed=torch.zeros_like(canvas, dtype=torch.bool))
    settings = SamplerSettings(max_steps=steps, **sampler)
    bias, eos = torch.zeros(vocab), torch.tensor([EOS])
    out = denoise(backbone, cache, spec, settings, bias, eos, torch.Generator())
    tokens = out.tokens.clone()
    after_eos = (tokens == EOS).cumsum(-1) - (tokens == EOS).long() > 0  # as generate pads them
    return tokens.masked_fill(after_eos, PAD)


@pytest.mark.parametrize("fused", [False, True], ids=["transformers-modules", "fused-step"])
def test_our_sampler_and_generate_agree_token_for_token_when_deterministic(released_shape, fused):
    # Deterministic: every position accepted each step, temperatures so low that sampling is argmax,
    # and no early stop. Any difference in the schedule, the self-conditioning input (generate feeds
    # the temperature-scaled logits back), the masks or the cache would change the tokens.
    sampler = dict(entropy_bound=1e9, t_max=2e-5, t_min=1e-5, stability_steps=100, confidence_threshold=1e-9)
    g = torch.Generator().manual_seed(1)
    for trial in range(3):
        prompt = torch.randint(2, 512, (1, PROMPT), generator=g)
        canvas = torch.randint(2, 512, (1, CANVAS), generator=g)
        steps = 4 + trial
        expected = reference(released_shape, prompt, canvas, steps, **sampler)
        assert ours(released_shape, prompt, canvas, steps, fused, **sampler).tolist() == expected.tolist()


def test_sampling_by_inverse_cdf_draws_what_multinomial_draws():
    # Where the sampling differs (our inverse CDF against torch.multinomial), the distributions agree.
    probs = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.04, 0.01])
    draws = 40_000
    ours_counts = torch.bincount(
        sample(probs.expand(1, draws, -1), torch.Generator().manual_seed(0)).flatten(), minlength=6
    )
    theirs = torch.bincount(torch.multinomial(probs, draws, replacement=True), minlength=6)
    total_variation = 0.5 * (ours_counts / draws - theirs / draws).abs().sum()
    assert total_variation < 0.02, (ours_counts, theirs)


# Gemma 4's chat layout (the turn markers transformers' serving code anchors on): the released
# tokenizer cannot be downloaded here, so this template stands in for the one it ships.
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] | trim }}<turn|>\n{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def test_the_chat_prompt_is_what_the_chat_template_produces(tiny_engine):
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tiny_engine.format.tokenizer, bos_token="<bos>", eos_token="<eos>"
    )
    hf.add_special_tokens({"additional_special_tokens": ["<|turn>", "<turn|>"]})
    hf.chat_template = GEMMA4_TEMPLATE
    fmt = Gemma4ChatFormat(hf)
    prefix, suffix = "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
    content = INSTRUCTION.format(language="python", mark=CURSOR_MARK, prefix=prefix, suffix=suffix)
    expected = hf.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=True, add_generation_prompt=True
    )
    expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
    assert fmt.prompt_ids(prefix, suffix, "python", 4096) == expected
    assert hf.convert_tokens_to_ids("<turn|>") in fmt.eos_ids  # the turn's end stops the middle
