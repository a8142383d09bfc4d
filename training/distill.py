"""Canvas targets written by the model's own next-token head: few-step distillation of AR into the canvas.

A real middle is one of many a prompt allows, so a canvas written from noise in one step blends them;
the head's greedy continuation is one function of the prompt, which a canvas can learn to write at once.
"""

from __future__ import annotations

import torch

from engine.forward import encode, lm_logits, new_cache
from engine.sampler import suppression_bias


@torch.no_grad()
def greedy_targets(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,  # [B, P], left-padded
    prompt_mask: torch.Tensor,  # [B, P] bool, real tokens
    prompt_positions: torch.Tensor,  # [B, P]
    canvas_positions: torch.Tensor,  # [B, C]: where the middle's tokens sit
    eos: int,
    suppressed: tuple[int, ...] = (),
) -> torch.Tensor:
    """Each row's greedy continuation of its prompt by the next-token head, C tokens, EOS after its
    first EOS, never a `suppressed` token (as the engine's greedy draft); [B, C]."""
    rows, length = canvas_positions.shape
    # A cache of its own: the step's encoder cache is in the autograd graph and holds the real middle.
    cache = new_cache(model)
    last = encode(model, prompt_ids, cache, positions=prompt_positions, attention_mask=prompt_mask)[:, -1]
    bias = suppression_bias(model.config.get_text_config().vocab_size, suppressed, prompt_ids.device)
    out = torch.full((rows, length), eos, dtype=torch.long, device=prompt_ids.device)
    done = torch.zeros(rows, dtype=torch.bool, device=prompt_ids.device)
    mask = prompt_mask
    for i in range(length):
        token = torch.where(done, eos, (lm_logits(model, last) + bias).argmax(dim=-1))
        out[:, i] = token
        done |= token == eos
        if bool(done.all()) or i == length - 1:
            break
        mask = torch.cat([mask, torch.ones(rows, 1, dtype=torch.bool, device=mask.device)], dim=1)
        hidden = encode(
            model, token[:, None], cache, positions=canvas_positions[:, i : i + 1], attention_mask=mask
        )
        last = hidden[:, -1]
    return out
