"""The encoder's KV cache, kept across requests.

Consecutive completion requests share most of their prompt (the prompt layout puts what changes
while typing at its end), so the cache of the previous request is cropped to the longest common
prefix of the two token sequences and only the rest is encoded. Full-attention layers crop freely;
a layer that cannot be cropped (a sliding window past its size) makes us start afresh.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from transformers import Cache, DynamicCache

from engine.forward import encode

if TYPE_CHECKING:
    from engine.fused_model import FusedModel


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptCache:
    """Owns one DynamicCache and the token ids it holds. Not thread-safe: one worker uses it."""

    def __init__(self, model: torch.nn.Module, fused: FusedModel | None = None) -> None:
        self.model = model
        self.fused = fused  # the encoder's layers in fewer operations, where they apply (a CPU)
        self.tokens: list[int] = []
        self.cache: DynamicCache = self._fresh()

    def _fresh(self) -> DynamicCache:
        return DynamicCache(config=self.model.config.get_text_config(decoder=True))

    def reset(self) -> None:
        self.tokens = []
        self.cache = self._fresh()

    @torch.inference_mode()
    def encode(self, ids: list[int]) -> tuple[int, torch.Tensor]:
        """Make the cache hold exactly `ids`.

        Returns how many leading tokens were reused, and the encoder's last hidden states
        of the tokens it encoded now ([1, n, H]).
        """
        # Keep at least one token to encode, so a repeated request still produces encoder outputs
        # when a caller asks for them (autoregressive decoding); costs one token.
        reused = min(common_prefix_length(self.tokens, ids), len(ids) - 1)
        if reused < len(self.tokens):
            try:
                self.cache.crop(reused - len(self.tokens))
            except (RuntimeError, ValueError):
                self.reset()
                reused = 0
        hidden = extend_cache(self.model, self.cache, torch.tensor([ids[reused:]]), self.fused)
        self.tokens = list(ids)
        return reused, hidden

    def working_cache(self, n: int) -> Cache:
        """The cache a request of n candidates denoises against and may extend.

        With one candidate it is the cache itself (call `record` for what gets appended);
        with more, a copy repeated n times, so the kept cache stays batch 1.
        """
        if n == 1:
            return self.cache
        copied = copy.copy(self.cache)
        copied.layers = [copy.copy(layer) for layer in self.cache.layers]
        copied.batch_repeat_interleave(n)
        return copied

    def record(self, cache: Cache, ids: list[int]) -> None:
        """Note tokens a caller appended to the kept cache through `extend_cache`."""
        if cache is self.cache:
            self.tokens.extend(ids)


@torch.inference_mode()
def extend_cache(
    model: torch.nn.Module, cache: Cache, ids: torch.Tensor, fused: FusedModel | None = None
) -> torch.Tensor:
    """Encode `ids` ([B, n]) after what `cache` holds; returns the encoder's last hidden states.
    With `fused` the encoder's layers run through it, otherwise through transformers' modules."""
    ids = ids.to(next(model.parameters()).device)
    if fused is None:
        return encode(model, ids, cache)  # [B, n, H]
    start = cache.get_seq_length()
    return fused.encode(ids, cache, torch.arange(start, start + ids.shape[1], device=ids.device)[None])
