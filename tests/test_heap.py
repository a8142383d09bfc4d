"""The server holds glibc's mmap threshold, unless the user chose one, and opens a window for a long
prefill's large blocks (the real C library and engine, no mock)."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys
from contextlib import contextmanager

import pytest

from dgemma_lsp.runtime.heap import hold_mmap_threshold
from engine import load_engine
from engine.prompt_cache import WINDOW_TOKENS

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


def test_a_threshold_the_user_set_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert hold_mmap_threshold() is None


# Run in a fresh interpreter: a heap that earlier tests fragmented may serve a block from its free
# chunks whatever the threshold says.
WINDOW_CHECK = """
import ctypes
from dgemma_lsp.runtime.heap import hold_mmap_threshold


class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in names.split()]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
mapped = lambda: libc.mallinfo2().hblks  # the blocks glibc serves with mmap
heap = hold_mmap_threshold()
before = mapped()
held = [bytearray(1 << 20) for _ in range(8)]
counts = [mapped() - before]
del held
with heap.window():
    windowed = [bytearray(1 << 20) for _ in range(8)]
    counts.append(mapped() - before)
del windowed
again = [bytearray(1 << 20) for _ in range(8)]
counts.append(mapped() - before)
print(counts)
"""


@glibc_only
def test_blocks_are_mapped_while_held_and_come_from_the_heap_in_a_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("mallinfo2 is glibc 2.33's")
    run = subprocess.run([sys.executable, "-c", WINDOW_CHECK], capture_output=True, text=True, check=True)
    # 1 MB blocks: mapped while held, from the heap in the window, mapped again after it
    assert run.stdout.split() == ["[8,", "0,", "8]"]


def test_only_a_long_prefill_runs_in_the_window(tiny_model_dir) -> None:
    engine = load_engine(str(tiny_model_dir), device="cpu")
    opened = []

    @contextmanager
    def window():
        opened.append(len(engine.prompt_cache.tokens))
        yield

    engine.use_allocation_window(window)
    ids = list(range(10, 10 + 2 * WINDOW_TOKENS))
    engine.prompt_cache.encode(ids)  # cold: every token is new
    engine.prompt_cache.encode(ids + [5, 6, 7])  # typing: three new tokens
    assert len(opened) == 1
