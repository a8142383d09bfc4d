"""Runs whole-block rewrites and next-edit suggestions on the model worker.

The pure parts (which block, the request, the smallest diff) are in `rewrite`; this module only
adds the scheduling: a rewrite is a job of its own per document (typing does not cancel it, a newer
rewrite does) and its answer is dropped when the document moved on meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from dgemma_lsp.completion import context_options
from dgemma_lsp.edit_history import EditHistory, preamble
from dgemma_lsp.options import Options
from dgemma_lsp.positions import LineIndex
from dgemma_lsp.rewrite import Change, Target, rewrite_request, smallest_changes
from dgemma_lsp.scheduler import Scheduler, Superseded
from dgemma_lsp.workspace import Snapshot
from engine import Engine


@dataclass(frozen=True)
class Rewritten:
    changes: list[Change]
    confidence: float  # the rewrite's mean token probability


def next_edit_target(lines: LineIndex, cursor: int, count: int) -> Target | None:
    """The `count` lines from the cursor's: where a next edit may land."""
    row = lines.row_of(cursor)
    start, end = lines.line_start(row), lines.line_end(min(lines.line_count - 1, row + count - 1))
    text = lines.text[start:end]
    return Target(start=start, end=end, text=text) if text.strip() else None


class Rewriter:
    def __init__(self, scheduler: Scheduler, history: EditHistory) -> None:
        self.scheduler = scheduler
        self.history = history

    async def rewrite(
        self,
        uri: str,
        snapshot: Snapshot,
        target: Target,
        options: Options,
        engine: Engine,
        is_current: Callable[[], bool],
        with_recent_edits: bool = False,
    ) -> Rewritten | None:
        """Denoise `target` again; None when superseded, stale, or the model wrote nothing."""
        document = snapshot.document
        budget = options.rewrite.latency_budget_ms
        recent = preamble(self.history.recent(uri), document.language_id) if with_recent_edits else ""
        request = rewrite_request(
            document.lines, target, snapshot.spec, document.language_id, engine.count_tokens,
            context_options(options), options.rewrite.strength_percent / 100,
            time.monotonic() + budget / 1000 if budget else None, recent,
        )  # fmt: skip
        future = self.scheduler.submit(
            f"{uri}#rewrite", lambda cancel: engine.infill(replace(request, cancel=cancel))
        )
        try:
            result = await future
        except Superseded:
            return None
        if not is_current() or not result.candidates:
            return None
        best = result.candidates[0]
        return Rewritten(changes=smallest_changes(target, best.text), confidence=best.mean_confidence)
