"""What a step optimizes: batches of examples, the next-token and canvas losses, and validation."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from engine.forward import denoise_logits, encode, new_cache
from engine.prompts import FimFormat
from training.config import TrainConfig
from training.data import DocumentMix, Example, examples, load_documents
from training.distill import greedy_targets

if TYPE_CHECKING:
    from training.repository import PackageContexts
from training.export import shipped_sampler_settings
from training.head_loss import IGNORE, softcapped_cross_entropy


@dataclass
class Batch:
    encoder_ids: torch.Tensor  # [B, T] prompt right-aligned at P, then middle + EOS, padded
    encoder_mask: torch.Tensor  # [B, T] bool, real tokens
    positions: torch.Tensor  # [B, T]
    ar_labels: torch.Tensor  # [B, T] next token or IGNORE
    prompt_width: int  # P: the decoder sees the cache cropped to the first P slots
    decoder_mask: torch.Tensor  # [B, P + C] bool
    decoder_positions: torch.Tensor  # [B, C]
    target: torch.Tensor  # [B, C]
    draft: torch.Tensor | None = None  # [B, C] where noising starts (a lookup draft, else the target)
    drafted: torch.Tensor | None = None  # [B] bool: the rows a lookup draft starts
    # Not None: the canvas learns the model's own greedy continuation instead of `target` (distillation,
    # `training/distill.py`), never these tokens.
    distill_suppressed: tuple[int, ...] | None = None


def collate(items: list[Example], pad: int) -> Batch:
    width = max(len(e.prompt) for e in items)
    tail = max(len(e.middle_rest) for e in items)
    canvas = len(items[0].target)
    n = len(items)
    ids = torch.full((n, width + tail), pad, dtype=torch.long)
    mask = torch.zeros((n, width + tail), dtype=torch.bool)
    positions = torch.zeros((n, width + tail), dtype=torch.long)
    decoder_positions = torch.zeros((n, canvas), dtype=torch.long)
    for row, example in enumerate(items):
        left = width - len(example.prompt)
        sequence = example.prompt + example.middle_rest
        ids[row, left : left + len(sequence)] = torch.tensor(sequence)
        mask[row, left : left + len(sequence)] = True
        positions[row, left:] = torch.arange(width + tail - left)
        decoder_positions[row] = torch.arange(len(example.prompt), len(example.prompt) + canvas)
    labels = torch.full_like(ids, IGNORE)
    follows = mask[:, :-1] & mask[:, 1:]
    labels[:, :-1] = torch.where(follows, ids[:, 1:], IGNORE)
    decoder_mask = torch.cat([mask[:, :width], torch.ones((n, canvas), dtype=torch.bool)], dim=1)
    drafted = any(e.draft for e in items)
    return Batch(
        encoder_ids=ids,
        encoder_mask=mask,
        positions=positions,
        ar_labels=labels,
        prompt_width=width,
        decoder_mask=decoder_mask,
        decoder_positions=decoder_positions,
        target=torch.tensor([e.target for e in items]),
        draft=torch.tensor([e.draft or e.target for e in items]) if drafted else None,
        drafted=torch.tensor([bool(e.draft) for e in items]) if drafted else None,
    )


def canvas_weight_at(cfg: TrainConfig, tokens: int) -> float:
    if tokens < cfg.canvas_from_tokens:
        return 0.0
    if not cfg.canvas_ramp_tokens:
        return cfg.canvas_weight
    return cfg.canvas_weight * min(1.0, (tokens - cfg.canvas_from_tokens) / cfg.canvas_ramp_tokens)


def losses(
    model,
    batch: Batch,
    cfg: TrainConfig,
    gen: torch.Generator,
    device: str,
    with_canvas: bool = True,
    noise_rate: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(diffusion loss or None without the canvas, autoregressive loss) of one batch."""
    text = model.config.get_text_config()
    cache = new_cache(model)
    hidden = encode(  # [B, T, H]: prompt, middle and EOS read causally in one pass
        model,
        batch.encoder_ids.to(device),
        cache,
        positions=batch.positions.to(device),
        attention_mask=batch.encoder_mask.to(device),
    )
    ar_loss = softcapped_cross_entropy(  # the tied head over the labelled positions
        hidden, model.lm_head.weight, batch.ar_labels.to(device), text.final_logit_softcapping
    )
    if not with_canvas:
        return None, ar_loss
    cache.crop(batch.prompt_width - batch.encoder_ids.shape[1])  # the decoder sees the prompt only

    target, start = canvas_rows(model, batch, device)  # [B, C] each
    rate = noise_rate
    if rate is None:
        rate = noise_rates(cfg, target.shape[0], device, gen)
    noised = torch.where(
        torch.rand(target.shape, device=device, generator=gen) < rate,
        torch.randint(0, text.vocab_size, target.shape, device=device, generator=gen),
        start,
    )
    positions, mask = batch.decoder_positions.to(device), batch.decoder_mask.to(device)
    self_conditioning = None
    if noise_rate is None and torch.rand((), generator=gen).item() < cfg.self_conditioning_rate:
        with torch.no_grad():
            self_conditioning = denoise_logits(model, noised, cache, positions, mask).detach()
        if cfg.self_conditioning_scaled:
            shipped = shipped_sampler_settings()
            low, high = shipped.t_min, shipped.t_max
            self_conditioning = self_conditioning / (
                low + (high - low) * torch.rand((), generator=gen).item()
            )
    logits = denoise_logits(model, noised, cache, positions, mask, self_conditioning)  # [B, C, V]
    per_position = F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), reduction="none")
    weights = canvas_weights(target, text.eos_token_id, cfg.eos_tail_weight)
    diffusion_loss = (per_position * weights.flatten()).sum() / weights.sum()
    return diffusion_loss, ar_loss


def canvas_rows(model, batch: Batch, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(target, start) of each canvas ([B, C] each): the real middle, noised from itself or from a
    lookup draft; in a distilled batch, the rows no draft starts learn the model's own greedy
    continuation from it. A row a draft starts keeps the real middle: there the draft is often right
    where the head is wrong, and the canvas must learn to keep it."""
    target = batch.target.to(device)
    start = target if batch.draft is None else batch.draft.to(device)
    if batch.distill_suppressed is None:
        return target, start
    # Only the rows no draft starts are written out: a rollout costs a forward per token.
    rows = torch.arange(target.shape[0]) if batch.drafted is None else (~batch.drafted).nonzero()[:, 0]
    if not len(rows):
        return target, start
    width = batch.prompt_width
    greedy = greedy_targets(
        model, batch.encoder_ids[rows, :width].to(device), batch.encoder_mask[rows, :width].to(device),
        batch.positions[rows, :width].to(device), batch.decoder_positions[rows].to(device),
        model.config.get_text_config().eos_token_id, batch.distill_suppressed,
    )  # fmt: skip
    target, start, at = target.clone(), start.clone(), rows.to(device)
    target[at] = greedy
    start[at] = greedy
    return target, start


def noise_rates(cfg: TrainConfig, rows: int, device: str, gen: torch.Generator) -> torch.Tensor:
    """Each canvas's share of noised positions ([rows, 1]): min_noise + (1 - min_noise) * u ** noise_power."""
    drawn = torch.rand(rows, 1, device=device, generator=gen) ** cfg.noise_power
    return cfg.min_noise + (1.0 - cfg.min_noise) * drawn


def canvas_weights(target: torch.Tensor, eos: int, tail_weight: float) -> torch.Tensor:
    """1 for the middle and its EOS, `tail_weight` for the EOS fill after it ([B, C])."""
    is_eos = (target == eos).long()
    after_first = (is_eos.cumsum(dim=-1) - is_eos) > 0
    return torch.where(after_first, tail_weight, 1.0)


def next_batch(
    mix: DocumentMix,
    fmt: FimFormat,
    rng: random.Random,
    cfg: TrainConfig,
    contexts: PackageContexts | None = None,
) -> Batch:
    budget, canvas = rng.choice(cfg.prompt_budgets), rng.choice(cfg.canvas_lengths)
    stream = examples(mix, fmt, rng, budget, canvas, cfg.draft_share, contexts, cfg.context_share)
    batch = collate([next(stream) for _ in range(cfg.batch_size)], fmt.special.pad)
    if cfg.distill_share and rng.random() < cfg.distill_share:
        batch.distill_suppressed = fmt.suppressed_ids
    return batch


VALIDATION_BATCHES = 8
VALIDATION_NOISE = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def validation_batches(
    corpus: Path, fmt: FimFormat, languages: set[str] | None, contexts: PackageContexts | None = None
) -> list[Batch]:
    """A fixed set of held-out batches (the corpus' valid split, seeded): equal for every run and step.
    With `contexts`, every example carries its package's context (the same spans: their own stream)."""
    mix = DocumentMix(load_documents(corpus, "valid", languages))
    rng = random.Random(20261203)
    batches = []
    for i in range(VALIDATION_BATCHES):
        budget, canvas = (128, 256, 384, 512)[i % 4], (16, 32)[i % 2]
        stream = examples(
            mix, fmt, rng, budget, canvas, 0.0, contexts, 1.0 if contexts else 0.0, context_seed=i
        )
        batches.append(collate([next(stream) for _ in range(16)], fmt.special.pad))
    return batches


@torch.no_grad()
def validate(model, batches: list[Batch], cfg: TrainConfig, device: str) -> dict[str, float]:
    """Mean AR loss per token and canvas loss over fixed noise rates, without self-conditioning."""
    was_training = model.training
    model.eval()
    gen = torch.Generator(device=device).manual_seed(0)
    ar, canvas = [], []
    for batch in batches:
        rate = torch.tensor(VALIDATION_NOISE, device=device).repeat(3)[: batch.target.shape[0], None]
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=cfg.bf16):
            diffusion_loss, ar_loss = losses(model, batch, cfg, gen, device, noise_rate=rate)
        ar.append(ar_loss.item())
        canvas.append(diffusion_loss.item())
    model.train(was_training)
    return {"ar": sum(ar) / len(ar), "canvas": sum(canvas) / len(canvas)}
