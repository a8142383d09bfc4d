"""Greedy left-to-right decoding with the same weights: the encoder used as a causal LM.

Training gives the encoder a next-token loss on prompt + middle + EOS, so after `<fim_middle>` it
continues with the middle. Decoding it token by token is the baseline the diffusion sampler is
measured against (`dgemma-lsp eval --compare-ar`): same prompt, same KV cache, one token per forward.
Greedy, one candidate; a seed canvas is refused (there is none) and an anchor is not used.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from engine.api import Candidate, InfillRequest, InfillResult, StopReason, Timings

if TYPE_CHECKING:
    from engine.local_engine import LocalEngine


@torch.inference_mode()
def decode_autoregressive(engine: LocalEngine, request: InfillRequest) -> InfillResult:
    """Greedy decoding until EOS, max_new_tokens, the deadline or cancellation.

    `steps` counts forward passes that produced a token: the prefill produces the first one,
    each appended token the next, so tokens_per_forward is 1.0 by construction.
    """
    if request.seed_canvas is not None:
        raise ValueError("autoregressive decoding has no canvas to seed")
    started = time.perf_counter()
    ids = engine.prompt_ids(request)
    reused, hidden = engine.prompt_cache.encode(ids)  # hidden: [1, n, H]
    prefilled = time.perf_counter()

    cache = engine.prompt_cache.working_cache(1)  # the kept cache itself; `record` what we append
    tokens: list[int] = []
    confidence: list[float] = []
    steps = 0
    reason: StopReason = "max_tokens"
    while True:
        logits = engine.backbone.next_token_logits(hidden[0, -1]) + engine.bias  # [V]
        if len(tokens) < request.min_new_tokens:
            logits[engine.eos_ids] = float("-inf")
        steps += 1
        token = int(logits.argmax())
        if token in engine.format.eos_ids:
            reason = "eos"
            break
        tokens.append(token)
        confidence.append(float(logits.softmax(dim=-1)[token]))
        if len(tokens) >= request.max_new_tokens:
            break
        if request.cancel is not None and request.cancel.is_set():
            reason = "cancelled"
            break
        if request.deadline is not None and time.monotonic() >= request.deadline:
            reason = "deadline"
            break
        hidden = engine.backbone.encode(torch.tensor([[token]]), cache)  # [1, 1, H]
        engine.prompt_cache.record(cache, [token])
    finished = time.perf_counter()

    text = engine.format.clean(engine.format.decode(tokens))
    emitted = len(tokens) + (1 if reason == "eos" else 0)
    return InfillResult(
        candidates=(Candidate(text=text, token_ids=tuple(tokens), confidence=tuple(confidence)),),
        steps=steps,
        tokens_per_forward=emitted / steps,
        stop_reason=reason,
        timings=Timings(
            prefill_ms=(prefilled - started) * 1000,
            denoise_ms=(finished - prefilled) * 1000,
            total_ms=(finished - started) * 1000,
        ),
        prompt_tokens=len(ids),
        reused_prompt_tokens=reused,
    )
