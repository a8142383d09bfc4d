"""Keep the server's heap from fragmenting: glibc's mmap threshold held at its starting value.

glibc serves blocks of 128 KB and more with mmap, but raises that threshold each time such a block
is freed (up to 32 MB), after which they come from the heap. A completion allocates and frees them
in sizes that change with every prompt (oneDNN's buffers, activations, logits), and the heap they
fragment kept growing under a typing storm; mapped blocks go back to the system when freed
(README, "Memory").
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

logger = logging.getLogger(__name__)

MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def hold_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `size`; whether it did (not on other C libraries, nor when the
    user chose one with MALLOC_MMAP_THRESHOLD_)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or platform.libc_ver()[0] != "glibc":
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, size))
    except (OSError, AttributeError):  # a static build without mallopt: glibc's behaviour stays
        logger.debug("mallopt is not available: the mmap threshold stays glibc's")
        return False
