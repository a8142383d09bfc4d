"""The server holds glibc's mmap threshold, unless the user chose one (the real C library, no mock)."""

from __future__ import annotations

import platform

import pytest

from dgemma_lsp.runtime.heap import hold_mmap_threshold


def test_a_threshold_the_user_set_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert hold_mmap_threshold() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_on_glibc_the_threshold_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert hold_mmap_threshold() is True
