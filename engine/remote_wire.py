"""What a remote engine sends and reads back: the canvas it asks for, the JSON of each request, and a
Candidate from each choice. Pure functions of plain values: no HTTP here.

One infill is one or more requests sent at once, one per canvas row that starts differently: each
draft seeds a row of its own, and the rows from noise share one request (`n`). A seed canvas holds
exactly the canvas width in ids: the draft (then an end-of-text id), noise after it, and the anchor
(the start of the suffix) pinned at its end. vLLM 0.32 holds a pinned position's id through every
denoising step but answers the model's own choice there, so the pinned ids are put back here: what
was pinned comes back exactly as it was sent.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from engine.api import Candidate, InfillRequest
from engine.prompts import (
    CONTEXT_SHARE,
    SNIPPET,
    FimFormat,
    Gemma4ChatFormat,
    fit_windows,
    snippet_text,
    strip_fences,
)
from engine.remote_server import ServerFacts

MIN_CANVAS = 16  # a short request gets a short canvas (its steps cost less), as the local engine does
# Prompt tokens kept free for the chat prompt's instruction and template (the FIM prompt's marks: 4).
CHAT_RESERVE = 128
FIM_RESERVE = 8
WINDOW_SAFETY = 0.9  # characters per token are an estimate: fit the windows with room to spare


@dataclass(frozen=True)
class Layout:
    """The canvas every request of one infill shares."""

    width: int  # ids per canvas (0: the server's own canvas, nothing seeded)
    middle: int  # positions of the canvas before the anchor: where the middle is written
    max_tokens: int
    read_only: bool  # exactly one canvas, end-of-text cut here (vLLM skips the commit forward)
    max_steps: int | None = None

    @property
    def anchored(self) -> bool:
        return 0 < self.middle < self.width


@dataclass(frozen=True)
class Row:
    """One request: `count` candidates that start from the same canvas."""

    count: int
    draft: int | None = None  # which of the request's drafts seeds it; None: noise
    seed: tuple[int, ...] = ()  # the whole start canvas; empty: the server's own noise
    pinned: tuple[int, ...] = ()  # positions held at the seed


@dataclass(frozen=True)
class Emitted:
    """One choice as the server answered it."""

    text: str
    token_ids: tuple[int, ...] = ()
    pieces: tuple[str, ...] = ()  # each token's text, in order
    logprobs: tuple[float, ...] = ()
    finish: str = ""


def endpoint(family: str) -> str:
    return "/v1/completions" if family == "fim" else "/v1/chat/completions"


def prompt_fields(
    request: InfillRequest, facts: ServerFacts, chars_per_token: float, max_tokens: int
) -> dict[str, object]:
    """The prompt of `request` in the served family's format (the other files' snippets first, in at most
    1/CONTEXT_SHARE of it), its windows fitted to the served length."""
    chat = facts.family != "fim"
    room: int | None = None
    if facts.max_model_len:
        reserve = CHAT_RESERVE if chat else FIM_RESERVE
        tokens = max(0, facts.max_model_len - max_tokens - reserve)
        room = int(tokens * chars_per_token * WINDOW_SAFETY)  # in characters
    if chat:
        snippets = [SNIPPET.format(path=s.path, text=s.text) for s in request.context]
    else:
        snippets = [snippet_text(s) for s in request.context] if facts.file_sep else []
    kept = _fitting(snippets, None if room is None else room // CONTEXT_SHARE)
    prefix, suffix = request.prefix, request.suffix
    if room is not None:
        prefix, suffix = fit_windows(prefix, suffix, room - sum(len(s) + 2 for s in kept))
    if chat:
        return {"messages": Gemma4ChatFormat.messages(prefix, suffix, request.language, kept)}
    return {"prompt": FimFormat.prompt_text(prefix, suffix, request.language, request.context[: len(kept)])}


def _fitting(snippets: list[str], room: int | None) -> list[str]:
    """The snippets, in order, as many as fit in `room` characters (all without a limit)."""
    kept, used = [], 0
    for snippet in snippets:
        if room is not None and used + len(snippet) + 2 > room:
            break
        kept.append(snippet)
        used += len(snippet) + 2
    return kept


def layout(request: InfillRequest, facts: ServerFacts, seed_len: int, anchor_len: int) -> Layout:
    """The canvas for `request`: its width, where the anchor starts, how many tokens to ask for."""
    if not facts.seeding:
        tokens = request.max_new_tokens
        return Layout(width=0, middle=tokens, max_tokens=tokens, read_only=False)
    served = facts.canvas
    one_canvas = bool(anchor_len or request.seed_canvas is not None)
    if seed_len:
        width = min(served, seed_len + max(8, seed_len // 4) + anchor_len)
    else:
        block = served if one_canvas or not request.canvas_tokens else min(served, request.canvas_tokens)
        width = min(block, max(MIN_CANVAS, 8 * math.ceil(request.max_new_tokens / 8)))
    if anchor_len and anchor_len < served:
        width = max(width, anchor_len + 1)
    middle = width - anchor_len if anchor_len < width else width
    max_tokens = width if one_canvas else request.max_new_tokens
    return Layout(width=width, middle=middle, max_tokens=max_tokens, read_only=max_tokens <= width)


def rows(
    request: InfillRequest,
    facts: ServerFacts,
    canvas: Layout,
    drafts: list[list[int]],
    seed: list[int],
    anchor: list[int],
) -> list[Row]:
    """The requests of one infill: a row per draft, then the rest of the candidates from noise."""
    if not canvas.width:
        return [Row(count=request.n_candidates)]
    rng = random.Random(request.seed)
    anchored = anchor[: canvas.width - canvas.middle] if canvas.anchored else []
    pins = tuple(range(canvas.middle, canvas.middle + len(anchored)))
    eos = facts.eos_ids[0]
    out: list[Row] = []
    for index, draft in enumerate(drafts):
        written = [*draft, eos] if len(draft) < canvas.middle else draft[: canvas.middle]
        out.append(Row(1, index, _canvas(written, anchored, canvas.width, facts.vocab_size, rng), pins))
    left = max(len(drafts), request.n_candidates) - len(drafts)
    if left and (seed or anchored):
        start = _noised(seed[: canvas.middle], request, facts.vocab_size, rng)
        fixed = tuple(p for p in request.fixed_positions if p < len(start))
        start_canvas = _canvas(start, anchored, canvas.width, facts.vocab_size, rng)
        out.append(Row(left, None, start_canvas, fixed + pins))
    elif left:
        out.append(Row(left))
    return out


def _noised(seed: list[int], request: InfillRequest, vocab: int, rng: random.Random) -> list[int]:
    """The seed with a `seed_noise` share of its ids (never a fixed one) replaced by noise."""
    fixed = set(request.fixed_positions)
    if request.seed_noise <= 0:
        return list(seed)
    return [
        t if i in fixed or rng.random() >= request.seed_noise else rng.randrange(vocab)
        for i, t in enumerate(seed)
    ]


def _canvas(
    start: list[int], anchor: list[int], width: int, vocab: int, rng: random.Random
) -> tuple[int, ...]:
    """`start`, noise up to the anchor, the anchor at the end: exactly `width` ids."""
    fill = width - len(start) - len(anchor)
    return (*start, *(rng.randrange(vocab) for _ in range(fill)), *anchor)


def body(model: str, prompt: dict, canvas: Layout, row: Row, facts: ServerFacts) -> dict[str, Any]:
    """The JSON of one request: only sampling parameters a diffusion model accepts, the extras in
    vllm_xargs. vLLM refuses temperature, seed, min_p and min_tokens for diffusion models, so none is sent."""
    chat = facts.family != "fim"
    payload: dict[str, Any] = {
        "model": model,
        **prompt,
        "max_tokens": canvas.max_tokens,
        "n": row.count,
        "logprobs": True if chat else 0,
    }
    if not facts.extras:
        return payload
    payload["return_token_ids"] = True
    xargs: dict[str, Any] = {}
    if canvas.width and canvas.width < facts.canvas:
        xargs["diffusion_canvas_length"] = canvas.width
    if row.seed:
        xargs["diffusion_seed_canvas"] = list(row.seed)
    if row.pinned:
        xargs["diffusion_pinned"] = list(row.pinned)
    if canvas.max_steps:
        xargs["diffusion_max_steps"] = canvas.max_steps
    if canvas.read_only and canvas.width:
        xargs["diffusion_read_only"] = 1
    if xargs:
        payload["vllm_xargs"] = xargs
    return payload


def emitted(choice: object, chat: bool) -> Emitted:
    """A choice of a completion (or chat completion) answer; ValueError when it is not one."""
    if not isinstance(choice, dict):
        raise ValueError("a choice is not an object")
    message = choice.get("message") if chat else None
    text = (message or {}).get("content") if chat else choice.get("text")
    if not isinstance(text, str):
        raise ValueError("a choice has no text")
    ids = choice.get("token_ids") or ()
    pieces, logprobs = _token_logprobs(choice.get("logprobs"), chat)
    if ids and len(ids) != len(pieces):
        pieces, logprobs = (), ()  # they do not describe the same tokens: trust neither
    return Emitted(text, tuple(int(i) for i in ids), pieces, logprobs, str(choice.get("finish_reason") or ""))


def _token_logprobs(logprobs: object, chat: bool) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Each token's text and log-probability, from either API's logprobs (empty when absent)."""
    if not isinstance(logprobs, dict):
        return (), ()
    if chat:
        content = logprobs.get("content") or []
        pieces = tuple(str(t.get("token", "")) for t in content if isinstance(t, dict))
        values = tuple(float(t.get("logprob") or 0.0) for t in content if isinstance(t, dict))
    else:
        pieces = tuple(str(t) for t in logprobs.get("tokens") or ())
        values = tuple(float(v) if v is not None else 0.0 for v in logprobs.get("token_logprobs") or ())
    return (pieces, values) if len(pieces) == len(values) else ((), ())


def candidate(
    out: Emitted, row: Row, canvas: Layout, facts: ServerFacts, pinned_pieces: dict[int, str]
) -> tuple[Candidate, bool]:
    """The middle a choice holds and whether it ended (an end-of-text or control id): pinned ids put
    back, cut before the anchor and at the first control id; the chat family's fences stripped."""
    if not out.pieces:
        text = out.text if facts.family == "fim" else strip_fences(out.text)
        return Candidate(text=text, token_ids=out.token_ids, confidence=()), out.finish == "stop"
    ids, pieces = list(out.token_ids), list(out.pieces)
    probs = [math.exp(v) for v in out.logprobs]
    for at in row.pinned:
        if at < len(ids) and at < canvas.middle and at in pinned_pieces:
            ids[at], pieces[at], probs[at] = row.seed[at], pinned_pieces[at], 1.0
    end = canvas.middle if canvas.width else len(pieces)
    controls = set(facts.control_ids)
    cut = next((i for i, t in enumerate(ids[:end]) if t in controls), None)
    ended = cut is not None or out.finish == "stop"
    keep = min(end, len(pieces)) if cut is None else cut
    offsets, at = [], 0
    for piece in pieces[:keep]:
        offsets.append(at)
        at += len(piece)
    text = "".join(pieces[:keep])
    if facts.family != "fim":
        text, offsets = _cleaned(text, offsets)
    kept_ids = tuple(ids[:keep]) if ids else ()
    return Candidate(text, kept_ids, tuple(probs[:keep]), tuple(offsets), row.draft), ended


def _cleaned(text: str, offsets: list[int]) -> tuple[str, list[int]]:
    """The chat answer without its code fences, offsets moved with it."""
    clean = strip_fences(text)
    if clean == text:
        return text, offsets
    start = text.find(clean)
    return clean, [min(max(0, o - start), len(clean)) for o in offsets]
