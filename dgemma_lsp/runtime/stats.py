"""What the server measured about its own answers, for `dgemma/stats` and the benchmark.

One small record per answered completion, in a bounded ring, summarised on demand: latencies by
mode, the server's overhead (its time outside the engine and the worker queue), the engine's own
work outside the model's forward passes (tokenizing, the sampler's math), where answers came from,
denoising steps, tokens per forward pass and the share of prompt tokens whose KV was reused.
"""

from __future__ import annotations

import resource
import sys
from collections import Counter, deque
from dataclasses import dataclass

from engine import InfillResult

MAX_RECORDS = 20_000
DRAFT_SOURCES = ("lookup", "structure", "next_token")
MODEL_SOURCES = ("model", *DRAFT_SOURCES)  # the model ran for these answers


@dataclass(frozen=True)
class Record:
    source: str  # model, lookup, structure, next_token (a draft row won), typed_through, cache, speculative
    multi_line: bool
    server_ms: float  # handler entry to answer
    forward_ms: float  # inside model forward passes (0 when the model did not run for it)
    engine_ms: float  # the engine call, forward passes included
    steps: int
    tokens_per_forward: float
    prompt_tokens: int
    reused_prompt_tokens: int
    stop_reason: str
    queued_ms: float = 0.0  # waiting for the worker to finish or cancel another job
    drafts: int = 0  # rows of drafts from the code (lookup, structure), not the next-token draft
    draft_forwards: int = 0  # forward passes of the engine's own next-token draft

    @property
    def overhead_ms(self) -> float:
        """The server's own time: planning, drafts, post-processing, repair checks, the protocol."""
        return max(0.0, self.server_ms - self.engine_ms - self.queued_ms)

    @property
    def sampler_ms(self) -> float:
        """The engine's time outside forward passes: the sampler's math, tokenizing, bookkeeping."""
        return max(0.0, self.engine_ms - self.forward_ms)


def record(
    source: str,
    multi_line: bool,
    server_ms: float,
    result: InfillResult | None,
    queued_ms: float = 0.0,
    drafts: int = 0,
) -> Record:
    if result is None:
        return Record(source, multi_line, server_ms, 0.0, 0.0, 0, 0.0, 0, 0, "reused")
    return Record(
        queued_ms=queued_ms,
        drafts=drafts,
        source=source,
        multi_line=multi_line,
        server_ms=server_ms,
        forward_ms=result.timings.forward_ms,
        engine_ms=result.timings.total_ms,
        steps=result.steps,
        draft_forwards=result.draft_forwards,
        tokens_per_forward=result.tokens_per_forward,
        prompt_tokens=result.prompt_tokens,
        reused_prompt_tokens=result.reused_prompt_tokens,
        stop_reason=result.stop_reason,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _latency(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50_ms": percentile(values, 50),
        "p95_ms": percentile(values, 95),
        "p99_ms": percentile(values, 99),
    }


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KB on Linux


class Stats:
    def __init__(self) -> None:
        self.records: deque[Record] = deque(maxlen=MAX_RECORDS)
        self.cancelled = 0  # $/cancelRequest, or the client gave up waiting

    def add(self, item: Record) -> None:
        self.records.append(item)

    def reset(self) -> None:
        self.records.clear()
        self.cancelled = 0

    def summary(self, superseded: int) -> dict:
        records = list(self.records)
        model = [r for r in records if r.source in MODEL_SOURCES]
        prompt = sum(r.prompt_tokens for r in model)
        return {
            "answered": len(records),
            "cancelled": self.cancelled,
            "superseded": superseded,
            "sources": dict(Counter(r.source for r in records)),
            "single_line": _latency([r.server_ms for r in records if not r.multi_line]),
            "multi_line": _latency([r.server_ms for r in records if r.multi_line]),
            # Reused answers are far cheaper than the model's, so the percentiles above move with the
            # mix; these are the model's alone.
            "model_answers": _latency([r.server_ms for r in model]),
            "sampler": {  # the engine outside forward passes, for answers the model computed
                "p50_ms": percentile([r.sampler_ms for r in model], 50),
                "p95_ms": percentile([r.sampler_ms for r in model], 95),
            },
            "overhead": {
                "p50_ms": percentile([r.overhead_ms for r in records], 50),
                "p95_ms": percentile([r.overhead_ms for r in records], 95),
            },
            "steps_mean": sum(r.steps for r in model) / len(model) if model else None,
            "steps": [
                [steps, n] for steps, n in sorted(Counter(r.steps for r in model).items())
            ],  # histogram
            "draft_forwards_mean": _mean([r.draft_forwards for r in model]),
            "tokens_per_forward": sum(r.tokens_per_forward for r in model) / len(model) if model else None,
            "prompt_reuse": sum(r.reused_prompt_tokens for r in model) / prompt if prompt else None,
            "prompt_tokens": prompt,
            "reused_prompt_tokens": sum(r.reused_prompt_tokens for r in model),
            "stop_reasons": dict(Counter(r.stop_reason for r in model)),
            "drafts": {
                "requests_with_drafts": sum(1 for r in model if r.drafts),
                "draft_rows": sum(r.drafts for r in model),
                "won_by_a_draft": sum(1 for r in model if r.source in DRAFT_SOURCES),
                "steps_mean_when_a_draft_won": _mean([r.steps for r in model if r.source in DRAFT_SOURCES]),
                "steps_mean_otherwise": _mean([r.steps for r in model if r.source == "model"]),
            },
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }
