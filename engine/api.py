"""The engine's public types: one request, one result, the engine protocol and its error.

Nothing here knows about LSP, documents or editors; `dgemma_lsp` talks to the engine only
through these names.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

# A context in which an engine runs a burst of large allocations: the process's heap policy.
AllocationWindow = Callable[[], AbstractContextManager[object]]
StopReason = Literal["eos", "converged", "max_steps", "max_tokens", "deadline", "cancelled"]
Decoder = Literal["diffusion", "autoregressive"]


class EngineError(Exception):
    """A problem the user must act on (missing model, wrong file, bad option); the message says how."""


class CancelToken(Protocol):
    """Anything with `is_set()`, such as `threading.Event`; checked between denoising steps."""

    def is_set(self) -> bool: ...


class CancelFlag(threading.Event):
    """A `threading.Event` that also calls back when set: a caller waiting on something other than the
    model (a remote server's answer) wakes the moment its request is superseded, with no polling."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []
        self._guard = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._guard:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` once when the flag is set (at once if it is); returns what unregisters it."""
        with self._guard:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._guard, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)


@dataclass(frozen=True)
class CanvasStep:
    """The canvas after a denoising step, as its most confident row would emit it now: what an observer
    shows while the answer settles (the engine's raw text, before any caller post-processes it)."""

    step: int  # denoising steps the request's pass has taken (0: a draft, before the first; a next-token
    # draft is shown at 0 as it is written, token by token)
    text: str  # earlier canvases' text and this canvas's up to its first EOS, without the request's lead
    # Character ranges of `text` the model is sure of: accepted by the entropy bound at this step, fixed,
    # emitted by an earlier canvas, or in a row that has converged; the rest may still change.
    settled: tuple[tuple[int, int], ...]
    confidence: tuple[float, ...]  # each token's probability at temperature 1 (0.0 before the first step)
    offsets: tuple[int, ...]  # where each token starts in `text`
    draft: int | None = None  # the request's draft the row started from, as in Candidate.draft


class CanvasObserver(Protocol):
    """Shown the canvas as it settles, on the engine's thread, between denoising steps; it must return
    at once. The engine asks `due()` after each step and builds a CanvasStep (reads the canvas, decodes
    its text) only when it says yes, so an observer decides what it costs. An engine with one thing to show
    at once, before it waits (a remote engine's seeded draft), shows it without asking."""

    def due(self) -> bool: ...

    def __call__(self, step: CanvasStep) -> None: ...


@dataclass(frozen=True)
class Snippet:
    """Code from another file of the repository for the model to read: a window similar to the code at
    the cursor, or the definitions of names the file imports."""

    path: str  # as the model sees it: relative to the workspace folder
    text: str


@dataclass(frozen=True)
class InfillRequest:
    prefix: str
    suffix: str = ""
    language: str = ""
    max_new_tokens: int = 64
    # EOS is not allowed before this many tokens (an editor has no use for an empty middle).
    min_new_tokens: int = 0
    # An absolute `time.monotonic()` instant; the sampler returns its best canvas once it passes.
    deadline: float | None = None
    n_candidates: int = 1
    # Text to start the canvas from instead of noise (a block to rewrite, a suggestion being typed through).
    seed_canvas: str | None = None
    # Canvas indices (of the seed's tokens) that must come out unchanged.
    fixed_positions: tuple[int, ...] = ()
    # Share of the seed's other tokens replaced by noise before the first step (a rewrite's strength).
    seed_noise: float = 0.0
    # Seed tokens the model does not accept a replacement for fall back to the seed, not to noise:
    # the seed changes only where the model is confident.
    sticky_seed: bool = True
    # Text fixed at the END of the canvas (the start of the suffix): the middle is written to join it.
    anchor: str = ""
    # Text the middle must begin with, taken off the end of the document before the cursor (`prefix`
    # ends before it). At the start of an empty line the model would write the indentation alone, which
    # it learned only as one token with the line break before it ("\n" and the spaces); so the planner
    # moves that line break here, only tokens that begin with it may open the middle, and the candidates
    # come without it. Drafts are read after it too. Engines whose model learned no such tokens put it
    # back at the end of the prefix.
    lead: str = ""
    # Guesses of the middle (from the code around it): each seeds a canvas row of its own, sticky (kept
    # until the model accepts a replacement with confidence), so a right draft settles in a step or two
    # and a wrong one is rewritten where the model is sure. Drafts take the n_candidates places first;
    # fresh-noise rows fill those they leave, all in one batch. `draft_noise`: a share of each draft
    # renoised first (left to the model); off by default, as the bundled model rewrote right drafts
    # into wrong ones (docs/performance.md, "Fewer model calls and fewer steps").
    drafts: tuple[str, ...] = ()
    draft_noise: float = 0.0
    # With no drafts (and no seed), the engine writes one itself before the canvas: greedily, with the
    # next-token head over the prompt it has just encoded (the encoder is a causal LM of prompt + middle),
    # in up to half the time left; it seeds a draft row like the others. Engines without a head trained
    # for it (the remote one, the released chat checkpoint) ignore it.
    next_token_draft: bool = False
    # A candidate from that draft also carries the next-token head's probability of each of its tokens:
    # where the canvas kept the draft they come with it, else from one pass of the encoder over the
    # candidate. They tell right from wrong there; the canvas's confidence in its own head's text does
    # not (docs/performance.md). Engines without such a draft ignore it.
    next_token_confidence: bool = False
    max_steps: int | None = None  # None: the model's generation config decides
    # Tokens per canvas (0: the model's canvas length). A short line fits in a small canvas, whose steps
    # cost less; text longer than one canvas goes on in the next.
    canvas_tokens: int = 0
    seed: int = 0  # same seed, same request -> same output
    # "autoregressive": the same weights decoded left to right, one token per forward (a baseline;
    # seeds and anchors do not apply). Engines that cannot raise EngineError.
    decoder: Decoder = "diffusion"
    # Other files' code, read before the file's windows (`PromptFormat.prompt_ids`). It changes only when
    # the retrieved set does, so typing at the cursor keeps the prompt cache.
    context: tuple[Snippet, ...] = ()
    cancel: CancelToken | None = field(default=None, compare=False)
    # Told of the canvas between denoising steps (engines that cannot see theirs tell it nothing).
    observer: CanvasObserver | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise ValueError("min_new_tokens must be between 0 and max_new_tokens")
        if self.n_candidates < 1:
            raise ValueError("n_candidates must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.canvas_tokens < 0:
            raise ValueError("canvas_tokens must be 0 (the model's canvas) or positive")
        if self.fixed_positions and self.seed_canvas is None:
            raise ValueError("fixed_positions need a seed_canvas to take their tokens from")
        if not 0.0 <= self.seed_noise <= 1.0:
            raise ValueError("seed_noise must be between 0 and 1")
        if self.drafts and self.seed_canvas is not None:
            raise ValueError(
                "drafts and a seed_canvas exclude each other: a seeded canvas is the whole answer"
            )
        if self.lead and self.seed_canvas is not None:
            raise ValueError("a lead and a seed_canvas exclude each other: a seed is read from the cursor")
        if not 0.0 <= self.draft_noise <= 1.0:
            raise ValueError("draft_noise must be between 0 and 1")
        if self.decoder not in ("diffusion", "autoregressive"):
            raise ValueError("decoder must be 'diffusion' or 'autoregressive'")

    def with_lead_in_prefix(self) -> InfillRequest:
        """The same request with its lead back at the end of the prefix: for a seed, which is read from
        the cursor, and for a model that learned no line break joined to indentation."""
        return replace(self, prefix=self.prefix + self.lead, lead="") if self.lead else self

    @staticmethod
    def deadline_in(ms: float) -> float:
        return time.monotonic() + ms / 1000.0


@dataclass(frozen=True)
class Candidate:
    text: str
    token_ids: tuple[int, ...]
    # Probability the model gave each emitted token at the last step (temperature 1).
    confidence: tuple[float, ...]
    # Where each token's text starts in `text` (for per-line confidence).
    offsets: tuple[int, ...] = ()
    # The index of the request's draft this row started from (len(request.drafts): the engine's own
    # next-token draft); None: noise.
    draft: int | None = None
    # The next-token head's probability of each token (after the prompt and the tokens before it), for
    # a candidate from the engine's next-token draft when the request asked for it; else empty.
    head_confidence: tuple[float, ...] = ()

    def line_confidence(self) -> list[float]:
        """The lowest token confidence on each line of `text`.

        A token counts for the line of its first character after any leading line breaks: "\n    "
        belongs to the line it indents.
        """
        return self._lowest_per_line(self.confidence)

    def line_head_confidence(self) -> list[float]:
        """The lowest next-token head probability on each line of `text` (all 1.0 when unscored)."""
        return self._lowest_per_line(self.head_confidence)

    def _lowest_per_line(self, values: tuple[float, ...]) -> list[float]:
        lowest = [1.0] * (self.text.count("\n") + 1)
        for offset, prob in zip(self.offsets, values, strict=False):
            while offset < len(self.text) and self.text[offset] == "\n":
                offset += 1
            line = min(self.text.count("\n", 0, offset), len(lowest) - 1)
            lowest[line] = min(lowest[line], prob)
        return lowest

    @property
    def mean_confidence(self) -> float:
        return sum(self.confidence) / len(self.confidence) if self.confidence else 0.0

    @property
    def mean_head_confidence(self) -> float:
        return sum(self.head_confidence) / len(self.head_confidence) if self.head_confidence else 0.0


def best_first(candidates: Iterable[Candidate]) -> tuple[Candidate, ...]:
    """Distinct texts, each its most confident candidate, best first by mean confidence."""
    seen: dict[str, Candidate] = {}
    for found in candidates:
        if found.text not in seen or found.mean_confidence > seen[found.text].mean_confidence:
            seen[found.text] = found
    return tuple(sorted(seen.values(), key=lambda c: c.mean_confidence, reverse=True))


def token_ranges(offsets: tuple[int, ...], chosen: list[bool], length: int) -> tuple[tuple[int, int], ...]:
    """Character ranges of a text of `length` covered by runs of the `chosen` tokens (token i runs from
    its offset to the next token's, the last one to the end)."""
    ranges: list[tuple[int, int]] = []
    ends = (*offsets[1:], length)
    for start, end, take in zip(offsets, ends, chosen, strict=False):
        end = min(end, length)
        if not take or end <= start:
            continue
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return tuple(ranges)


@dataclass(frozen=True)
class Timings:
    prefill_ms: float  # tokenizing the prompt and encoding its new tokens
    denoise_ms: float  # the canvases, from the first decoder step to the text
    total_ms: float
    forward_ms: float = 0.0  # time inside model forward passes (the rest is the engine's own overhead)
    canvas_ms: float = 0.0  # the denoising steps alone, the sampler's math included (no drafts, no prefill)
    step_forward_ms: float = 0.0  # the denoising steps' decoder forward passes alone


@dataclass(frozen=True)
class InfillResult:
    candidates: tuple[Candidate, ...]  # distinct texts, best first
    steps: int  # decoder forward passes, all canvases together
    tokens_per_forward: float
    stop_reason: StopReason
    timings: Timings
    prompt_tokens: int
    reused_prompt_tokens: int  # prompt tokens whose KV came from the previous request
    draft_forwards: int = 0  # forward passes of the engine's own next-token draft (not in `steps`)

    @property
    def text(self) -> str:
        return self.candidates[0].text if self.candidates else ""

    @property
    def confidence(self) -> tuple[float, ...]:
        return self.candidates[0].confidence if self.candidates else ()


@dataclass(frozen=True)
class EngineInfo:
    name: str  # what the user asked for: "default", a folder, a hub id or a URL
    source: str  # where it was loaded from
    family: str  # prompt format family: "fim" or "gemma4-chat" or "remote"
    device: str
    dtype: str
    canvas_length: int
    parameters: int
    # Whether the model learned to read other files' snippets before the file (InfillRequest.context):
    # our checkpoints trained with them (training.json's context_share), and instruction-tuned ones, which
    # read them as part of the instruction. Callers leave the context out for others by default.
    reads_context: bool = False
    # The confidence gates calibrated for this model (calibration.json beside its weights), e.g.
    # {"min_mean_confidence_percent": 40, "min_line_confidence_percent": 10,
    # "min_next_token_confidence_percent": 30}; empty: none shipped.
    gates: dict[str, int] = field(default_factory=dict)
    # The show-or-not decision fitted for this model on typing sessions (decision.json beside its
    # weights: logistic weights by feature name, thresholds per eagerness); empty: none shipped.
    decision: dict = field(default_factory=dict)
    # The languages the model was trained on (its training.json); None: any (a checkpoint made elsewhere).
    languages: tuple[str, ...] | None = None


class Engine(Protocol):
    """What callers may use of an engine; nothing else of it is public."""

    info: EngineInfo

    def infill(self, request: InfillRequest) -> InfillResult: ...

    def count_tokens(self, text: str) -> int: ...

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """(start, end) characters of each token a seed canvas of `text` holds; None: no canvas to seed."""
        ...

    def reset_cache(self) -> None:
        """Forget the prompt kept from the last request (the next one encodes its prompt in full)."""
        ...

    def use_allocation_window(self, window: AllocationWindow) -> None:
        """Run the engine's bursts of large allocations (a long prompt's prefill) inside `window()`: the
        process's heap policy (the server's `HeldHeap.window`)."""
        ...

    def close(self) -> None: ...
