"""An engine running a DiffusionGemma checkpoint in this process.

prompt -> encoder prefill (reusing the previous request's KV) -> [a next-token draft when the request
brings none] -> one or more canvases denoised by `engine.sampler` -> text up to the first EOS, per
candidate. One worker thread calls `infill`; the engine keeps the prompt cache between calls and is
not thread-safe.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace

import torch

from engine.api import (
    AllocationWindow,
    Candidate,
    CanvasObserver,
    CanvasStep,
    EngineInfo,
    InfillRequest,
    InfillResult,
    StopReason,
    Timings,
    best_first,
    token_ranges,
)
from engine.autoregressive import Greedy, decode_autoregressive, greedy_tokens
from engine.backbone import Backbone
from engine.buffers import Buffers
from engine.lead import lead_bias, offsets_without_lead, without_lead
from engine.prompt_cache import PromptCache
from engine.prompts import PromptFormat
from engine.sampler import CanvasSpec, SamplerSettings, denoise, noise_canvas, suppression_bias

MIN_CANVAS = 16
MAX_SEEDED_CANVAS = 256  # a rewrite's canvas holds its block: longer than a completion's
# The next-token draft may spend this share of the time left before the deadline; the canvas has the rest.
NEXT_TOKEN_DRAFT_SHARE = 0.5


@dataclass
class _Row:
    """What one candidate has emitted so far."""

    tokens: list[int] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    ended: bool = False  # reached EOS


class LocalEngine:
    def __init__(
        self,
        backbone: Backbone,
        prompt_format: PromptFormat,
        settings: SamplerSettings,
        info: EngineInfo,
        max_prompt_tokens: int = 2048,
    ) -> None:
        self.backbone = backbone
        self.format = prompt_format
        self.settings = settings
        self.info = info
        self.max_prompt_tokens = max_prompt_tokens
        self.canvas_length = backbone.canvas_length
        self.device = backbone.device
        self.bias = suppression_bias(
            backbone.text_config.vocab_size, prompt_format.suppressed_ids, self.device
        )
        self.eos_ids = torch.tensor(sorted(prompt_format.eos_ids), device=self.device)
        self.prompt_cache = PromptCache(backbone)
        self.buffers = Buffers()  # the sampler's arrays over the vocabulary, kept between requests
        self._lead_biases: dict[str, torch.Tensor] = {}  # lead -> which tokens may open the middle
        # Our fill-in-the-middle checkpoints train the encoder's next-token head on prompt + middle
        # (training/objective.py); nothing says the released chat checkpoint's writes a middle.
        self.writes_next_token_drafts = prompt_format.family == "fim"

    def warm_up(self) -> None:
        """One tiny request, so the first real one does not pay for first-call setup in torch (a lead
        too: the tokens that may open a line are worked out here, not at the first empty line)."""
        self.infill(InfillRequest(prefix="x = 1", suffix="\n", lead="\n", max_new_tokens=8, max_steps=1))
        self.prompt_cache.reset()

    def lead_bias(self, lead: str) -> torch.Tensor | None:
        """[V] for the first token of a middle that must begin with `lead` (worked out once per lead);
        None without one."""
        if not lead:
            return None
        if lead not in self._lead_biases:
            vocab = self.bias.shape[0]
            self._lead_biases[lead] = lead_bias(vocab, self.format.decode, lead, self.device)
        return self._lead_biases[lead]

    def use_allocation_window(self, window: AllocationWindow) -> None:
        self.prompt_cache.window = window

    def count_tokens(self, text: str) -> int:
        return len(self.format.encode(text))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Where each token of `text` lies, as a seed canvas would hold it (for targeted renoising)."""
        return self.format.token_spans(text)

    def reset_cache(self) -> None:
        self.prompt_cache.reset()

    def close(self) -> None:
        self.prompt_cache.reset()

    def prompt_ids(self, request: InfillRequest) -> list[int]:
        return self.format.prompt_ids(
            request.prefix, request.suffix, request.language, self.max_prompt_tokens, request.context
        )

    def infill(self, request: InfillRequest) -> InfillResult:
        if request.lead and self.format.family != "fim":
            # Only our fill-in-the-middle checkpoints learned the line break and indentation as one
            # token; the chat checkpoint answers in a message: the lead goes back to the prefix.
            request = request.with_lead_in_prefix()
        if request.decoder == "autoregressive":
            return decode_autoregressive(self, request)
        started = time.perf_counter()
        ids = self.prompt_ids(request)
        tokenized = time.perf_counter()
        reused, hidden = self.prompt_cache.encode(ids)
        prefilled = time.perf_counter()
        forward_ms = (prefilled - tokenized) * 1000

        settings = (
            self.settings
            if request.max_steps is None
            else replace(self.settings, max_steps=request.max_steps)
        )
        generator = torch.Generator(device=self.device).manual_seed(request.seed)
        drafts = (
            [self.format.encode(request.lead + d) for d in request.drafts]
            if request.decoder == "diffusion"
            else []
        )
        steps = draft_forwards = 0
        canvas_s = step_forward_ms = 0.0
        block = self._block_length(request)
        own_draft = request.next_token_draft and self.writes_next_token_drafts
        written: Greedy | None = None
        if own_draft and not drafts and request.seed_canvas is None:
            room = min(request.max_new_tokens, block)
            written = self._next_token_draft(hidden[0, -1], room, request)
            draft_forwards = written.steps
            forward_ms += (time.perf_counter() - prefilled) * 1000
            if written.tokens:
                drafts = [written.tokens]
        # Rows: the drafts take the candidate places first, fresh noise fills those they leave (a noise
        # row beside a draft was seldom the right answer and cost a third of every step).
        n = max(len(drafts), request.n_candidates)
        cache = self.prompt_cache.working_cache(n)
        rows = [_Row() for _ in range(n)]
        reason: StopReason = "max_tokens"
        for index in range(math.ceil(request.max_new_tokens / block)):
            left = request.max_new_tokens - len(rows[0].tokens)
            spec = self._canvas_spec(
                request, n, left, block, generator, drafts if index == 0 else [], first=index == 0
            )
            canvas_start = time.perf_counter()
            watch = None
            if request.observer is not None:
                emits = min(left, spec.middle_length)
                watch = _CanvasReport(self, request.observer, rows, steps, emits, request.lead, len(drafts))
            outcome = denoise(
                self.backbone, cache, spec, settings, self.bias, self.eos_ids, generator,
                deadline=request.deadline, cancel=request.cancel, buffers=self.buffers, watch=watch,
            )  # fmt: skip
            canvas_s += time.perf_counter() - canvas_start
            steps += outcome.steps
            forward_ms += outcome.forward_ms
            step_forward_ms += outcome.forward_ms
            self._collect(rows, outcome.tokens, outcome.confidence, min(left, spec.middle_length))
            if outcome.reason in ("deadline", "cancelled"):
                reason = outcome.reason
                break
            if all(row.ended for row in rows):
                reason = "eos"
                break
            if request.anchor or request.seed_canvas is not None:
                # An anchor ends the middle, and a seeded canvas is sized for the whole text: one canvas.
                reason = outcome.reason
                break
            if len(rows[0].tokens) >= request.max_new_tokens:
                break
            canvas_ids = outcome.tokens
            extend_start = time.perf_counter()
            self.backbone.encode(canvas_ids, cache)
            forward_ms += (time.perf_counter() - extend_start) * 1000
            self.prompt_cache.record(cache, canvas_ids[0].tolist())
        candidates = self._candidates(rows, len(drafts), request.lead)
        if request.next_token_confidence and written is not None and written.tokens and reason != "cancelled":
            scoring = time.perf_counter()
            candidates = self._with_head_confidence(ids, hidden[0, -1], candidates, written)
            forward_ms += (time.perf_counter() - scoring) * 1000
        finished = time.perf_counter()

        emitted = len(candidates[0].token_ids) + (1 if rows[0].ended else 0)
        return InfillResult(
            candidates=candidates,
            steps=steps,
            tokens_per_forward=emitted / (steps + draft_forwards) if steps else 0.0,
            stop_reason=reason,
            timings=Timings(
                prefill_ms=(prefilled - started) * 1000,
                denoise_ms=(finished - prefilled) * 1000,
                total_ms=(finished - started) * 1000,
                forward_ms=forward_ms,
                canvas_ms=canvas_s * 1000,
                step_forward_ms=step_forward_ms,
            ),
            prompt_tokens=len(ids),
            reused_prompt_tokens=reused,
            draft_forwards=draft_forwards,
        )

    def _next_token_draft(self, hidden: torch.Tensor, room: int, request: InfillRequest) -> Greedy:
        """The middle as the next-token head writes it greedily after the prompt (encoder state `hidden`,
        [H]), up to `room` tokens and a share of the time left; the prompt cache is left as it was."""
        deadline = request.deadline
        if deadline is not None:
            deadline = time.monotonic() + NEXT_TOKEN_DRAFT_SHARE * max(0.0, deadline - time.monotonic())
        observer = request.observer
        wrote = None if observer is None else lambda out: self._report_draft(observer, out, request.lead)
        written = greedy_tokens(
            self, hidden, self.prompt_cache.cache, room, min_tokens=1, deadline=deadline,
            cancel=request.cancel, first_bias=self.lead_bias(request.lead), wrote=wrote,
        )  # fmt: skip
        self.prompt_cache.drop_unrecorded()
        return written

    def _report_draft(self, observer: CanvasObserver, written: Greedy, lead: str) -> None:
        """The next-token draft so far, shown to `observer` when due: the canvas starts from it, so it is
        the first text an answer that drafts this way can show (all of it unsettled)."""
        if observer.due():
            text, offsets = self.text_of(written.tokens, lead)
            observer(CanvasStep(0, text, (), tuple(written.confidence), offsets, draft=0))

    def _with_head_confidence(
        self, ids: list[int], last: torch.Tensor, candidates: tuple[Candidate, ...], written: Greedy
    ) -> tuple[Candidate, ...]:
        """The candidates, the one from the next-token draft `written` (the only draft row, 0) with the
        head's probability of each of its tokens (`_head_probabilities`)."""
        for index, candidate in enumerate(candidates):
            if candidate.draft == 0 and candidate.token_ids:
                scores = self._head_probabilities(ids, last, list(candidate.token_ids), written)
                scored = replace(candidate, head_confidence=scores)
                return (*candidates[:index], scored, *candidates[index + 1 :])
        return candidates

    @torch.inference_mode()
    def _head_probabilities(
        self, ids: list[int], last: torch.Tensor, tokens: list[int], written: Greedy
    ) -> tuple[float, ...]:
        """The next-token head's probability of each of `tokens` after the prompt `ids` (whose last
        encoder state is `last`, [H]) and the tokens before it: read off the draft where the canvas
        kept a head of it, else from one pass of the encoder over them (the prompt cache left as it was)."""
        if tokens == written.tokens[: len(tokens)]:
            return tuple(written.confidence[: len(tokens)])
        if self.prompt_cache.tokens != ids:  # a later canvas was appended: back to the prompt
            _, hidden = self.prompt_cache.encode(ids)
            last = hidden[0, -1]
        states = last[None]  # [1, H]: the state that predicts the first token
        if len(tokens) > 1:
            cache = self.prompt_cache.working_cache(1)  # the kept cache itself, cropped back below
            before = torch.tensor([tokens[:-1]], device=self.device)
            states = torch.cat([states, self.backbone.encode(before, cache)[0]])
            self.prompt_cache.drop_unrecorded()
        logits = self.backbone.next_token_logits(states) + self.bias  # [L, V]
        chosen = torch.tensor(tokens, device=logits.device)
        return tuple(logits.softmax(dim=-1)[torch.arange(len(tokens), device=logits.device), chosen].tolist())

    def _block_length(self, request: InfillRequest) -> int:
        """The most tokens one canvas holds: the request's `canvas_tokens`, except that an anchored or
        seeded request is answered in one canvas, which must then hold the whole middle."""
        if request.anchor or request.seed_canvas is not None or not request.canvas_tokens:
            return self.canvas_length
        return min(self.canvas_length, request.canvas_tokens)

    def _canvas_spec(
        self,
        request: InfillRequest,
        n: int,
        left: int,
        block: int,
        generator: torch.Generator,
        drafts: list[list[int]],
        first: bool,
    ) -> CanvasSpec:
        seed = self.format.encode(request.seed_canvas) if first and request.seed_canvas is not None else []
        anchor = self.format.encode(request.anchor) if first and request.anchor else []
        if seed:
            # Room for the whole seed, for the rewrite to grow a little, and for the anchor after it.
            slack = max(8, len(seed) // 4)
            length = min(MAX_SEEDED_CANVAS, len(seed) + slack + len(anchor))
        else:
            # A short request gets a shorter canvas: each step costs less.
            length = min(block, max(MIN_CANVAS, 8 * math.ceil(left / 8)))
        length = max(length, len(anchor) + 1)
        init = noise_canvas(n, length, self.bias.shape[0], generator)
        fixed = torch.zeros(n, length, dtype=torch.bool, device=self.device)
        sticky = guess = None
        if seed:
            seed = seed[: length - len(anchor)]  # only a seed longer than the largest canvas loses its end
            outside = [p for p in request.fixed_positions if not 0 <= p < len(seed)]
            if outside:
                raise ValueError(
                    f"fixed positions {outside} are outside the seed canvas ({len(seed)} tokens)"
                )
            seeded = torch.tensor(seed, device=self.device).expand(n, -1)
            guess = init.clone()
            guess[:, : len(seed)] = seeded
            noisy = torch.rand(n, len(seed), generator=generator, device=self.device) < request.seed_noise
            init[:, : len(seed)] = torch.where(noisy, init[:, : len(seed)], seeded)
            if request.sticky_seed:
                sticky = torch.zeros(n, length, dtype=torch.bool, device=self.device)
                sticky[:, : len(seed)] = ~noisy
            for position in request.fixed_positions:  # kept whatever the noise drew
                init[:, position] = seed[position]
                fixed[:, position] = True
        if drafts:
            guess = init.clone()
            sticky = self._seed_drafts(
                init, guess, drafts, length - len(anchor), request.draft_noise, generator,
                least=2 if request.lead else 1,  # the lead's own line break ends no line
            )  # fmt: skip
        if anchor:
            init[:, length - len(anchor) :] = torch.tensor(anchor, device=self.device)
            fixed[:, length - len(anchor) :] = True
        written = request.max_new_tokens - left  # tokens earlier canvases already emitted
        min_tokens = min(max(0, request.min_new_tokens - written), length - len(anchor))
        return CanvasSpec(
            init=init,
            fixed=fixed,
            middle_length=length - len(anchor),
            sticky=sticky,
            min_tokens=min_tokens,
            first_bias=self.lead_bias(request.lead) if first else None,
            guess=guess,
            enough=request.n_candidates if drafts else 0,
        )

    def _seed_drafts(
        self,
        init: torch.Tensor,
        guess: torch.Tensor,
        drafts: list[list[int]],
        room: int,
        noise: float,
        generator: torch.Generator,
        least: int = 1,
    ) -> torch.Tensor:
        """Write each draft, then EOS, into its row of `guess` and of `init` ([B, C]), where a `noise`
        share stays noise; one cut to fit keeps at least `least` tokens.

        Returns where each row is sticky: a draft token the model does not replace with confidence
        comes back, instead of noise.
        """
        sticky = torch.zeros_like(init, dtype=torch.bool)
        eos = min(self.format.eos_ids)
        for row, draft in enumerate(drafts):
            tokens = draft + [eos] if len(draft) < room else self._fitted(draft, room, eos, least)
            seeded = torch.tensor(tokens, device=self.device)
            guess[row, : len(tokens)] = seeded
            kept = torch.rand(len(tokens), generator=generator, device=self.device) >= noise
            init[row, : len(tokens)] = torch.where(kept, seeded, init[row, : len(tokens)])
            sticky[row, : len(tokens)] = kept
        return sticky

    def _fitted(self, draft: list[int], room: int, eos: int, least: int = 1) -> list[int]:
        """The row for a draft that does not fit in `room` tokens with its EOS: up to its last line break
        that fits, ends a statement (no bracket of its own left open) and keeps `least` tokens or more
        (a lead's line break is no line end: cut there, the row would be the lead alone), then EOS, so
        that the row ends on whole lines; without one it is cut there and the next canvas goes on with it."""
        for end in range(room - 1, least - 1, -1):
            if "\n" in self.format.decode(draft[end - 1 : end]):
                head = self.format.decode(draft[:end])
                if open_brackets(head) <= 0:
                    return draft[:end] + [eos]
        return draft[:room]

    def _collect(self, rows: list[_Row], tokens: torch.Tensor, confidence: torch.Tensor, left: int) -> None:
        for row, row_tokens, row_confidence in zip(rows, tokens.tolist(), confidence.tolist(), strict=True):
            if row.ended:
                continue
            for token, prob in zip(row_tokens[:left], row_confidence[:left], strict=True):
                if token in self.format.eos_ids:
                    row.ended = True
                    break
                row.tokens.append(token)
                row.confidence.append(prob)

    def _offsets(self, tokens: list[int], text: str) -> tuple[int, ...]:
        """Where each token starts in `text` (decoding growing prefixes: exact for byte-level BPE)."""
        offsets, start = [], 0
        for end in range(1, len(tokens) + 1):
            offsets.append(min(start, len(text)))
            start = len(self.format.decode(tokens[:end]))
        return tuple(offsets)

    def text_of(self, tokens: list[int], lead: str = "") -> tuple[str, tuple[int, ...]]:
        """The text of a row's `tokens` as the editor inserts it (without the request's lead), and where
        each token starts in it."""
        written = self.format.clean(self.format.decode(tokens))
        offsets = self._offsets(tokens, written)
        text = without_lead(written, lead)
        if len(text) < len(written):
            offsets = offsets_without_lead(offsets, lead)
        return text, offsets

    def _candidates(self, rows: list[_Row], drafts: int = 0, lead: str = "") -> tuple[Candidate, ...]:
        """Distinct texts (without the request's lead), best first by mean confidence; each says which
        draft row it came from."""
        candidates = []
        for index, row in enumerate(rows):
            text, offsets = self.text_of(row.tokens, lead)
            candidates.append(
                Candidate(
                    text=text,
                    token_ids=tuple(row.tokens),
                    confidence=tuple(row.confidence),
                    offsets=offsets,
                    draft=index if index < drafts else None,
                )
            )
        return best_first(candidates)


class _CanvasReport:
    """The sampler's view of a canvas (`StepWatch`) turned into the request's CanvasSteps: the most
    confident row's text so far, the tokens earlier canvases emitted for it included (and settled)."""

    def __init__(
        self,
        engine: LocalEngine,
        observer: CanvasObserver,
        rows: list[_Row],
        steps_before: int,
        emits: int,
        lead: str,
        drafts: int,
    ) -> None:
        self.engine, self.observer, self.rows = engine, observer, rows
        self.steps_before, self.emits, self.lead, self.drafts = steps_before, emits, lead, drafts

    def due(self) -> bool:
        return self.observer.due()

    def seen(self, step: int, tokens: torch.Tensor, confidence: torch.Tensor, settled: torch.Tensor) -> None:
        eos = self.engine.format.eos_ids
        canvases = []  # per row: (tokens, confidences, settled) it would emit now, earlier canvases first
        for row, ids, probs, sure in zip(
            self.rows,
            tokens[:, : self.emits].tolist(),
            confidence[:, : self.emits].tolist(),
            settled[:, : self.emits].tolist(),
            strict=True,
        ):
            end = 0 if row.ended else next((i for i, t in enumerate(ids) if t in eos), len(ids))
            canvases.append(
                (row.tokens + ids[:end], row.confidence + probs[:end], [True] * len(row.tokens) + sure[:end])
            )
        best = max(range(len(canvases)), key=lambda i: _mean(canvases[i][1]))
        ids, probs, sure = canvases[best]
        text, offsets = self.engine.text_of(ids, self.lead)
        self.observer(
            CanvasStep(
                step=self.steps_before + step,
                text=text,
                settled=token_ranges(offsets, sure, len(text)),
                confidence=tuple(probs),
                offsets=offsets,
                draft=best if best < self.drafts else None,
            )
        )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def open_brackets(text: str) -> int:
    """Brackets `text` opens and does not close (string literals on one line skipped)."""
    code = _STRING.sub("", text)
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
