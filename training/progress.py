"""Progress of long commands: a bar with rate and time left on a terminal, plain log lines otherwise.

Used by evaluation, the typing benchmark, training and corpus builds (a log file or CI keeps lines,
not carriage returns).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
logger = logging.getLogger("progress")


def progress(items: Iterable[T], total: int | None, what: str, unit: str = "row") -> Iterator[T]:
    """Yield `items`, showing how far along they are."""
    if sys.stderr.isatty():
        yield from tqdm(items, total=total, desc=what, unit=unit, dynamic_ncols=True)
        return
    started, every = time.monotonic(), max(1, (total or 100) // 10)
    for done, item in enumerate(items, 1):
        yield item
        if done % every == 0 or done == total:
            elapsed = time.monotonic() - started
            rate = done / elapsed if elapsed > 0 else 0.0
            left = f", {(total - done) / rate:.0f} s left" if total and rate else ""
            logger.info("%s: %d/%s %ss (%.2f/s%s)", what, done, total or "?", unit, rate, left)
