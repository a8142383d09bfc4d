"""The model's forward passes, named: the one place that reaches into DiffusionGemma's submodules.

The sampler, the prompt cache, autoregressive decoding and the trainer call these instead of
`model.model.encoder` and friends, so a change in transformers' module layout is fixed here once.
Shapes: B = batch, T = tokens, C = canvas length, H = hidden size, V = vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import Cache


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    return logits if not cap else torch.tanh(logits / cap) * cap


def softcap_(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """`softcap` in place on a fresh tensor outside autograd, as cap * (2 sigmoid(2 logits / cap) - 1):
    the same within fp32 rounding, and faster on a CPU for one canvas's logits, where tanh is slow
    (for training's much larger logits the extra passes cost more than tanh, so `softcap` keeps it)."""
    return torch.sigmoid_(logits.mul_(2.0 / cap)).mul_(2.0 * cap).sub_(cap)


def encode(
    model: torch.nn.Module,
    ids: torch.Tensor,  # [B, T]
    cache: Cache,
    positions: torch.Tensor | None = None,  # [B, T]; default: after what the cache holds
    attention_mask: torch.Tensor | None = None,  # [B, T] bool, real tokens
) -> torch.Tensor:
    """Run the causal encoder over `ids`, appending their keys and values to `cache`; [B, T, H]."""
    if positions is None:
        start = cache.get_seq_length()
        positions = torch.arange(start, start + ids.shape[1], device=ids.device)[None]
    out = model.model.encoder(
        input_ids=ids, attention_mask=attention_mask, position_ids=positions, cache=cache
    )
    return out.last_hidden_state


def lm_logits(model: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Next-token logits of encoder states ([..., H] -> [..., V]), soft-capped as the model does, fp32."""
    cap = model.config.get_text_config().final_logit_softcapping
    return softcap(model.lm_head(hidden).float(), cap)


def decoder_masks(model: torch.nn.Module, canvas: torch.Tensor, cache: Cache):
    """The decoder's attention masks for a canvas ([B, C]) over `cache`: built once per canvas."""
    return model.model.decoder.create_diffusion_decoder_attention_mask(
        model.config, canvas[..., None], cache, None
    )


def denoise_logits(
    model: torch.nn.Module,
    canvas: torch.Tensor,  # [B, C]
    cache: Cache,
    positions: torch.Tensor,  # [B or 1, C]
    attention_mask=None,  # from `decoder_masks`, or a [B, P + C] bool mask
    self_conditioning: torch.Tensor | None = None,  # [B, C, V] logits of the previous step
) -> torch.Tensor:
    """One bidirectional decoder pass over the canvas against the encoded prompt: [B, C, V]."""
    out = model(
        decoder_input_ids=canvas,
        cache=cache,
        self_conditioning_logits=self_conditioning,
        decoder_attention_mask=attention_mask,
        decoder_position_ids=positions,
    )
    return out.logits


def new_cache(model: torch.nn.Module) -> Cache:
    from transformers import DynamicCache

    return DynamicCache(config=model.config.get_text_config(decoder=True))
