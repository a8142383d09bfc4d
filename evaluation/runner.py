"""Run a benchmark through an engine: requests, post-processing, metrics, execution, summaries.

Each row is decoded by the diffusion sampler (`engine.infill`) and, with `compare_ar`, by greedy
autoregressive decoding of the same weights (`engine.autoregressive`), one after the other. Rows are
independent files, so every decode starts from an empty prompt cache: both decoders pay the same
full prefill and the latencies compare decoding, not cache luck. One untimed warm-up decode per
decoder comes first (the first call pays one-time costs).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.api import Engine, EngineError, InfillRequest, InfillResult
from evaluation.benchmarks import Benchmark, Item
from evaluation.execute import DEFAULT_TIMEOUT_S, check_completion, network_block
from evaluation.metrics import edit_similarity, exact_match, mean, percentile

logger = logging.getLogger(__name__)

Decoder = Callable[[InfillRequest], InfillResult]
DIFFUSION, AUTOREGRESSIVE = "diffusion", "autoregressive"
# The completion lengths the speed comparison looks at: long enough for decoding to dominate,
# short enough to be what an editor asks for.
SPEED_TOKENS = (16, 64)


@dataclass(frozen=True)
class EvalOptions:
    compare_ar: bool = False
    max_steps: int | None = None  # None: the checkpoint's generation config decides
    execute: bool = True  # run the tests of executable benchmarks
    timeout_s: float = DEFAULT_TIMEOUT_S
    warmup: bool = True


@dataclass(frozen=True)
class Completion:
    """One decoder's answer to one row, and how it scored."""

    text: str  # post-processed: what is scored and executed
    raw: str  # what the engine returned
    tokens: int  # tokens emitted, EOS excluded
    stop_reason: str
    exact: bool
    edit_similarity: float
    passed: bool | None  # None: not executed
    execution: str  # passed, failed, timeout, or "" when not executed
    steps: int
    tokens_per_forward: float
    latency_ms: float
    prefill_ms: float


@dataclass(frozen=True)
class RowResult:
    id: str
    reference: str
    max_new_tokens: int
    completions: dict[str, Completion]  # by decoder name


@dataclass(frozen=True)
class Summary:
    decoder: str
    n: int
    exact_match: float | None
    edit_similarity: float | None
    pass_at_1: float | None  # None: the benchmark is not executed
    tokens_per_forward: float | None
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class SpeedComparison:
    """Wall-time speed on the rows where both decoders emitted SPEED_TOKENS tokens."""

    rows: int
    min_tokens: int
    max_tokens: int
    diffusion_tokens_per_s: float | None
    autoregressive_tokens_per_s: float | None
    ratio: float | None  # diffusion tokens/s over autoregressive tokens/s


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


# ---- post-processing ---------------------------------------------------------------------------


def strip_suffix_repeat(text: str, suffix: str) -> str:
    """Drop a tail of whole lines that repeats the suffix's first lines (compared stripped).

    Models often write on past the gap into code the suffix already has.
    """
    wanted = [line.strip() for line in suffix.split("\n") if line.strip()]
    if not wanted:
        return text
    lines = text.split("\n")
    offset = 0
    for start, line in enumerate(lines):
        tail = [rest.strip() for rest in lines[start:] if rest.strip()]
        if tail and tail == wanted[: len(tail)]:
            return text[:offset]
        offset += len(line) + 1
    return text


def postprocess(raw: str, item: Item) -> str:
    """The completion as the benchmark will see it.

    Single-line rows keep the first line (after any leading newlines when the cursor starts a line:
    a blank line cannot be the answer there). When the cursor starts a line and the suffix starts
    the next one (HumanEval's whole-line gaps), the completion must end its last line.
    """
    at_line_start = not item.prefix or item.prefix.endswith("\n")
    text = raw.lstrip("\n") if item.single_line and at_line_start else raw
    text = strip_suffix_repeat(text, item.suffix)
    if item.single_line:
        text = text.split("\n", 1)[0]
    suffix_starts_line = bool(item.suffix) and not item.suffix.startswith("\n")
    if at_line_start and suffix_starts_line and text and not text.endswith("\n"):
        text += "\n"
    return text


# ---- running -----------------------------------------------------------------------------------


def decoders(engine: Engine, compare_ar: bool) -> dict[str, Decoder]:
    found: dict[str, Decoder] = {DIFFUSION: engine.infill}
    if compare_ar:
        from engine.autoregressive import decode_autoregressive
        from engine.local_engine import LocalEngine

        if not isinstance(engine, LocalEngine):
            raise EngineError("--compare-ar needs a local checkpoint: it decodes the same weights in-process")
        found[AUTOREGRESSIVE] = functools.partial(decode_autoregressive, engine)
    return found


def _forget_prompt(engine: Engine) -> None:
    cache = getattr(engine, "prompt_cache", None)
    if cache is not None:
        cache.reset()


def request_for(item: Item, options: EvalOptions) -> InfillRequest:
    return InfillRequest(
        prefix=item.prefix,
        suffix=item.suffix,
        language=item.language,
        max_new_tokens=item.max_new_tokens,
        min_new_tokens=1,  # every reference middle has text; both decoders must write some
        max_steps=options.max_steps,
    )


def complete(
    engine: Engine, decode: Decoder, item: Item, benchmark: Benchmark, options: EvalOptions
) -> Completion:
    _forget_prompt(engine)
    result = decode(request_for(item, options))
    text = postprocess(result.text, item)
    execution = None
    if options.execute and item.check is not None:
        execution = check_completion(item, text, timeout=options.timeout_s)
    return Completion(
        text=text,
        raw=result.text,
        tokens=len(result.candidates[0].token_ids) if result.candidates else 0,
        stop_reason=result.stop_reason,
        exact=exact_match(text, item.middle, benchmark.convention),
        edit_similarity=edit_similarity(text, item.middle, benchmark.convention),
        passed=execution.passed if execution else None,
        execution=execution.status if execution else "",
        steps=result.steps,
        tokens_per_forward=result.tokens_per_forward,
        latency_ms=result.timings.total_ms,
        prefill_ms=result.timings.prefill_ms,
    )


def run_eval(
    engine: Engine,
    benchmark: Benchmark,
    items: Sequence[Item],
    options: EvalOptions = EvalOptions(),  # frozen: sharing the default is safe
    language: str = "",
) -> EvalReport:
    chosen = decoders(engine, options.compare_ar)
    report = EvalReport(
        benchmark=benchmark.name,
        language=language,
        model=asdict(engine.info),
        options=options,
        network_block=network_block() if options.execute else "",
    )
    if items and options.warmup:
        for decode in chosen.values():
            _forget_prompt(engine)
            decode(request_for(items[0], options))
    for number, item in enumerate(items, 1):
        completions = {name: complete(engine, fn, item, benchmark, options) for name, fn in chosen.items()}
        report.rows.append(RowResult(item.id, item.middle, item.max_new_tokens, completions))
        if number % 10 == 0 or number == len(items):
            logger.info("%d/%d rows", number, len(items))
    report.summaries = [summarize(name, report.rows) for name in chosen]
    if options.compare_ar:
        report.speed = compare_speed(report.rows)
    return report


def summarize(decoder: str, rows: Sequence[RowResult]) -> Summary:
    done = [row.completions[decoder] for row in rows]
    executed = [c.passed for c in done if c.passed is not None]
    latencies = [c.latency_ms for c in done]
    return Summary(
        decoder=decoder,
        n=len(done),
        exact_match=mean([float(c.exact) for c in done]),
        edit_similarity=mean([c.edit_similarity for c in done]),
        pass_at_1=mean([float(p) for p in executed]) if executed else None,
        tokens_per_forward=mean([c.tokens_per_forward for c in done]),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
    )


def compare_speed(rows: Sequence[RowResult]) -> SpeedComparison:
    low, high = SPEED_TOKENS
    pairs = [
        (row.completions[DIFFUSION], row.completions[AUTOREGRESSIVE])
        for row in rows
        if all(low <= row.completions[name].tokens <= high for name in (DIFFUSION, AUTOREGRESSIVE))
    ]

    def tokens_per_s(done: list[Completion]) -> float | None:
        seconds = sum(c.latency_ms for c in done) / 1000
        return sum(c.tokens for c in done) / seconds if seconds > 0 else None

    diffusion = tokens_per_s([d for d, _ in pairs])
    autoregressive = tokens_per_s([a for _, a in pairs])
    ratio = diffusion / autoregressive if diffusion and autoregressive else None
    return SpeedComparison(len(pairs), low, high, diffusion, autoregressive, ratio)
