"""Greedy left-to-right decoding with the same weights: the encoder used as a causal LM.

Training gives the encoder a next-token loss on prompt + middle + EOS, so after `<fim_middle>` it
continues with the middle. Decoding it token by token is the baseline the diffusion sampler is
measured against (`dgemma-lsp eval --compare-ar`): same prompt, same KV cache, one token per forward.
The same loop writes the next-token draft a diffusion request may start its canvas from
(`InfillRequest.next_token_draft`). Greedy, one candidate; a seed canvas is refused (there is none)
and an anchor is not used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from engine.api import CancelToken, Candidate, InfillRequest, InfillResult, StopReason, Timings
from engine.lead import without_lead
from engine.sampler import argmax_last

if TYPE_CHECKING:
    from transformers import Cache

    from engine.local_engine import LocalEngine


@dataclass
class Greedy:
    """What greedy decoding wrote: tokens (EOS excluded), each one's probability, forwards, why it stopped."""

    tokens: list[int] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    steps: int = 0
    reason: StopReason = "max_tokens"


@torch.inference_mode()
def greedy_tokens(
    engine: LocalEngine,
    hidden: torch.Tensor,
    cache: Cache,
    max_tokens: int,
    min_tokens: int = 0,
    deadline: float | None = None,
    cancel: CancelToken | None = None,
    first_bias: torch.Tensor | None = None,
    wrote: Callable[[Greedy], None] | None = None,
) -> Greedy:
    """Greedy tokens after the encoder state `hidden` ([H], the last prompt token's), each appended to
    `cache` as it is written (the caller records or crops them), until EOS, `max_tokens`, the
    deadline or cancellation; `first_bias` ([V]) is added to the first token's logits (a lead's);
    `wrote` is shown the tokens so far after each one (an observer's partial).
    `steps` counts forward passes that produced a token: the prefill produced the first one, each
    appended token the next."""
    out = Greedy()
    while True:
        logits = engine.backbone.next_token_logits(hidden) + engine.bias  # [V]
        if first_bias is not None and not out.tokens:
            logits += first_bias
        probs = logits.softmax(dim=-1)  # what the model gave each token, EOS included
        if len(out.tokens) < min_tokens:
            logits[engine.eos_ids] = float("-inf")
        out.steps += 1
        token = int(argmax_last(logits))
        if token in engine.format.eos_ids:
            out.reason = "eos"
            return out
        out.tokens.append(token)
        out.confidence.append(float(probs[token]))
        if wrote is not None:
            wrote(out)
        if len(out.tokens) >= max_tokens:
            return out
        if cancel is not None and cancel.is_set():
            out.reason = "cancelled"
            return out
        if deadline is not None and time.monotonic() >= deadline:
            out.reason = "deadline"
            return out
        hidden = engine.backbone.encode(torch.tensor([[token]]), cache)[0, -1]


@torch.inference_mode()
def decode_autoregressive(engine: LocalEngine, request: InfillRequest) -> InfillResult:
    """Greedy decoding until EOS, max_new_tokens, the deadline or cancellation; tokens_per_forward is
    1.0 by construction."""
    if request.seed_canvas is not None:
        raise ValueError("autoregressive decoding has no canvas to seed")
    started = time.perf_counter()
    ids = engine.prompt_ids(request)
    reused, hidden = engine.prompt_cache.encode(ids)  # hidden: [1, n, H]
    prefilled = time.perf_counter()

    cache = engine.prompt_cache.working_cache(1)  # the kept cache itself: recorded below
    out = greedy_tokens(
        engine, hidden[0, -1], cache, request.max_new_tokens, request.min_new_tokens,
        request.deadline, request.cancel, engine.lead_bias(request.lead),
    )  # fmt: skip
    engine.prompt_cache.record(cache, out.tokens[: cache.get_seq_length() - len(ids)])
    finished = time.perf_counter()

    text = without_lead(engine.format.clean(engine.format.decode(out.tokens)), request.lead)
    emitted = len(out.tokens) + (1 if out.reason == "eos" else 0)
    return InfillResult(
        candidates=(Candidate(text=text, token_ids=tuple(out.tokens), confidence=tuple(out.confidence)),),
        steps=out.steps,
        tokens_per_forward=emitted / out.steps,
        stop_reason=out.reason,
        timings=Timings(
            prefill_ms=(prefilled - started) * 1000,
            denoise_ms=(finished - prefilled) * 1000,
            total_ms=(finished - started) * 1000,
        ),
        prompt_tokens=len(ids),
        reused_prompt_tokens=reused,
    )
