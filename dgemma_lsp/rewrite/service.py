"""Runs whole-block rewrites and next-edit suggestions on the model worker.

The pure parts (which block, the request, the smallest diff) are in targets.py; this module only
adds the scheduling: a rewrite is a job of its own per document (typing does not cancel it, a newer
rewrite does) and its answer is dropped when the document moved on meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from dgemma_lsp.documents.edit_history import preamble
from dgemma_lsp.documents.workspace import OpenDocument
from dgemma_lsp.rewrite.targets import Change, Target, rewrite_request, smallest_changes
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.scheduler import Scheduler, Superseded
from engine import Engine


@dataclass(frozen=True)
class Rewritten:
    changes: list[Change]
    confidence: float  # the rewrite's mean token probability


class RewriteService:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def rewrite(
        self,
        opened: OpenDocument,
        target: Target,
        options: Options,
        engine: Engine,
        is_current: Callable[[], bool],
        with_recent_edits: bool = False,
    ) -> Rewritten | None:
        """Denoise `target` again; None when superseded, stale, or the model wrote nothing."""
        document = opened.document
        budget = options.rewrite.latency_budget_ms
        recent = preamble(opened.history.recent(), document.language_id) if with_recent_edits else ""
        request = rewrite_request(
            document.lines, target, opened.spec, document.language_id, engine.count_tokens,
            options.context, options.rewrite.strength_percent / 100,
            time.monotonic() + budget / 1000 if budget else None, recent,
        )  # fmt: skip
        future = self.scheduler.submit(
            f"{document.uri}#rewrite", lambda cancel: engine.infill(replace(request, cancel=cancel))
        )
        try:
            result = await future
        except Superseded:
            return None
        if not is_current() or not result.candidates:
            return None
        best = result.candidates[0]
        return Rewritten(changes=smallest_changes(target, best.text), confidence=best.mean_confidence)
