"""Score a benchmark through the pipeline an editor uses: the rows, the decoders, the summaries.

Each row becomes the document an editor would hold (prefix + suffix, with an empty line at a
whole-line gap) and goes through `dgemma_lsp.inline.pipeline.complete` with the server's options:
context windows, mode, latency budget, repair and post-processing all as in the editor. What is
scored is the first proposal the editor would show (nothing, when it shows nothing). With
`compare_ar` the same rows run again with the same weights decoded left to right. Rows are
independent files, so every row starts from an empty prompt cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.runtime.options import CompletionOptions, ContextOptions, Options
from engine import Engine
from evaluation.baselines import copy_completion
from evaluation.benchmarks import Benchmark, Item
from evaluation.execute import DEFAULT_TIMEOUT_S, check_program, network_block
from evaluation.heldout.workspaces import other_files
from evaluation.metrics import edit_similarity, exact_match, mean, percentile
from evaluation.workspaces import RowWorkspaces
from training.progress import progress

logger = logging.getLogger(__name__)

DIFFUSION, AUTOREGRESSIVE, COPY = "diffusion", "autoregressive", "copy"
COPY_REPOSITORY = "copy+repository"  # the copy heuristic searching the row's whole package too
# The completion lengths the speed comparison looks at: long enough for decoding to dominate,
# short enough to be what an editor asks for.
SPEED_TOKENS = (4, 64)
ACCEPTED_SIMILARITY = 0.7  # a completion this close to the truth is one a user would take and touch up


@dataclass(frozen=True)
class EvalOptions:
    compare_ar: bool = False
    copy_baseline: bool = True  # a row for the copy heuristic (no model) in every table
    drafts: bool = True  # the pipeline's drafts stage (the server's default); off: no draft of any kind
    next_token_draft: bool = True  # the engine's own draft where the code offers none (the server's default)
    # Lookup and structure drafts, from the code around the cursor; off with the next-token draft on, the
    # model works alone as the engine runs it: its head drafts, its canvas revises, nothing is copied.
    context_drafts: bool = True
    gates: bool = True  # the model's calibrated confidence gates, if it ships them (the server's default)
    max_steps: int | None = None  # None: the checkpoint's generation config decides
    budget_ms: int | None = None  # None: the server's default for the engine's device; 0: none
    single_line_canvas: int | None = None  # tokens per single-line canvas; None: the server's default
    execute: bool = True  # run the tests of executable benchmarks
    timeout_s: float = DEFAULT_TIMEOUT_S
    warmup: bool = True
    # Held-out rows only: the folder of their packages' workspaces (`python -m evaluation.heldout
    # workspaces`); each row is completed with its package read as the server reads a workspace.
    workspaces: str = ""
    workspace_tokens: int | None = None  # prompt tokens for the workspace's snippets; None: the server's


@dataclass(frozen=True)
class EditorView:
    """A row as an editor holds it: the document, the cursor, and what the user would type there."""

    text: str
    cursor: int
    reference: str
    line_gap: bool  # a whole missing line: the editor shows an empty line the completion fills

    @classmethod
    def of(cls, item: Item) -> EditorView:
        line_gap = (not item.prefix or item.prefix.endswith("\n")) and item.middle.endswith("\n")
        if line_gap:
            return cls(item.prefix + "\n" + item.suffix, len(item.prefix), item.middle[:-1], True)
        return cls(item.prefix + item.suffix, len(item.prefix), item.middle, False)

    def program(self, item: Item, completion: str) -> str:
        """The file with the completion accepted (what executable checks run)."""
        return item.prefix + completion + ("\n" if self.line_gap else "") + item.suffix


@dataclass(frozen=True)
class Scored:
    """One decoder's answer to one row, and how it scored."""

    text: str  # the first proposal the editor shows ("" when it shows none)
    offered: bool  # the editor showed something
    origin: str  # the row the shown proposal came from: model (fresh noise), lookup, structure, next_token
    mode: str  # single_line, multi_line or block, as the server decided
    tokens: int  # tokens the engine emitted for it, EOS excluded
    stop_reason: str
    exact: bool
    edit_similarity: float
    passed: bool | None  # None: not executed
    execution: str  # passed, failed, timeout, or "" when not executed
    steps: int  # denoising steps
    draft_forwards: int  # forward passes of the engine's next-token draft
    tokens_per_forward: float
    latency_ms: float  # the whole pipeline, as the editor waits for it
    engine_ms: float
    prefill_ms: float  # of engine_ms: encoding the prompt, the same work for every decoder


@dataclass(frozen=True)
class RowResult:
    id: str
    kind: str
    reference: str
    completions: dict[str, Scored]  # by decoder name


@dataclass(frozen=True)
class Summary:
    decoder: str
    n: int
    exact_match: float | None
    edit_similarity: float | None
    offered: float | None  # share of rows where the editor showed something
    precision: float | None  # among offered rows, the share within edit similarity 0.7 of the truth
    pass_at_1: float | None  # None: the benchmark is not executed
    steps: float | None
    tokens_per_forward: float | None
    p50_ms: float | None
    p95_ms: float | None
    by_kind: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    # Denoising steps by the row whose proposal was shown: a right draft should settle in few.
    steps_by_origin: dict[str, float | None] = field(default_factory=dict)
    shown_by_origin: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SpeedComparison:
    """Wall-time speed on the rows where both decoders emitted SPEED_TOKENS tokens."""

    rows: int
    min_tokens: int
    max_tokens: int
    diffusion_tokens_per_s: float | None
    autoregressive_tokens_per_s: float | None
    ratio: float | None  # diffusion tokens/s over autoregressive tokens/s
    # The same after the prompt's prefill, which both decoders pay alike: the decoders' own speed
    diffusion_decode_tokens_per_s: float | None
    autoregressive_decode_tokens_per_s: float | None
    decode_ratio: float | None


@dataclass
class EvalReport:
    benchmark: str
    language: str
    model: dict[str, Any]
    options: EvalOptions
    network_block: str
    summaries: list[Summary] = field(default_factory=list)
    speed: SpeedComparison | None = None
    rows: list[RowResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def server_options(options: EvalOptions, decoder: str) -> Options:
    """The server's default options, with what the evaluation was asked to change."""
    completion = CompletionOptions(
        latency_budget_ms=options.budget_ms,
        **(
            {}
            if options.single_line_canvas is None
            else {"canvas_tokens_single_line": options.single_line_canvas}
        ),
        max_steps=options.max_steps or 0,
        decoder=decoder,
        drafts=options.drafts and options.context_drafts,
        next_token_draft=options.drafts and options.next_token_draft,
        min_mean_confidence_percent=None if options.gates else 0,
        min_line_confidence_percent=None if options.gates else 0,
        min_next_token_confidence_percent=None if options.gates else 0,
        # What the model writes when asked (an editor's trigger key): when to speak unasked is the typing
        # sessions' measure (dgemma-lsp bench typing), not this one.
        eagerness="eager",
    )
    context = ContextOptions()
    if options.workspace_tokens is not None:
        context = replace(context, workspace_tokens=options.workspace_tokens)
    return Options(completion=completion, context=context)


def score_row(
    engine: Engine,
    item: Item,
    benchmark: Benchmark,
    options: Options,
    eval_options: EvalOptions,
    registry: LanguageRegistry,
    workspaces: RowWorkspaces | None = None,
) -> Scored:
    view = EditorView.of(item)
    opened = standalone(view.text, item.language, registry)
    retrieval = workspaces.open_row(item, view.text) if workspaces is not None else None
    engine.reset_cache()
    started = time.monotonic()
    snapshot = replace(opened.snapshot(), repository=retrieval)
    completion = complete(snapshot, view.cursor, options, engine, started)
    latency_ms = (time.monotonic() - started) * 1000
    if retrieval is not None:
        workspaces.close_row(retrieval)
    text = completion.proposals[0].text if completion.proposals else ""
    execution = None
    if eval_options.execute and item.check is not None:
        execution = check_program(item.check, view.program(item, text), eval_options.timeout_s)
    result = completion.result
    return Scored(
        text=text,
        offered=bool(completion.proposals),
        origin=completion.proposals[0].origin if completion.proposals else "",
        mode=completion.context.mode,
        tokens=len(result.candidates[0].token_ids) if result.candidates else 0,
        stop_reason=result.stop_reason,
        exact=exact_match(text, view.reference, benchmark.convention),
        edit_similarity=edit_similarity(text, view.reference, benchmark.convention),
        passed=execution.passed if execution else None,
        execution=execution.status if execution else "",
        steps=result.steps,
        draft_forwards=result.draft_forwards,
        tokens_per_forward=result.tokens_per_forward,
        latency_ms=latency_ms,
        engine_ms=result.timings.total_ms,
        prefill_ms=result.timings.prefill_ms,
    )


def score_copy(
    item: Item,
    benchmark: Benchmark,
    eval_options: EvalOptions,
    others: Callable[[Item], list[str]] | None = None,
) -> Scored:
    """The copy heuristic's answer to a row, scored like a decoder's (no model, no pipeline); with
    `others`, it also searches every other code file of the row's package."""
    view = EditorView.of(item)
    started = time.monotonic()
    kind = getattr(item, "kind", "") or "rest_of_line"
    text = copy_completion(item.prefix, item.suffix, kind, others(item) if others else ())
    latency_ms = (time.monotonic() - started) * 1000
    execution = None
    if eval_options.execute and item.check is not None:
        execution = check_program(item.check, view.program(item, text), eval_options.timeout_s)
    return Scored(
        text=text,
        offered=bool(text.strip()),
        origin="copy",
        mode="",
        tokens=0,
        stop_reason="",
        exact=exact_match(text, view.reference, benchmark.convention),
        edit_similarity=edit_similarity(text, view.reference, benchmark.convention),
        passed=execution.passed if execution else None,
        execution=execution.status if execution else "",
        steps=0,
        draft_forwards=0,
        tokens_per_forward=0.0,
        latency_ms=latency_ms,
        engine_ms=0.0,
        prefill_ms=0.0,
    )


def run_eval(
    engine: Engine,
    benchmark: Benchmark,
    items: Sequence[Item],
    options: EvalOptions = EvalOptions(),  # frozen: sharing the default is safe
    language: str = "",
) -> EvalReport:
    decoders = [DIFFUSION, AUTOREGRESSIVE] if options.compare_ar else [DIFFUSION]
    chosen = {name: server_options(options, name) for name in decoders}
    registry = LanguageRegistry()
    workspaces, others = None, None
    if options.workspaces:
        workspaces = RowWorkspaces(Path(options.workspaces), chosen[DIFFUSION], registry)
        others = other_files(Path(options.workspaces))
    report = EvalReport(
        benchmark=benchmark.name,
        language=language,
        model=asdict(engine.info),
        options=options,
        network_block=network_block() if options.execute else "",
    )
    if items and options.warmup:  # the first call pays one-time costs: not part of any row
        for server in chosen.values():
            quiet = replace(options, execute=False)
            score_row(engine, items[0], benchmark, server, quiet, registry, workspaces)
    for item in progress(items, len(items), benchmark.name):
        scored = {
            name: score_row(engine, item, benchmark, server, options, registry, workspaces)
            for name, server in chosen.items()
        }
        if options.copy_baseline:
            scored[COPY] = score_copy(item, benchmark, options)
            if others is not None:
                scored[COPY_REPOSITORY] = score_copy(item, benchmark, options, others)
        report.rows.append(
            RowResult(item.id, getattr(item, "kind", ""), EditorView.of(item).reference, scored)
        )
    baselines = ([COPY] + ([COPY_REPOSITORY] if others else [])) if options.copy_baseline else []
    report.summaries = [summarize(name, report.rows) for name in [*chosen, *baselines]]
    if options.compare_ar:
        report.speed = compare_speed(report.rows)
    return report


def _figures(done: list[Scored]) -> dict[str, float | int | None]:
    offered = [c for c in done if c.offered]
    return {
        "n": len(done),
        "exact_match": mean([float(c.exact) for c in done]),
        "edit_similarity": mean([c.edit_similarity for c in done]),
        "offered": mean([float(c.offered) for c in done]),
        # Among what the editor showed: the share a user would accept (close to the truth).
        "precision": mean([float(c.edit_similarity >= ACCEPTED_SIMILARITY) for c in offered]),
    }


def summarize(decoder: str, rows: Sequence[RowResult]) -> Summary:
    done = [row.completions[decoder] for row in rows]
    executed = [c.passed for c in done if c.passed is not None]
    latencies = [c.latency_ms for c in done]
    kinds = sorted({row.kind for row in rows if row.kind})
    origins = sorted({c.origin for c in done if c.origin})
    figures = _figures(done)
    return Summary(
        decoder=decoder,
        n=len(done),
        exact_match=figures["exact_match"],
        edit_similarity=figures["edit_similarity"],
        offered=figures["offered"],
        precision=figures["precision"],
        pass_at_1=mean([float(p) for p in executed]) if executed else None,
        steps=mean([float(c.steps) for c in done]),
        tokens_per_forward=mean([c.tokens_per_forward for c in done]),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        by_kind={kind: _figures([r.completions[decoder] for r in rows if r.kind == kind]) for kind in kinds},
        steps_by_origin={o: mean([float(c.steps) for c in done if c.origin == o]) for o in origins},
        shown_by_origin={o: sum(1 for c in done if c.origin == o) for o in origins},
    )


def compare_speed(rows: Sequence[RowResult]) -> SpeedComparison:
    low, high = SPEED_TOKENS
    pairs = [
        (row.completions[DIFFUSION], row.completions[AUTOREGRESSIVE])
        for row in rows
        if all(low <= row.completions[name].tokens <= high for name in (DIFFUSION, AUTOREGRESSIVE))
    ]

    def tokens_per_s(done: list[Scored], decode_only: bool = False) -> float | None:
        seconds = sum(c.engine_ms - (c.prefill_ms if decode_only else 0.0) for c in done) / 1000
        return sum(c.tokens for c in done) / seconds if seconds > 0 else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    diffusion = tokens_per_s([d for d, _ in pairs])
    autoregressive = tokens_per_s([a for _, a in pairs])
    diffusion_decode = tokens_per_s([d for d, _ in pairs], decode_only=True)
    autoregressive_decode = tokens_per_s([a for _, a in pairs], decode_only=True)
    return SpeedComparison(
        len(pairs), low, high, diffusion, autoregressive, ratio(diffusion, autoregressive),
        diffusion_decode, autoregressive_decode, ratio(diffusion_decode, autoregressive_decode),
    )  # fmt: skip
