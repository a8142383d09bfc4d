"""What an editor is shown for a cursor: the one completion pipeline.

`complete` is the entry point every caller uses (the LSP server, `dgemma-lsp complete`, every
`eval` benchmark and, through the server, `bench`): snapshot, cursor, options and engine in,
proposals out. Its stages: `prepare` (context, drafts and the engine request, in planning.py),
then `execute`: the engine call (draft rows and fresh rows in one batch), the confidence gates,
post-processing, syntax repair and the parse guard. The server runs the two halves on
two threads (prepare on the event loop, execute on the model worker); everyone else calls `complete`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from dgemma_lsp.documents.workspace import Snapshot
from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.decision import Considered, decide
from dgemma_lsp.inline.drafts import Draft
from dgemma_lsp.inline.evidence import evidence_of
from dgemma_lsp.inline.lookup import agreed_head
from dgemma_lsp.inline.planning import Plan, prepare, shape_of
from dgemma_lsp.inline.postprocess import cut_glued, postprocess
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.repair import ParseCheck, repair_request
from dgemma_lsp.runtime.options import Options
from engine import CancelToken, Candidate, Engine, InfillResult, Timings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    proposals: tuple[Proposal, ...]  # what the editor shows, best first (may be empty)
    context: CompletionContext
    result: InfillResult  # the engine's answer (both passes' figures when repair ran)
    began: float = 0.0  # monotonic time the engine call started
    repaired: bool = False  # syntax repair replaced the best proposal
    considered: tuple[Considered, ...] = ()  # what the show-or-not decision looked at, shown or not

    @property
    def whole(self) -> bool:
        """The engine finished before the deadline: the answer is not one cut short by time."""
        return self.result.stop_reason != "deadline"


def complete(
    snapshot: Snapshot,
    cursor: int,
    options: Options,
    engine: Engine,
    started: float | None = None,
    cancel: CancelToken | None = None,
) -> Completion:
    """The proposals an editor shows at `cursor` of `snapshot` (a code-point offset)."""
    started = time.monotonic() if started is None else started
    return execute(prepare(snapshot, cursor, options, engine, started), engine, cancel)


def execute(plan: Plan, engine: Engine, cancel: CancelToken | None = None) -> Completion:
    """Infill and post-process; when the best proposal breaks the parse, repair it once.

    What still breaks the parse after that is cut to its longest head that does not, or dropped.
    No more proposals than the request asked for are kept: draft rows compete with the fresh ones
    for those places. Then the show-or-not decision, at the plan's eagerness. Runs on the model
    worker: it blocks for the engine call.
    """
    completion = _infill_and_repair(plan, engine, cancel)
    best = completion.proposals[: plan.request.n_candidates]
    shown, considered = decide(best, plan.context, plan.history, plan.decision, plan.eagerness, "model")
    return replace(completion, proposals=shown, considered=considered)


def _infill_and_repair(plan: Plan, engine: Engine, cancel: CancelToken | None) -> Completion:
    began = time.monotonic()
    request = replace(plan.request, cancel=cancel)
    completion = replace(finish(plan, engine.infill(request)), began=began)
    if plan.grammar is None or not completion.proposals:
        return completion
    check = ParseCheck(plan.grammar, plan.context.prefix, plan.context.suffix)
    best = completion.proposals[0]
    spans = check.introduced(best.text)
    out_of_time = request.deadline is not None and time.monotonic() >= request.deadline
    token_spans = engine.token_spans(best.text) if spans and request.decoder == "diffusion" else None
    if not spans or out_of_time or token_spans is None:
        return parse_guarded(check, completion)  # repair runs inside the budget or not at all
    if cancel is not None and cancel.is_set():
        return completion  # nobody waits for it: do no more work
    try:
        repaired = finish(plan, engine.infill(repair_request(request, best.text, spans, token_spans)))
    except (ValueError, IndexError, RuntimeError) as err:
        # The repair is a second chance, not the answer: its failure must not lose the first one.
        logger.warning(
            "syntax repair failed, the completion is kept as it was: %s: %s", type(err).__name__, err
        )
        return parse_guarded(check, completion)
    if not repaired.proposals or check.introduced(repaired.proposals[0].text):
        # No better: the first answer, cut; the repair pass still counts as the engine's work.
        spent = merged_result(completion.result, repaired.result, keep=completion.result)
        return parse_guarded(check, replace(completion, result=spent))
    proposals = (repaired.proposals[0], *completion.proposals[1:])
    merged = merged_result(completion.result, repaired.result, keep=repaired.result)
    return parse_guarded(check, replace(completion, proposals=proposals, result=merged, repaired=True))


def finish(plan: Plan, result: InfillResult) -> Completion:
    """The engine's candidates as proposals: gated by confidence, post-processed, distinct."""
    shape = shape_of(plan.context)
    proposals: list[Proposal] = []
    seen: set[str] = set()
    cut_by_deadline = result.stop_reason == "deadline"
    for candidate in result.candidates:
        if not confident_enough(candidate, plan):
            continue
        text = postprocess(
            confident_part(candidate, plan.min_line_confidence, plan.min_next_token_line_confidence), shape
        )
        if text is None or text in seen:
            continue
        seen.add(text)
        evidence = evidence_of(candidate, text, result.steps, cut_by_deadline)
        if candidate.draft is not None and candidate.draft < len(plan.drafts):
            draft = plan.drafts[candidate.draft]
            evidence = replace(
                evidence,
                draft_kept=candidate.text == draft.text,
                lookup_key=draft.key,
                found_in=draft.found_in,
                lookup_seen=draft.occurrences,
                lookup_same_line=draft.same_line,
                lookup_same_word=draft.same_word,
                agreed=agreed_chars(text, draft),
            )
        origin = plan.origin(candidate.draft)
        proposals.append(Proposal(text, plan.context.cursor, candidate.mean_confidence, origin, evidence))
    return Completion(proposals=tuple(proposals), context=plan.context, result=result)


def agreed_chars(text: str, draft: Draft) -> int:
    """How much of `text` (made from `draft`'s row) every occurrence of the draft's lookup match went on
    with: its sure part by agreement (0: no shorter head agreed, or one occurrence only)."""
    if draft.agreed <= 0:
        return 0
    head = agreed_head(draft.text, draft.agreed)
    return len(head) if head.strip() and len(head) < len(text) and text.startswith(head) else 0


def confident_enough(candidate: Candidate, plan: Plan) -> bool:
    """The mean gate: by the next-token head's probabilities for a candidate that carries them (one
    from the model's own next-token draft) where that gate is set, else by the canvas's confidence."""
    if candidate.head_confidence and plan.min_next_token_confidence > 0:
        return candidate.mean_head_confidence >= plan.min_next_token_confidence
    return candidate.mean_confidence >= plan.min_mean_confidence


def confident_part(candidate: Candidate, threshold: float, head_threshold: float = 0.0) -> str:
    """The candidate's text up to the first line the model was not sure of: a token of the canvas's
    below `threshold`, or for a candidate the next-token head scored, one of the head's below
    `head_threshold`."""
    lines = candidate.text.split("\n")
    cut = len(lines)
    if threshold > 0:
        cut = _first_below(candidate.line_confidence(), threshold, cut)
    if candidate.head_confidence and head_threshold > 0:
        cut = _first_below(candidate.line_head_confidence(), head_threshold, cut)
    return "\n".join(lines[:cut])


def _first_below(lowest: list[float], threshold: float, default: int) -> int:
    return next((index for index, value in enumerate(lowest) if value < threshold), default)


def parse_guarded(check: ParseCheck, completion: Completion) -> Completion:
    """Each proposal cut to its longest head that brings in no parse error (and does not run into the
    word after the cursor); empty ones dropped."""
    kept: list[Proposal] = []
    seen: set[str] = set()
    line_suffix = completion.context.line_suffix
    for proposal in completion.proposals:
        head = check.preserving_head(proposal.text)
        if head != proposal.text:
            head = cut_glued(head, line_suffix)
        if head.strip() and head not in seen:
            seen.add(head)
            kept.append(replace(proposal, text=head, evidence=proposal.evidence.head(len(head))))
    return replace(completion, proposals=tuple(kept))


def merged_result(first: InfillResult, second: InfillResult, keep: InfillResult) -> InfillResult:
    """One result for the request: `keep`'s text (either pass's), both passes' steps and time."""
    steps = first.steps + second.steps
    timings = Timings(
        prefill_ms=first.timings.prefill_ms + second.timings.prefill_ms,
        denoise_ms=first.timings.denoise_ms + second.timings.denoise_ms,
        total_ms=first.timings.total_ms + second.timings.total_ms,
        forward_ms=first.timings.forward_ms + second.timings.forward_ms,
        canvas_ms=first.timings.canvas_ms + second.timings.canvas_ms,
        step_forward_ms=first.timings.step_forward_ms + second.timings.step_forward_ms,
    )
    tokens = len(keep.candidates[0].token_ids) if keep.candidates else 0
    drafted = first.draft_forwards + second.draft_forwards
    forwards = steps + drafted
    return replace(
        keep, steps=steps, timings=timings, draft_forwards=drafted,
        tokens_per_forward=tokens / forwards if forwards else 0.0,
    )  # fmt: skip
