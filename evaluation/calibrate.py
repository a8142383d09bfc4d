"""Calibrate the confidence gates of a model: show nothing the engine does not believe.

On a validation split (never the positions figures are reported on), each row is planned and
decoded once through the pipeline with the gates open; then every pair of gates on a grid
(mean confidence, lowest line confidence, and the next-token head's mean probability for a completion
from the model's own next-token draft) is applied to the same engine answer by the pipeline's own
`finish` and parse guard. The chosen pair maximizes the characters a user would accept per
request (those of offered completions within edit similarity ACCEPTED_SIMILARITY of the truth),
subject to precision (among offered single-line completions, at least PRECISION_GOAL within it).
When no pair reaches it, no accepted character is given up for a precision that stays below it
anyway: among the pairs with the most accepted characters, the one whose precision the data
supports best (the highest lower bound of its 95% Wilson interval, so a pair that offers a handful
of completions does not win by chance) hides the most of what would be rejected.
The syntax repair pass is left out of the search (a second engine call per pair); `dgemma-lsp eval`
then measures the chosen gates through the whole pipeline on the report split.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import finish, parse_guarded
from dgemma_lsp.inline.planning import Plan, prepare
from dgemma_lsp.inline.repair import ParseCheck
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import Engine, InfillResult
from evaluation.benchmarks import Benchmark, Item
from evaluation.metrics import edit_similarity
from evaluation.runner import ACCEPTED_SIMILARITY, EditorView
from training.progress import progress

PRECISION_GOAL = 0.6
MIN_OFFERED = 5  # a precision over fewer offered completions says nothing
# The goal counts as reached only on at least this many offered single-line completions: 4 right of 6
# is luck as often as not (its 95% interval spans 30% to 90%), and a gate chosen on it offers next to nothing.
MIN_REACHING = 20
GRID = tuple(range(0, 100, 5))
# The next-token gate: rows from the next-token draft are a share of all, and a finer grid over them
# would choose on a handful of rows.
NEXT_TOKEN_GRID = tuple(range(0, 100, 10))


@dataclass(frozen=True)
class Decoded:
    """One row decoded with the gates open: what the gates are then applied to."""

    plan: Plan
    result: InfillResult
    check: ParseCheck | None
    reference: str


@dataclass(frozen=True)
class GatePoint:
    min_mean_confidence_percent: int
    min_line_confidence_percent: int
    offered: float  # share of rows with something shown
    precision: float | None  # among offered single-line completions, share within ACCEPTED_SIMILARITY
    precision_all: float | None  # the same among all offered completions
    accepted_chars_per_request: float
    single_offered: int = 0  # offered single-line completions: what `precision` is measured on
    min_next_token_confidence_percent: int = 0

    @property
    def supported_precision(self) -> float:
        """The lower bound of the 95% Wilson interval of `precision`: what the data supports."""
        if not self.single_offered or self.precision is None:
            return 0.0
        n, p, z = self.single_offered, self.precision, 1.96
        centre = p + z * z / (2 * n)
        spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return (centre - spread) / (1 + z * z / n)


def decode_rows(engine: Engine, items: Sequence[Item], budget_ms: int | None) -> list[Decoded]:
    registry = LanguageRegistry()
    open_gates = CompletionOptions(
        latency_budget_ms=budget_ms, min_mean_confidence_percent=0, min_line_confidence_percent=0,
        min_next_token_confidence_percent=0,
    )  # fmt: skip
    rows = []
    for item in progress(items, len(items), "calibration rows"):
        view = EditorView.of(item)
        snapshot = standalone(view.text, item.language, registry).snapshot()
        engine.reset_cache()
        plan = prepare(snapshot, view.cursor, Options(completion=open_gates), engine, time.monotonic())
        # The head's probabilities too, for the next-token gate to read (open gates would skip them).
        plan = replace(plan, request=replace(plan.request, next_token_confidence=True))
        result = engine.infill(plan.request)
        check = ParseCheck(plan.grammar, plan.context.prefix, plan.context.suffix) if plan.grammar else None
        rows.append(Decoded(plan, result, check, view.reference))
    return rows


def shown(row: Decoded, mean_percent: int, line_percent: int, next_token_percent: int = 0) -> str:
    """What the editor shows for this row with these gates (repair aside)."""
    gated = replace(
        row.plan,
        min_mean_confidence=mean_percent / 100,
        min_line_confidence=line_percent / 100,
        min_next_token_confidence=next_token_percent / 100,
    )
    completion = finish(gated, row.result)
    if row.check is not None:
        completion = parse_guarded(row.check, completion)
    return completion.proposals[0].text if completion.proposals else ""


def point(
    rows: list[Decoded],
    mean_percent: int,
    line_percent: int,
    benchmark: Benchmark,
    next_token_percent: int = 0,
) -> GatePoint:
    offered, single, good_single, good, accepted = 0, 0, 0, 0, 0
    for row in rows:
        text = shown(row, mean_percent, line_percent, next_token_percent)
        if not text:
            continue
        offered += 1
        close = edit_similarity(text, row.reference, benchmark.convention) >= ACCEPTED_SIMILARITY
        good += close
        accepted += len(text) if close else 0
        if row.plan.context.mode == "single_line":
            single += 1
            good_single += close
    return GatePoint(
        mean_percent,
        line_percent,
        offered / len(rows) if rows else 0.0,
        good_single / single if single else None,
        good / offered if offered else None,
        accepted / len(rows) if rows else 0.0,
        single,
        next_token_percent,
    )


def choose(curve: list[GatePoint], rows: int) -> GatePoint:
    """Most accepted characters among the points that reach the precision goal (on MIN_REACHING
    single-line offers or more); when none does, most accepted characters, then the precision the data
    supports best (`supported_precision`).

    Only points that offer at least MIN_OFFERED completions count; with none, the gates stay open.
    """
    meaningful = [p for p in curve if p.precision is not None and p.offered * rows >= MIN_OFFERED]
    reaching = [p for p in meaningful if p.precision >= PRECISION_GOAL and p.single_offered >= MIN_REACHING]
    if reaching:
        return max(reaching, key=lambda p: (p.accepted_chars_per_request, p.offered))
    return max(
        meaningful, key=lambda p: (p.accepted_chars_per_request, p.supported_precision), default=curve[0]
    )


def grid(fixed: dict[str, int], gate: str, values: tuple[int, ...]) -> tuple[int, ...]:
    return (fixed[gate],) if gate in fixed else values


def calibrate(
    engine: Engine,
    benchmark: Benchmark,
    items: Sequence[Item],
    budget_ms: int | None,
    argv: list[str],
    fixed: dict[str, int] | None = None,
) -> dict:
    """The gates chosen on `items`; `fixed` (gate name -> percent) holds some where they are and
    chooses the others (a gate added to a model whose earlier ones the report sets bore out)."""
    fixed = fixed or {}
    rows = decode_rows(engine, items, budget_ms)
    curve = [
        point(rows, mean, line, benchmark, next_token)
        for mean in grid(fixed, "min_mean_confidence_percent", GRID)
        for line in grid(fixed, "min_line_confidence_percent", GRID)
        for next_token in grid(fixed, "min_next_token_confidence_percent", NEXT_TOKEN_GRID)
    ]
    chosen = choose(curve, len(rows))
    return {
        "min_mean_confidence_percent": chosen.min_mean_confidence_percent,
        "min_line_confidence_percent": chosen.min_line_confidence_percent,
        "min_next_token_confidence_percent": chosen.min_next_token_confidence_percent,
        "chosen": asdict(chosen),
        "open_gates": asdict(point(rows, 0, 0, benchmark, 0)),
        "fixed": fixed,
        "reaches_precision_goal": chosen.precision is not None and chosen.precision >= PRECISION_GOAL,
        "supported_precision": round(chosen.supported_precision, 3),
        "precision_goal": PRECISION_GOAL,
        "accepted_similarity": ACCEPTED_SIMILARITY,
        "rows": len(rows),
        "model": engine.info.name,
        "command": shlex.join(["dgemma-lsp", "eval", *argv]),
        "curve": [asdict(p) for p in curve],
    }
