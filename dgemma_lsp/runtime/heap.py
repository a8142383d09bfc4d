"""Give the heap's free pages back to the system while the model worker is idle.

A completion allocates and frees blocks of every size (logits, oneDNN's buffers, shapes that change
with each prompt), and glibc keeps freed pages inside its heap: under a typing storm the server's
memory kept growing. Trimming when the worker has been idle a moment returns them without putting a
system call on any block a denoising step allocates (README, "Memory").
"""

from __future__ import annotations

import ctypes
import logging
import platform
from collections.abc import Callable

logger = logging.getLogger(__name__)


def heap_trimmer() -> Callable[[], None] | None:
    """`malloc_trim(0)` of the C library where it is glibc; None elsewhere (nothing to do)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # a static build without it
        logger.debug("malloc_trim is not available: freed heap pages stay with the process")
        return None
    trim.argtypes = [ctypes.c_size_t]

    def release() -> None:
        trim(0)

    return release
