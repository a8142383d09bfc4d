"""From a cursor in an open file to the completions worth offering: the server's pure core.

`plan` runs on the event loop (fast: windows and scope from the incremental tree) and yields the
engine request; `finish` turns the engine's result into proposals after post-processing. The model
call between them runs on the worker thread. Neither step knows about LSP types.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from tree_sitter import Language

from dgemma_lsp.context import CompletionContext, ContextOptions, build_context
from dgemma_lsp.options import Options, completion_budget_ms
from dgemma_lsp.postprocess import Shape, postprocess
from dgemma_lsp.repair import ParseCheck, repair_request
from dgemma_lsp.workspace import Snapshot
from engine import Candidate, Engine, InfillRequest, InfillResult, Timings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    context: CompletionContext
    request: InfillRequest
    min_line_confidence: float = 0.0  # cut the text before the first line below this
    min_mean_confidence: float = 0.0  # offer nothing below this
    grammar: Language | None = None  # for syntax repair; None: no repair


@dataclass(frozen=True)
class Proposal:
    text: str  # inserted at the cursor
    cursor: int  # code-point offset in the document it was planned for
    confidence: float  # mean token probability


@dataclass(frozen=True)
class Outcome:
    proposals: tuple[Proposal, ...]
    result: InfillResult
    began: float = 0.0  # monotonic time the worker started on it
    repaired: bool = False  # syntax repair replaced the best proposal


def context_options(options: Options) -> ContextOptions:
    return ContextOptions(
        prefix_tokens=options.context.prefix_tokens, suffix_tokens=options.context.suffix_tokens
    )


def plan(snapshot: Snapshot, cursor: int, options: Options, engine: Engine, started: float) -> Plan:
    """The context at `cursor` and the engine request for it; `started` is the request's monotonic time."""
    context = build_context(
        snapshot.document.lines,
        cursor,
        count_tokens=engine.count_tokens,
        spec=snapshot.spec,
        language_id=snapshot.document.language_id,
        tree=snapshot.tree,
        options=context_options(options),
        anchor=snapshot.anchor,
    )
    completion = options.completion
    multi_line = context.mode != "single_line"
    budget = completion_budget_ms(completion, engine.info.device)
    request = InfillRequest(
        prefix=context.prefix,
        suffix=context.suffix,
        language=context.language or "",
        max_new_tokens=completion.max_tokens_multi_line if multi_line else completion.max_tokens_single_line,
        min_new_tokens=1,
        deadline=started + budget / 1000.0 if budget else None,
        n_candidates=completion.candidates,
        max_steps=completion.max_steps or None,
        anchor=suffix_anchor(context) if completion.anchor_suffix else "",
    )
    return Plan(
        context=context,
        request=request,
        min_line_confidence=completion.min_line_confidence_percent / 100,
        min_mean_confidence=completion.min_mean_confidence_percent / 100,
        grammar=snapshot.grammar if completion.syntax_repair else None,
    )


MAX_ANCHOR_CHARS = 24


def suffix_anchor(context: CompletionContext) -> str:
    """The rest of the line, fixed at the end of the canvas, when a single-line completion must join it."""
    rest = context.line_suffix
    if context.mode != "single_line" or not rest.strip() or len(rest) > MAX_ANCHOR_CHARS:
        return ""
    return rest


def shape_of(context: CompletionContext) -> Shape:
    return Shape(
        multi_line=context.mode != "single_line",
        max_lines=context.max_lines,
        min_indent=context.stop.min_indent if context.mode != "single_line" else None,
        line_suffix=context.line_suffix,
        suffix=context.suffix,
    )


def confident_part(candidate: Candidate, threshold: float) -> str:
    """The candidate's text up to the first line the model was not sure of."""
    if threshold <= 0:
        return candidate.text
    lines = candidate.text.split("\n")
    for index, lowest in enumerate(candidate.line_confidence()):
        if lowest < threshold:
            return "\n".join(lines[:index])
    return candidate.text


def finish(planned: Plan, result: InfillResult) -> Outcome:
    shape = shape_of(planned.context)
    proposals: list[Proposal] = []
    seen: set[str] = set()
    for candidate in result.candidates:
        if candidate.mean_confidence < planned.min_mean_confidence:
            continue
        text = postprocess(confident_part(candidate, planned.min_line_confidence), shape)
        if text is None or text in seen:
            continue
        seen.add(text)
        proposals.append(
            Proposal(text=text, cursor=planned.context.cursor, confidence=candidate.mean_confidence)
        )
    return Outcome(proposals=tuple(proposals), result=result)


def complete_with_repair(planned: Plan, engine: Engine, request: InfillRequest) -> Outcome:
    """Infill, post-process; when the best proposal breaks the parse, repair it once (worker thread).

    What still breaks the parse after that is cut to its longest head that does not, or dropped.
    """
    outcome = finish(planned, engine.infill(request))
    if planned.grammar is None or not outcome.proposals:
        return outcome
    check = ParseCheck(planned.grammar, planned.context.prefix, planned.context.suffix)
    best = outcome.proposals[0]
    spans = check.introduced(best.text)
    out_of_time = request.deadline is not None and time.monotonic() >= request.deadline
    if not spans or out_of_time or not hasattr(engine, "token_spans"):
        return _parse_guarded(check, outcome)  # repair runs inside the budget or not at all
    if request.cancel is not None and request.cancel.is_set():
        return outcome  # nobody waits for it: do no more work
    fix = repair_request(request, best.text, spans, engine.token_spans(best.text))
    try:
        repaired = finish(planned, engine.infill(fix))
    except (ValueError, IndexError, RuntimeError) as err:
        # The repair is a second chance, not the answer: its failure must not lose the first one.
        logger.warning(
            "syntax repair failed, the completion is kept as it was: %s: %s", type(err).__name__, err
        )
        return _parse_guarded(check, outcome)
    if not repaired.proposals or check.introduced(repaired.proposals[0].text):
        return _parse_guarded(check, outcome)  # no better: the first answer, cut
    proposals = (repaired.proposals[0], *outcome.proposals[1:])
    merged = _merged(outcome.result, repaired.result)
    return _parse_guarded(check, Outcome(proposals=proposals, result=merged, repaired=True))


def _parse_guarded(check: ParseCheck, outcome: Outcome) -> Outcome:
    """Each proposal cut to its longest head that brings in no parse error; empty ones dropped."""
    kept: list[Proposal] = []
    seen: set[str] = set()
    for proposal in outcome.proposals:
        head = check.preserving_head(proposal.text)
        if head.strip() and head not in seen:
            seen.add(head)
            kept.append(replace(proposal, text=head))
    return replace(outcome, proposals=tuple(kept))


def _merged(first: InfillResult, second: InfillResult) -> InfillResult:
    """One result for the request: the repair's text, both passes' steps and time."""
    steps = first.steps + second.steps
    timings = Timings(
        prefill_ms=first.timings.prefill_ms + second.timings.prefill_ms,
        denoise_ms=first.timings.denoise_ms + second.timings.denoise_ms,
        total_ms=first.timings.total_ms + second.timings.total_ms,
        forward_ms=first.timings.forward_ms + second.timings.forward_ms,
    )
    tokens = len(second.candidates[0].token_ids) if second.candidates else 0
    return replace(second, steps=steps, timings=timings, tokens_per_forward=tokens / steps if steps else 0.0)
