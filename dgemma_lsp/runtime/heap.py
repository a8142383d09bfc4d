"""Keep the server's heap from fragmenting: glibc's mmap threshold held at its starting value.

glibc serves blocks of 128 KB and more with mmap, but raises that threshold each time such a block
is freed (up to 32 MB), after which they come from the heap. A completion allocates and frees them
in sizes that change with every prompt (oneDNN's buffers, activations, logits), and the heap they
fragment kept growing under a typing storm; mapped blocks go back to the system when freed
(docs/performance.md, "Memory").

A prompt's cold prefill is the exception: hundreds of large blocks, each mapped and faulted in page by
page, took it far longer than from the heap. It runs in a window (`HeldHeap.window`) with the
threshold raised, after which the threshold is held again and `malloc_trim` gives the pages the
prefill freed back to the system.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value
WINDOW_THRESHOLD = 64 * 1024 * 1024  # in a window: every block a prefill allocates comes from the heap
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@dataclass(frozen=True)
class HeldHeap:
    """glibc's mmap threshold, held at `size` by this process."""

    size: int
    libc: Any  # the C library, as ctypes loaded it

    @contextmanager
    def window(self) -> Iterator[None]:
        """Large blocks come from the heap inside; after it, the threshold is held again and the
        heap's free pages go back to the system (what the window freed; what it kept stays)."""
        self.libc.mallopt(_M_MMAP_THRESHOLD, WINDOW_THRESHOLD)
        try:
            yield
        finally:
            self.libc.mallopt(_M_MMAP_THRESHOLD, self.size)
            self.libc.malloc_trim(0)


def hold_mmap_threshold(size: int = MMAP_THRESHOLD) -> HeldHeap | None:
    """Fix glibc's mmap threshold at `size`; the held heap, or None where it was not held (other C
    libraries, or a threshold the user chose with MALLOC_MMAP_THRESHOLD_)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        if not libc.mallopt(_M_MMAP_THRESHOLD, size) or not hasattr(libc, "malloc_trim"):
            return None
    except (OSError, AttributeError):  # a static build without mallopt: glibc's behaviour stays
        logger.debug("mallopt is not available: the mmap threshold stays glibc's")
        return None
    return HeldHeap(size, libc)
