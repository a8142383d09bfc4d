"""Create and save checkpoints of our own models: config, weights, tokenizer and generation config."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import DiffusionGemmaForBlockDiffusion
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)

from engine import fused_config
from engine.loading import text_config
from engine.sampler import SamplerSettings
from engine.tokenizer import BOI, BOS, EOI, EOS, IMAGE, PAD, UNK
from training.shapes import ModelShape, diffusion_gemma_config


def special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    names = {"pad": PAD, "eos": EOS, "bos": BOS, "image": IMAGE, "boi": BOI, "eoi": EOI}
    return {key: tokenizer.token_to_id(token) for key, token in names.items()}


def new_model(shape: ModelShape, tokenizer: Tokenizer, seed: int = 0) -> DiffusionGemmaForBlockDiffusion:
    if tokenizer.get_vocab_size() > shape.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.get_vocab_size()} tokens, shape only {shape.vocab_size}")
    config = diffusion_gemma_config(shape, special_ids(tokenizer))
    torch.manual_seed(seed)
    return DiffusionGemmaForBlockDiffusion(config)


def generation_config(tokenizer: Tokenizer, settings: SamplerSettings) -> DiffusionGemmaGenerationConfig:
    # A fresh model's generation config has no eos/pad (generate would never stop): set them here.
    ids = special_ids(tokenizer)
    return DiffusionGemmaGenerationConfig(
        max_denoising_steps=settings.max_steps,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=settings.entropy_bound),
        t_min=settings.t_min,
        t_max=settings.t_max,
        stability_threshold=settings.stability_steps,
        confidence_threshold=settings.confidence_threshold,
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        bos_token_id=ids["bos"],
    )


def save_checkpoint(
    model: DiffusionGemmaForBlockDiffusion,
    tokenizer: Tokenizer,
    folder: Path,
    settings: SamplerSettings | None = None,
    dtype: torch.dtype | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.generation_config = generation_config(tokenizer, settings or SamplerSettings())
    to_save = model if dtype is None else cast_copy(model, dtype)
    to_save.save_pretrained(folder, safe_serialization=True, max_shard_size="15MB")
    tokenizer.save(str(folder / "tokenizer.json"))
    # What transformers and vLLM read to load tokenizer.json as it is (without it they build a Gemma
    # tokenizer over our vocabulary): a team serving the checkpoint needs it.
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=1))
    # What the fused layers read, resolved now from the config.json just written: a CPU server then
    # loads the folder without importing transformers.
    fused_config.write(folder, text_config(json.loads((folder / "config.json").read_text())))
    return folder


def tokenizer_config() -> dict[str, str]:
    """tokenizer_config.json: load tokenizer.json as a fast tokenizer with our special tokens."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
    }


def cast_copy(model: DiffusionGemmaForBlockDiffusion, dtype: torch.dtype) -> DiffusionGemmaForBlockDiffusion:
    copy = DiffusionGemmaForBlockDiffusion(model.config)
    copy.load_state_dict(model.state_dict())
    copy.generation_config = model.generation_config
    return copy.to(dtype)
