"""The prompt's keys and values per layer for the fused layers, as transformers' `DynamicCache` keeps
them (a sliding layer holds its last window - 1 tokens), without importing transformers on a CPU
server's path to its first completion.

Only what the engine calls is here: `update`, `get_seq_length`, `crop` (a negative count; a sliding
layer past its window cannot roll back and raises, as transformers' does) and
`batch_repeat_interleave`; tests/test_kv_cache.py checks each against `DynamicCache`.
"""

from __future__ import annotations

import torch


class KVLayer:
    """A full-attention layer's keys and values [B, kv, T, D]: every token so far."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append `keys` and `values`; the layer's whole keys and values after them."""
        if self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=-2)
            values = torch.cat([self.values, values], dim=-2)
        self.keys, self.values = keys, values
        return keys, values

    def get_seq_length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def crop(self, remove: int) -> None:
        if remove > 0:
            raise ValueError(f"crop takes a negative count of tokens to remove, not {remove}")
        if remove and self.keys is not None:
            self.keys, self.values = self.keys[..., :remove, :], self.values[..., :remove, :]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length():
            self.keys = self.keys.repeat_interleave(repeats, dim=0)
            self.values = self.values.repeat_interleave(repeats, dim=0)


class SlidingKVLayer(KVLayer):
    """A sliding-window layer: keeps the last `window - 1` tokens, and counts every token seen."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self.seen = 0

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen += keys.shape[-2]
        full_keys, full_values = super().update(keys, values)
        self.keys = full_keys[:, :, -self.window + 1 :, :]
        self.values = full_values[:, :, -self.window + 1 :, :]
        return full_keys, full_values

    def get_seq_length(self) -> int:
        return self.seen

    def crop(self, remove: int) -> None:
        if self.seen >= self.window:
            raise RuntimeError("a sliding layer past its window cannot roll back: encode the prompt again")
        super().crop(remove)
        self.seen = super().get_seq_length()


class KVCache:
    """One `KVLayer` per layer: `windows[i]` is layer i's sliding window, None for full attention."""

    def __init__(self, windows: list[int | None]) -> None:
        self.layers: list[KVLayer] = [KVLayer() if w is None else SlidingKVLayer(w) for w in windows]

    def update(
        self, keys: torch.Tensor, values: torch.Tensor, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.layers[layer].update(keys, values)

    def get_seq_length(self, layer: int = 0) -> int:
        return self.layers[layer].get_seq_length()

    def crop(self, remove: int) -> None:
        for layer in self.layers:
            layer.crop(remove)

    def batch_repeat_interleave(self, repeats: int) -> None:
        for layer in self.layers:
            layer.batch_repeat_interleave(repeats)
