"""Tensors over the vocabulary that a denoising step writes into again at every step and request.

A step's logits and the sampler's arrays over them ([B, C, V] fp32, 0.5 MB for one row of 16 tokens)
are larger than glibc's mmap threshold, which the server holds at 128 KB (`runtime/heap.py`): allocated
fresh, each one is mapped, faulted in page by page and unmapped again, at every step. Kept here, a
request of the usual shapes touches no new memory. Not thread-safe, like the engine that owns them.
"""

from __future__ import annotations

import math

import torch

# A buffer larger than this is not kept (a rewrite's long canvas): allocated for its call and freed.
MAX_KEPT_BYTES = 4 << 20


class Buffers:
    """Named buffers, each grown to the largest shape asked of it up to `max_kept_bytes`."""

    def __init__(self, max_kept_bytes: int = MAX_KEPT_BYTES) -> None:
        self.max_kept_bytes = max_kept_bytes
        self._kept: dict[str, torch.Tensor] = {}

    def get(
        self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str
    ) -> torch.Tensor:
        """A tensor of `shape` whose contents are undefined (the last user's), the same memory each time."""
        count = math.prod(shape)
        if count * dtype.itemsize > self.max_kept_bytes:
            return torch.empty(shape, dtype=dtype, device=device)
        kept = self._kept.get(name)
        if kept is None or kept.numel() < count or kept.dtype != dtype or kept.device != torch.device(device):
            kept = self._kept[name] = torch.empty(count, dtype=dtype, device=device)
        return kept[:count].view(shape)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._kept.values())
