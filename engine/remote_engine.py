"""An engine on another machine: an OpenAI-compatible server, vLLM or SGLang serving DiffusionGemma.

How a team shares one GPU box. At load, the engine asks the server what it is (`remote_server.probe`):
its model, the prompt family its tokenizer calls for (our FIM prompt, or the Gemma 4 chat prompt of the
instruction-tuned checkpoint), and whether it takes vLLM's per-request diffusion controls. With them
an infill runs the diffusion pipeline over the wire (`remote_wire`): drafts seed canvas rows of their
own, the suffix anchor and a rewrite's kept tokens are pinned, the step cap comes from the time left,
and the candidates compete as the local engine's do, by the confidence the server gives each token.
Without them it sends a plain request. Ids come from the server's own /tokenize.

The latency budget includes the network: when the deadline passes or the request is superseded, the
call is abandoned at once (`remote_http`) and the server stops working on it. Only used when the user
gives a URL as the model: nothing leaves the machine otherwise.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, replace

from engine.api import (
    AllocationWindow,
    Candidate,
    CanvasObserver,
    CanvasStep,
    EngineError,
    EngineInfo,
    InfillRequest,
    InfillResult,
    StopReason,
    Timings,
    best_first,
)
from engine.remote_http import Abandoned, Call, HttpClient, RemoteError, server_base
from engine.remote_server import ServerFacts, estimate_tokens, probe, tokenize_call
from engine.remote_settings import RemoteSettings
from engine.remote_wire import (
    Layout,
    Row,
    body,
    candidate,
    emitted,
    endpoint,
    layout,
    prompt_fields,
    rows,
)

logger = logging.getLogger(__name__)

MEMO_TEXTS = 4096  # texts whose ids are remembered (an anchor, a draft typed through); then afresh
# Consecutive requests with no answer inside their budget before the engine says the server is slow.
MISSES_BEFORE_SLOW = 3
ANSWERS_KEPT = 16  # the latest answers' round trips, for the budget to suggest when the server is slow
EXCHANGES_KEPT = 8  # the latest infills' exchanges, for `dgemma-lsp complete --json`
BUDGET_SHARE = 0.8  # of the time left, what the step cap may fill (the rest: network, prefill)
LEARN = 0.3  # weight of the newest figure in the running estimates


@dataclass
class Pace:
    """What the engine learned of the server's speed: milliseconds per denoising step, an upper bound
    (a request's whole time over the steps it was allowed), to fit a step cap in the time left."""

    step_ms: float = 20.0

    def steps_within(self, seconds_left: float) -> int:
        return max(1, int(BUDGET_SHARE * seconds_left * 1000 / self.step_ms))

    def learn(self, elapsed_ms: float, steps: int) -> None:
        self.step_ms = (1 - LEARN) * self.step_ms + LEARN * max(0.1, elapsed_ms / steps)


@dataclass(frozen=True)
class Exchange:
    """What one infill sent and waited for: what `dgemma-lsp complete --json` reports of a remote engine."""

    number: int  # counts the engine's infills, from 1
    route: str  # "seeded": vLLM's diffusion controls (seed canvases, pins, a step cap); "plain": none
    requests: int  # completion requests sent at once (a row each)
    step_cap: int | None  # diffusion_max_steps sent, if any
    network_ms: float  # waited on the network and the server (tokenize and completion calls)
    server_steps: int | None = None  # vLLM 0.32 does not say how many steps it ran


class RemoteEngine:
    def __init__(self, url: str, settings: RemoteSettings | None = None) -> None:
        self.settings = settings or RemoteSettings()
        self.base = server_base(url)
        self.http = HttpClient(self.base, self.settings.key(), self.settings.timeout_s)
        try:
            self.facts = probe(self.http, self.settings)
        except EngineError:
            self.http.close()
            raise
        self.chars_per_token = self.facts.chars_per_token
        self.pace = Pace()
        self.info = self._info(url)
        self._stale = False  # the server went away: ask again what it is before the next request
        self._misses = 0
        self._answered_ms: deque[float] = deque(maxlen=ANSWERS_KEPT)  # completion round trips
        self.exchanges: deque[Exchange] = deque(maxlen=EXCHANGES_KEPT)
        self._infills = 0
        self._ids: dict[str, tuple[int, ...]] = {}  # text -> the server's ids for it
        self._pieces: dict[str, tuple[str, ...]] = {}  # text -> its tokens' texts, where known
        self._last: tuple[Candidate, ...] = ()  # the last answer's candidates, for token_spans
        logger.info("remote engine at %s: %s", self.base, self.facts.summary())

    def _info(self, url: str) -> EngineInfo:
        version = f", vLLM {self.facts.version}" if self.facts.version else ""
        return EngineInfo(
            name=url,
            source=f"{self.base} ({self.facts.model}{version})",
            family=self.facts.family,
            device="remote",
            dtype="remote",
            canvas_length=self.facts.canvas,
            parameters=0,
            reads_context=self.facts.family != "fim",  # a served FIM model: nothing says it learned to
        )

    def count_tokens(self, text: str) -> int:
        """An estimate from the server's characters per token: called per keystroke, it sends nothing."""
        return estimate_tokens(text, self.chars_per_token)

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Where each token of `text` lies, for a text a candidate of the last answer begins with, cut
        at a token's end (a seed of it is then made of those very ids); None for others: no repair."""
        for found in self._last:
            ends = [*found.offsets[1:], len(found.text)]
            if not found.text.startswith(text) or len(text) not in ends:
                continue
            count = ends.index(len(text)) + 1
            spans = list(zip(found.offsets[:count], ends[:count], strict=True))
            self._ids[text] = found.token_ids[:count]
            self._pieces[text] = tuple(text[a:b] for a, b in spans)
            return spans
        return None

    def reset_cache(self) -> None:
        pass  # the server keeps its own cache

    def use_allocation_window(self, window: AllocationWindow) -> None:
        pass  # the model runs elsewhere: nothing large is allocated here

    def close(self) -> None:
        self.http.close()

    def infill(self, request: InfillRequest) -> InfillResult:
        if request.decoder != "diffusion":
            raise EngineError("a remote engine decodes as its server does: no autoregressive comparison")
        # The lead goes back to the prefix: the server's sampler cannot hold the first token to it.
        request = request.with_lead_in_prefix()
        started = time.perf_counter()
        budget_s = None if request.deadline is None else request.deadline - time.monotonic()
        self._infills += 1
        try:
            result = self._infill(request, started)
        except Abandoned as why:
            return self._abandoned(why.reason, started, budget_s)
        except RemoteError as err:
            if err.kind == "unreachable":
                self._stale = True
            raise
        self._misses = 0
        return result

    def _infill(self, request: InfillRequest, started: float) -> InfillResult:
        if self._stale:  # back after an outage: the server may have come back with another model
            self.facts = probe(self.http, self.settings, request.deadline, request.cancel)
            self.info, self._stale = self._info(self.info.name), False
        facts = self.facts
        waited_before = self.http.waited_s
        texts = [*request.drafts, request.anchor, request.seed_canvas or ""] if facts.seeding else []
        ids = self._server_ids(texts, request)
        drafts = [list(ids[d]) for d in request.drafts] if facts.seeding else []
        anchor = list(ids.get(request.anchor, ())) if request.anchor else []
        seed = list(ids.get(request.seed_canvas or "", ())) if request.seed_canvas else []
        self._check_fixed(request, seed)
        canvas = layout(request, facts, len(seed), len(anchor))
        canvas = replace(canvas, max_steps=self._step_cap(request))
        planned = rows(request, facts, canvas, drafts, seed, anchor)
        prompt = prompt_fields(request, facts, self.chars_per_token, canvas.max_tokens)
        path = endpoint(facts.family)
        calls = [Call(path, body(facts.model, prompt, canvas, row, facts)) for row in planned]
        if request.observer is not None and drafts and request.drafts[0]:
            _show_seeded_draft(request.observer, request.drafts[0])
        sent = time.perf_counter()
        answers = self.http.calls(calls, request.deadline, request.cancel)
        round_trip_ms = (time.perf_counter() - sent) * 1000
        self._answered_ms.append(round_trip_ms)
        self._learn(prompt, answers[0], canvas, round_trip_ms)
        pinned = self._pinned_pieces(request, seed, planned, canvas)
        candidates, ended = self._candidates(answers, planned, canvas, facts, pinned)
        self._remember(candidates)
        route = "seeded" if any(row.seed for row in planned) or canvas.max_steps else "plain"
        network_ms = (self.http.waited_s - waited_before) * 1000
        self.exchanges.append(Exchange(self._infills, route, len(calls), canvas.max_steps, network_ms))
        return self._result(candidates, ended, answers[0], started, sent)

    @staticmethod
    def _result(
        candidates: list[Candidate], ended: bool, answer: dict, started: float, sent: float
    ) -> InfillResult:
        """The engine's result: the candidates best first, the server's count of prompt tokens."""
        finished = time.perf_counter()
        usage = _object(answer.get("usage"))
        details = _object(usage.get("prompt_tokens_details"))
        reason: StopReason = "eos" if ended else "max_tokens"
        return InfillResult(
            candidates=best_first(candidates),
            steps=0,  # the server does not say how many it ran (Exchange.server_steps: None)
            tokens_per_forward=0.0,
            stop_reason=reason,
            timings=Timings(
                prefill_ms=(sent - started) * 1000,  # tokenizing and building the requests
                denoise_ms=(finished - sent) * 1000,  # the server's answer, its round trip included
                total_ms=(finished - started) * 1000,
            ),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            reused_prompt_tokens=int(details.get("cached_tokens") or 0),  # the server's prefix cache
        )

    def _server_ids(self, texts: list[str], request: InfillRequest) -> dict[str, tuple[int, ...]]:
        """Each text's ids as the server's tokenizer makes them: remembered, the new ones asked at once."""
        wanted = [t for t in dict.fromkeys(texts) if t]
        missing = [t for t in wanted if t not in self._ids]
        if missing:
            calls = [tokenize_call(self.facts.model, t) for t in missing]
            answers = self.http.calls(calls, request.deadline, request.cancel)
            if len(self._ids) + len(missing) > MEMO_TEXTS:
                self._ids.clear()
                self._pieces.clear()
            for text, answer in zip(missing, answers, strict=True):
                tokens = answer.get("tokens")
                if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
                    raise RemoteError(f"remote engine at {self.base}: /tokenize answered no ids", "malformed")
                self._ids[text] = tuple(tokens)
        return {t: self._ids[t] for t in wanted}

    @staticmethod
    def _check_fixed(request: InfillRequest, seed: list[int]) -> None:
        outside = [p for p in request.fixed_positions if not 0 <= p < len(seed)]
        if outside:
            raise ValueError(f"fixed positions {outside} are outside the seed canvas ({len(seed)} tokens)")

    def _step_cap(self, request: InfillRequest) -> int | None:
        """The request's own cap, else one that fits the time left (none without a deadline)."""
        if not self.facts.extras:
            return None
        if request.max_steps is not None:
            return request.max_steps
        if request.deadline is None:
            return None
        return self.pace.steps_within(request.deadline - time.monotonic())

    def _pinned_pieces(
        self, request: InfillRequest, seed: list[int], planned: list[Row], canvas: Layout
    ) -> dict[int, str]:
        """The text of each pinned seed token inside the middle (a rewrite's kept tokens)."""
        if not request.fixed_positions or not any(row.pinned for row in planned):
            return {}
        pieces = self._pieces.get(request.seed_canvas or "")
        if pieces is None or len(pieces) != len(seed):
            pieces = self._detokenized(seed, request)
            if pieces:  # asked once per seed: remembered with its ids
                self._pieces[request.seed_canvas or ""] = pieces
        return {p: pieces[p] for p in request.fixed_positions if p < min(len(pieces), canvas.middle)}

    def _detokenized(self, ids: list[int], request: InfillRequest) -> tuple[str, ...]:
        """Each id's text, from one /detokenize call (for a seed no earlier answer held: seldom): the ids
        with a control token before each and at the end, cut at its text. Empty where that cannot tell
        them apart (no control token known, or a seed that holds it): then vLLM's answer stands there."""
        if self.facts.separator is None or not ids:
            return ()
        mark, text = self.facts.separator
        between = [t for i in ids for t in (mark, i)] + [mark]
        call = Call("/detokenize", {"model": self.facts.model, "tokens": between})
        answer = self.http.call(call, request.deadline, request.cancel)
        parts = str(answer.get("prompt", "")).split(text)
        if len(parts) != len(ids) + 2 or parts[0] or parts[-1] or mark in ids:
            return ()
        return tuple(parts[1:-1])

    def _candidates(
        self,
        answers: list[dict],
        planned: list[Row],
        canvas: Layout,
        facts: ServerFacts,
        pinned: dict[int, str],
    ) -> tuple[list[Candidate], bool]:
        """The candidates of every answer, and whether every one of them ended."""
        chat = facts.family != "fim"
        found: list[Candidate] = []
        ended = True
        for answer, row in zip(answers, planned, strict=True):
            choices = answer.get("choices")
            if not isinstance(choices, list):
                raise RemoteError(f"remote engine at {self.base}: an answer has no choices", "malformed")
            for choice in choices:
                try:
                    out = emitted(choice, chat)
                except ValueError as err:
                    raise RemoteError(f"remote engine at {self.base}: {err}", "malformed") from None
                made, done = candidate(out, row, canvas, facts, pinned)
                found.append(made)
                ended = ended and done
        return found, ended

    def _learn(self, prompt: dict, answer: dict, canvas: Layout, elapsed_ms: float) -> None:
        """Characters per prompt token (FIM prompts are all text of ours) and the pace of a step."""
        usage = answer.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if "prompt" in prompt and isinstance(tokens, int) and tokens > 0:
            seen = len(prompt["prompt"]) / tokens
            self.chars_per_token = (1 - LEARN) * self.chars_per_token + LEARN * seen
        if canvas.max_steps:
            self.pace.learn(elapsed_ms, canvas.max_steps)

    def _remember(self, candidates: list[Candidate]) -> None:
        """The candidates whose tokens are known one by one (FIM: their text is the tokens' text), for
        `token_spans`."""
        if self.facts.family != "fim":
            return
        self._last = tuple(c for c in candidates if c.offsets and len(c.offsets) == len(c.token_ids))

    def _abandoned(self, reason: str, started: float, budget_s: float | None) -> InfillResult:
        """No answer: superseded (the scheduler drops it), or out of time (the editor shows nothing);
        several deadlines missed in a row mean the server is too slow for the budget: said (the server
        shows it once), with the budget to set."""
        if reason == "deadline":
            self._misses += 1
            if self._misses >= MISSES_BEFORE_SLOW:
                self._misses = 0
                raise RemoteError(self._too_slow(budget_s), "timeout")
        elapsed = (time.perf_counter() - started) * 1000
        stop: StopReason = "cancelled" if reason == "cancelled" else "deadline"
        return InfillResult(
            candidates=(),
            steps=0,
            tokens_per_forward=0.0,
            stop_reason=stop,
            timings=Timings(prefill_ms=0.0, denoise_ms=elapsed, total_ms=elapsed),
            prompt_tokens=0,
            reused_prompt_tokens=0,
        )

    def _too_slow(self, budget_s: float | None) -> str:
        """The message for deadlines missed in a row: the budget they had, and one that would do."""
        budget_ms = max(0.0, (budget_s or 0.0) * 1000)
        slowest = max(self._answered_ms, default=0.0)
        suggested = suggested_budget_ms(budget_ms, slowest)
        took = f"; its answers took up to {slowest:.0f} ms" if slowest else ""
        return (
            f"remote engine at {self.base}: no answer within the latency budget (about {budget_ms:.0f} ms) "
            f"{MISSES_BEFORE_SLOW} times in a row{took}: set completion.latencyBudgetMs to {suggested} "
            f"(--budget-ms {suggested} on the command line)"
        )


def suggested_budget_ms(budget_ms: float, slowest_answer_ms: float) -> int:
    """A budget the server could meet: twice the one it missed, or a quarter over its slowest answer seen,
    whichever is more, rounded up to 100 ms."""
    wanted = max(2 * budget_ms, 1.25 * slowest_answer_ms, 100.0)
    return int(math.ceil(wanted / 100) * 100)


def _object(value: object) -> dict:
    """`value` when it is a JSON object, else an empty one (an optional part of an answer)."""
    return value if isinstance(value, dict) else {}


def _show_seeded_draft(observer: CanvasObserver, draft: str) -> None:
    """A request's first draft, seeded into the server's canvas, shown to its observer at once (all of it
    unsettled, as one piece): what a remote engine has to show before its answer, since vLLM streams no
    canvas while a block denoises. Shown without asking `due`: the observer holds it until it is time."""
    observer(CanvasStep(0, draft, (), (0.0,), (0,), draft=0))
