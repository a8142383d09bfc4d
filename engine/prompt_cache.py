"""The encoder's KV cache, kept across requests.

Consecutive completion requests share most of their prompt (the prompt layout puts what changes
while typing at its end), so the cache of the previous request is cropped to the longest common
prefix of the two token sequences and only the rest is encoded. Full-attention layers crop freely;
a layer that cannot be cropped (a sliding window past its size) makes us start afresh.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch

from engine.api import AllocationWindow

if TYPE_CHECKING:
    from transformers import Cache, DynamicCache

    from engine.backbone import Backbone


# A prefill of this many new tokens or more runs in the allocation window (its hundreds of large blocks
# are cheaper from the heap than mapped one by one); fewer, as while typing, allocate little.
WINDOW_TOKENS = 128


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptCache:
    """Owns one DynamicCache and the token ids it holds. Not thread-safe: one worker uses it."""

    def __init__(self, backbone: Backbone) -> None:
        self.backbone = backbone
        self.tokens: list[int] = []
        self.cache: DynamicCache = backbone.new_cache()
        self.window: AllocationWindow = nullcontext  # where a long prefill's allocations run (the server's)

    def reset(self) -> None:
        self.tokens = []
        self.cache = self.backbone.new_cache()

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
        new = torch.tensor([ids[reused:]])
        with self.window() if new.shape[1] >= WINDOW_TOKENS else nullcontext():
            hidden = self.backbone.encode(new, self.cache)
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

    def drop_unrecorded(self) -> None:
        """Crop what was appended to the kept cache and not recorded (a draft written ahead of the
        canvas), so that it holds exactly `tokens` again."""
        extra = self.cache.get_seq_length() - len(self.tokens)
        if extra <= 0:
            return
        try:
            self.cache.crop(-extra)
        except (RuntimeError, ValueError):  # a layer that cannot roll back: encode the prompt again
            tokens = self.tokens
            self.reset()
            self.encode(tokens)

    def record(self, cache: Cache, ids: list[int]) -> None:
        """Note tokens a caller appended to the kept cache (through the backbone's `encode`)."""
        if cache is self.cache:
            self.tokens.extend(ids)
