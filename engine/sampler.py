"""The infill sampler: denoise one canvas against an encoded prompt.

Uniform-state diffusion as DiffusionGemma does it: every step the decoder predicts all canvas
positions (seeing its own previous logits through self-conditioning), the lowest-entropy positions
whose summed entropy stays under a bound are accepted, and all others are replaced by random tokens
again. Our additions for an editor: fixed positions that never change, a deadline and a cancellation
flag checked between steps (the best canvas so far is returned, before a step that would overrun
the deadline), and an early stop when the canvas is stable and confident up to its first EOS.

Shapes: B = candidates, C = canvas length, V = vocabulary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from engine.api import CancelToken, StopReason
from engine.buffers import Buffers

if TYPE_CHECKING:
    from transformers import Cache

    from engine.backbone import Backbone

# Added to the logits of tokens the canvas may never hold; finite so that entropies stay finite.
SUPPRESS = -1.0e4


@dataclass(frozen=True)
class SamplerSettings:
    max_steps: int = 16
    entropy_bound: float = 0.1
    t_max: float = 0.8
    t_min: float = 0.4
    stability_steps: int = 1
    confidence_threshold: float = 0.005

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.entropy_bound <= 0:
            raise ValueError("entropy_bound must be > 0")
        if not 0 < self.t_min <= self.t_max:
            raise ValueError("temperatures must satisfy 0 < t_min <= t_max")
        if self.stability_steps < 0 or self.confidence_threshold <= 0:
            raise ValueError("stability_steps >= 0 and confidence_threshold > 0 are required")


@dataclass
class CanvasOutcome:
    tokens: torch.Tensor  # [B, C] argmax canvas of the last step, fixed positions included
    confidence: torch.Tensor  # [B, C] probability of each token at temperature 1
    steps: int
    reason: StopReason
    forward_ms: float  # time inside the decoder's forward passes


@dataclass
class CanvasSpec:
    """What the caller wants in the canvas before denoising starts."""

    init: torch.Tensor  # [B, C] starting tokens (noise, or a seed)
    fixed: torch.Tensor  # [B, C] bool: positions whose `init` token is kept
    middle_length: int = 0  # positions before a fixed anchor at the end (0: the whole canvas)
    # [B, C] bool: positions that keep (and show) their `init` token, not noise, until the model
    # accepts a replacement with confidence (a seed or draft changed only where the model is sure).
    sticky: torch.Tensor | None = None
    min_tokens: int = 0  # canvas positions where EOS may not be chosen (the middle is at least this long)
    # [V] added to the first position's logits: only the tokens a request's lead allows open the middle.
    first_bias: torch.Tensor | None = None
    # [B, C] the canvas a seed or draft proposes, before any of it was renoised: a row whose first
    # argmax equals it is already stable (a right draft can stop after one step).
    guess: torch.Tensor | None = None
    # Stop once this many rows have converged (0: all of them): the caller shows only that many, so
    # when a right draft settles in a step or two, the rows still moving need not be waited for.
    enough: int = 0

    def __post_init__(self) -> None:
        if not self.middle_length:
            self.middle_length = self.init.shape[1]


class StepWatch(Protocol):
    """Shown the canvas between steps when it says it is `due` (nothing is read off the canvas otherwise):
    the argmax each row would emit now ([B, C]), each token's confidence at temperature 1 ([B, C]) and
    which positions are settled ([B, C] bool). The tensors are the sampler's own: read them at once."""

    def due(self) -> bool: ...

    def seen(
        self, step: int, tokens: torch.Tensor, confidence: torch.Tensor, settled: torch.Tensor
    ) -> None: ...


def noise_canvas(batch: int, length: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=generator, device=generator.device)


def suppression_bias(vocab: int, suppressed: tuple[int, ...], device: torch.device) -> torch.Tensor:
    bias = torch.zeros(vocab, device=device)
    bias[list(suppressed)] = SUPPRESS
    return bias  # [V]


def temperature(settings: SamplerSettings, remaining: int) -> float:
    """t_min + (t_max - t_min) * remaining / N, remaining counting down N..1: transformers' schedule
    (LinearTemperatureScheduleLogitsProcessor), so the released checkpoint samples as its reference does."""
    return settings.t_min + (settings.t_max - settings.t_min) * remaining / settings.max_steps


def sample(probs: torch.Tensor, generator: torch.Generator, in_place: bool = False) -> torch.Tensor:
    """One token per row of `probs` ([..., V]) by inverse CDF (cheaper on CPU than multinomial);
    `in_place`: `probs` may be overwritten by its cumulative sums."""
    draw = torch.rand(*probs.shape[:-1], 1, generator=generator, device=probs.device)
    cdf = probs.cumsum_(dim=-1) if in_place else probs.cumsum(dim=-1)
    index = torch.searchsorted(cdf, draw).squeeze(-1)
    return index.clamp_(max=probs.shape[-1] - 1)  # [...]


def sample_where(
    probs: torch.Tensor,
    where: torch.Tensor,
    fallback: torch.Tensor,
    generator: torch.Generator,
    scratch: torch.Tensor | None = None,
):
    """Tokens sampled from `probs` ([B, C, V]) at the `where` positions ([B, C] bool), `fallback` elsewhere:
    only the positions that are kept pay for a cumulative sum over the vocabulary (in `scratch`, as
    large as `probs`, when given)."""
    out = fallback.clone(memory_format=torch.contiguous_format)
    vocab = probs.shape[-1]
    index = where.reshape(-1).nonzero().squeeze(-1)
    rows = probs.reshape(-1, vocab)
    into = None if scratch is None else scratch.view(-1, vocab)[: len(index)]
    kept = torch.index_select(rows, 0, index, out=into)
    out.view(-1)[index] = sample(kept, generator, in_place=True)  # the positions `where` picks, in order
    return out  # [B, C]


def confidence_of(
    logits: torch.Tensor, bias: torch.Tensor, tokens: torch.Tensor, scratch: torch.Tensor | None = None
) -> torch.Tensor:
    """Probability of `tokens` ([B, C]) at temperature 1 (worked out in `scratch`, shaped like `logits`,
    when given)."""
    scaled = torch.add(logits.float(), bias, out=scratch)
    return torch.softmax(scaled, dim=-1, out=scaled).gather(-1, tokens[..., None]).squeeze(-1)


def argmax_last(values: torch.Tensor) -> torch.Tensor:
    """Index of the largest value over the last dimension (the first one on ties, as torch's max): on the
    CPU through numpy, whose vectorised argmax over a vocabulary row is an order of magnitude faster
    than torch's reductions with an index."""
    if values.device.type != "cpu" or values.dtype != torch.float32 or not values.is_contiguous():
        return values.max(dim=-1).indices
    rows = values.view(-1, values.shape[-1]).numpy()
    return torch.from_numpy(rows.argmax(axis=-1)).view(values.shape[:-1])


def entropy_bound_accept(entropy: torch.Tensor, bound: float) -> torch.Tensor:
    """Accept the lowest-entropy positions while sum(entropy) - max(entropy) <= bound (arXiv 2505.24857)."""
    sorted_entropy, order = entropy.sort(dim=-1)
    keep_sorted = (sorted_entropy.cumsum(dim=-1) - sorted_entropy) <= bound
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # [B, C] bool


def live_positions(tokens: torch.Tensor, fixed: torch.Tensor, eos_ids: torch.Tensor) -> torch.Tensor:
    """Positions that matter for stopping: not fixed, and not after the first EOS."""
    is_eos = torch.isin(tokens, eos_ids)
    after_eos = (is_eos.cumsum(dim=-1) - is_eos.long()) > 0
    return ~fixed & ~after_eos  # [B, C]


class Stopper:
    """Stable (the same live tokens for `stability_steps` steps) and confident (low mean entropy of them).

    Live tokens are those up to the first EOS: what comes after it is never shown.
    """

    def __init__(
        self,
        settings: SamplerSettings,
        fixed: torch.Tensor,
        eos_ids: torch.Tensor,
        initial: torch.Tensor | None = None,
    ) -> None:
        self.settings = settings
        self.fixed = fixed
        self.eos_ids = eos_ids
        self.unchanged = torch.zeros(fixed.shape[0], dtype=torch.long, device=fixed.device)
        # A seeded row whose first argmax is its seed is stable at once: a right draft stops early.
        self.previous: torch.Tensor | None = initial
        self.previous_live = None if initial is None else live_positions(initial, fixed, eos_ids)

    def update(self, argmax: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        live = live_positions(argmax, self.fixed, self.eos_ids)
        if self.previous is not None:
            shown = live | self.previous_live  # in either text
            same = ((argmax == self.previous) | ~shown).all(dim=-1)
            self.unchanged = torch.where(same, self.unchanged + 1, torch.zeros_like(self.unchanged))
        self.previous, self.previous_live = argmax, live
        mean_entropy = (entropy * live).sum(-1) / live.sum(-1).clamp(min=1)
        confident = mean_entropy < self.settings.confidence_threshold
        return (self.unchanged >= self.settings.stability_steps) & confident  # [B] bool


@torch.inference_mode()
def denoise(
    backbone: Backbone,
    cache: Cache,
    spec: CanvasSpec,
    settings: SamplerSettings,
    bias: torch.Tensor,
    eos_ids: torch.Tensor,
    generator: torch.Generator,
    deadline: float | None = None,
    cancel: CancelToken | None = None,
    buffers: Buffers | None = None,
    watch: StepWatch | None = None,
) -> CanvasOutcome:
    """Denoise one canvas; `cache` holds the encoded prompt and is only read; `buffers`: where the
    arrays over the vocabulary are worked out (the engine's, kept from one request to the next);
    `watch`: shown the seeded canvas before the first step and the canvas after each step but the last.

    All tensors live on the backbone's device (bias, eos_ids, spec and generator included).
    """
    batch, length = spec.init.shape
    vocab = bias.shape[0]
    start = cache.get_seq_length()
    positions = torch.arange(start, start + length, device=spec.init.device)[None]  # [1, C]
    step = backbone.canvas_step(cache, spec.init, positions)
    buffers = buffers if buffers is not None else Buffers()
    shape, device = (batch, length, vocab), spec.init.device
    names = ("logits", "processed", "log_probs", "probs")
    logits_out, processed, log_probs, probs = (buffers.get(n, shape, torch.float32, device) for n in names)
    fixed = spec.fixed
    canvas = spec.init.clone()
    final = spec.init.clone()
    final_confidence = torch.zeros(batch, length, device=canvas.device)
    stopper = Stopper(settings, fixed, eos_ids, spec.guess)
    done = torch.zeros(batch, dtype=torch.bool, device=canvas.device)
    self_conditioning: torch.Tensor | None = None
    reason: StopReason = "max_steps"
    steps = 0
    forward_s = 0.0
    if watch is not None and spec.guess is not None and watch.due():  # a seed or draft, shown at once
        watch.seen(0, spec.guess, torch.zeros_like(final_confidence), fixed)
    for remaining in range(settings.max_steps, 0, -1):
        forward_start = time.perf_counter()
        # The previous step's probabilities are still in `probs`: the step's self-conditioning reads them.
        logits = step(canvas, self_conditioning, out=logits_out, probabilities=probs if steps else None)
        torch.add(logits.float(), bias, out=processed)
        if spec.min_tokens:
            processed[:, : spec.min_tokens, eos_ids] = SUPPRESS
        if spec.first_bias is not None:
            processed[:, 0] += spec.first_bias
        forward_s += time.perf_counter() - forward_start
        steps += 1
        processed.mul_(1.0 / temperature(settings, remaining))  # what the reference samples from
        torch.log_softmax(processed, dim=-1, out=log_probs)
        torch.exp(log_probs, out=probs)
        argmax = torch.where(fixed, spec.init, argmax_last(log_probs))
        entropy = -log_probs.mul_(probs).sum(dim=-1).masked_fill(fixed, 0.0)  # [B, C]; log_probs spent
        accepted = entropy_bound_accept(entropy, settings.entropy_bound) | fixed
        if spec.sticky is not None:
            # A seed or draft token stays what the row shows until the model accepts a replacement
            # with confidence; a kept one is settled (its entropy does not hold the row back).
            argmax = torch.where(spec.sticky & ~accepted, spec.init, argmax)
            settled_entropy = entropy.masked_fill(spec.sticky & (argmax == spec.init), 0.0)
        else:
            settled_entropy = entropy
        noise = noise_canvas(batch, length, vocab, generator)
        if spec.sticky is not None:
            noise = torch.where(spec.sticky, spec.init, noise)
        sampled = sample_where(probs, accepted & ~fixed, noise, generator, scratch=log_probs)
        next_canvas = torch.where(fixed, spec.init, sampled)
        # Rows that already converged keep what they had; the others move on.
        live_row = ~done[:, None]
        final = torch.where(live_row, argmax, final)
        canvas = torch.where(live_row, next_canvas, canvas)
        newly_done = stopper.update(argmax, settled_entropy) & ~done
        if bool(newly_done.any()):  # a row's confidence is read once, when it stops changing
            confidence = confidence_of(logits, bias, final, scratch=log_probs)
            final_confidence[newly_done] = confidence[newly_done]
        done |= newly_done
        # The next step sees this step's processed logits, in the step's dtype, as in transformers'
        # generate (a converged row's output is no longer read, so what it sees does not matter).
        self_conditioning = processed.to(logits.dtype)
        if bool(done.all()) or (spec.enough and int(done.sum()) >= spec.enough):
            reason = "converged"
            break
        if cancel is not None and cancel.is_set():
            reason = "cancelled"
            break
        # Stop when the next step would end past the deadline (a step takes about as long as the
        # last one), not only once it has passed: the answer then comes within its budget.
        if deadline is not None and time.monotonic() + (time.perf_counter() - forward_start) >= deadline:
            reason = "deadline"
            break
        if watch is not None and remaining > 1 and watch.due():  # another step follows: the canvas now
            confidence = confidence_of(logits, bias, final, scratch=log_probs)
            rows = done[:, None]
            watch.seen(steps, final, torch.where(rows, final_confidence, confidence), accepted | rows)
    if steps and not bool(done.all()):  # the rows still moving: confidence from the last step's logits
        rows = ~done
        final_confidence[rows] = confidence_of(logits, bias, final, scratch=log_probs)[rows]
    return CanvasOutcome(
        tokens=final, confidence=final_confidence, steps=steps, reason=reason, forward_ms=forward_s * 1000
    )
