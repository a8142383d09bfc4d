"""From a cursor in a document snapshot to the engine request: the fast half of the pipeline.

Runs on the event loop (windows and scope come from the incremental tree), so it must stay cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Language

from dgemma_lsp.documents.workspace import Snapshot
from dgemma_lsp.inline.context import CompletionContext, build_context
from dgemma_lsp.inline.decision import Decision
from dgemma_lsp.inline.drafts import Draft, make_drafts
from dgemma_lsp.inline.habits import NO_HISTORY, History
from dgemma_lsp.inline.postprocess import Shape
from dgemma_lsp.repository.retrieval import NOTHING, Related
from dgemma_lsp.runtime.options import Options, completion_budget_ms, workspace_tokens
from engine import Engine, InfillRequest

MAX_ANCHOR_CHARS = 24
NEXT_TOKEN = "next_token"  # the origin of a row the engine's next-token draft started


@dataclass(frozen=True)
class Plan:
    context: CompletionContext
    request: InfillRequest
    min_line_confidence: float = 0.0  # cut the text before the first line below this
    min_mean_confidence: float = 0.0  # offer nothing below this
    min_next_token_confidence: float = 0.0  # the same for the next-token draft's candidates, by the head
    min_next_token_line_confidence: float = 0.0  # the line gate for them, by the head
    grammar: Language | None = None  # for syntax repair; None: no repair
    drafts: tuple[Draft, ...] = ()  # request.drafts as they were made (their kind, their lookup's match)
    # The show-or-not decision: the model's fitted one, the eagerness it is read at, what the user did.
    decision: Decision | None = None
    eagerness: str = "eager"
    history: History = NO_HISTORY

    def origin(self, draft: int | None) -> str:
        """Where a candidate's row started: a draft's kind, the engine's own next-token draft, or noise."""
        if draft is None:
            return "model"
        return self.drafts[draft].kind if draft < len(self.drafts) else NEXT_TOKEN


def prepare(
    snapshot: Snapshot,
    cursor: int,
    options: Options,
    engine: Engine,
    started: float,
    history: History = NO_HISTORY,
    decision: Decision | None = None,
    eagerness: str | None = None,
) -> Plan:
    """The context at `cursor` and the engine request for it; `started` is the request's monotonic time.

    `decision`: the model's show-or-not decision, read once by the caller (None: the one the engine
    ships, read here); `eagerness`: the option's unless given (an editor's explicit request is eager)."""
    context = build_context(
        snapshot.document.lines,
        cursor,
        count_tokens=engine.count_tokens,
        spec=snapshot.spec,
        language_id=snapshot.document.language_id,
        tree=snapshot.tree,
        options=options.context,
        anchor=snapshot.anchor,
    )
    completion = options.completion
    multi_line = context.mode != "single_line"
    related = related_code(snapshot, cursor, options, engine)
    haystacks = snapshot.neighbours + related.lookup_texts  # open documents first, then the repository's
    text, tree = snapshot.document.text, snapshot.tree
    opened = len(snapshot.neighbours)
    drafts = make_drafts(context, text, tree, haystacks, opened) if completion.drafts else ()
    budget = completion_budget_ms(completion, engine.info.device)
    min_line = gate(completion.min_line_confidence_percent, "min_line_confidence_percent", engine)
    min_mean = gate(completion.min_mean_confidence_percent, "min_mean_confidence_percent", engine)
    min_next_token = gate(
        completion.min_next_token_confidence_percent, "min_next_token_confidence_percent", engine
    )
    lead = line_break_lead(context)
    request = InfillRequest(
        prefix=context.prefix.removesuffix(lead),
        lead=lead,
        suffix=context.suffix,
        language=context.language or "",
        max_new_tokens=completion.max_tokens_multi_line if multi_line else completion.max_tokens_single_line,
        min_new_tokens=1,
        deadline=started + budget / 1000.0 if budget else None,
        n_candidates=completion.candidates,
        max_steps=completion.max_steps or None,
        canvas_tokens=0 if multi_line else completion.canvas_tokens_single_line,
        anchor=suffix_anchor(context) if completion.anchor_suffix else "",
        decoder=completion.decoder,
        drafts=tuple(d.text for d in drafts),
        next_token_draft=completion.next_token_draft,
        next_token_confidence=completion.next_token_draft and min_next_token > 0,
        context=related.snippets,
    )
    return Plan(
        context=context,
        request=request,
        min_line_confidence=min_line,
        min_mean_confidence=min_mean,
        min_next_token_confidence=min_next_token,
        min_next_token_line_confidence=completion.min_next_token_line_confidence_percent / 100,
        grammar=snapshot.grammar if completion.syntax_repair else None,
        drafts=drafts,
        decision=decision if decision is not None else Decision.from_json(engine.info.decision),
        eagerness=eagerness or completion.eagerness,
        history=history,
    )


def related_code(snapshot: Snapshot, cursor: int, options: Options, engine: Engine) -> Related:
    """What the rest of the repository offers this completion (nothing when it is not read)."""
    if snapshot.repository is None or snapshot.spec is None:
        return NOTHING
    document = snapshot.document
    return snapshot.repository.related(
        document.text,
        document.lines.encoded,
        cursor,
        snapshot.spec.name,
        snapshot.tree,
        workspace_tokens(options.context, engine.info.reads_context),
        engine.count_tokens,
    )


def gate(percent: int | None, name: str, engine: Engine) -> float:
    """A confidence gate as a probability: the option when set, else the model's calibrated one, else 0."""
    return (percent if percent is not None else engine.info.gates.get(name, 0)) / 100


def line_break_lead(context: CompletionContext) -> str:
    """At the start of an empty line, its line break: the model writes the line from the break on,
    where it learned the indentation (one token with the break), not from column 0 with no break to
    hang it on (`InfillRequest.lead`)."""
    at_empty_line = not context.line_prefix and not context.line_suffix.strip()
    return "\n" if at_empty_line and context.prefix.endswith("\n") else ""


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
        line_prefix=context.line_prefix,
        open_brackets=context.stop.open_brackets,
        line_above=context.line_above,
    )
