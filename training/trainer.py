"""`python -m engine.train`: train our own DiffusionGemma-architecture code model.

    python -m engine.train tokenizer --corpus data/corpus --run runs/small --vocab-size 8192
    python -m engine.train run --corpus data/corpus --run runs/small --shape small --threads 2
    python -m engine.train export --run runs/small --out engine/default
    python -m engine.train snapshot --run runs/small --out engine/campaign
    python -m engine.train run --corpus data/corpus --run runs/small --from-snapshot engine/campaign

One step: the encoder reads prompt + middle + EOS causally (one pass; next-token loss on all of it),
its cache is cropped back to the prompt, and the decoder denoises the canvas against that cache:
uniform-state noise at a rate t ~ U(0.02, 1), loss on every canvas position, self-conditioning on
its own no-grad prediction half the time. The run saves its state (safetensors + JSON, no pickle)
every few minutes and on SIGTERM/SIGINT, and resumes from it, so it can run in the background of
any session. A session's run folder does not outlive the session, so at its end the run is packed
into `engine/campaign/` (raw and EMA weights in bf16, progress, config, tokenizer: ~44 MB, committed)
and the next session's run starts from that snapshot with fresh optimizer moments and a short re-warmup.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import DynamicCache

from engine.prompts import FimFormat
from engine.sampler import SamplerSettings
from engine.tokenizer import load_tokenizer
from training.checkpoint import new_model, save_checkpoint
from training.data import Document, Example, examples, load_documents
from training.muon import MuonAdamW, is_hidden_matrix
from training.shapes import ModelShape, shape_by_name
from training.tokenizer import train_tokenizer

logger = logging.getLogger("engine.train")


@dataclass
class TrainConfig:
    shape: str = "small"
    batch_size: int = 16
    prompt_budgets: tuple[int, ...] = (128, 256, 384, 512)
    canvas_lengths: tuple[int, ...] = (16, 32)
    lr: float = 2e-3
    warmup_steps: int = 300
    weight_decay: float = 0.1
    ar_weight: float = 0.5
    self_conditioning_rate: float = 0.5
    min_noise: float = 0.02
    ema_decay: float = 0.999
    # Canvas positions after the middle's EOS (the EOS fill) weigh this much in the loss: at full
    # weight they are most of every canvas, and the model learned to answer EOS first (2026-12-02).
    eos_tail_weight: float = 0.1
    bf16: bool = True
    seed: int = 0
    # The objective: ar_weight * next-token loss + canvas weight * diffusion loss, where the canvas
    # weight is 0 before `canvas_from_tokens` and ramps to `canvas_weight` over `canvas_ramp_tokens`.
    # With weight 0 the decoder does not run at all (an AR-first curriculum's first phase).
    canvas_weight: float = 1.0
    canvas_from_tokens: int = 0
    canvas_ramp_tokens: int = 0
    optimizer: str = "adamw"  # or "muon": Muon on hidden matrices, AdamW on the rest
    accumulate: int = 1  # batches per optimizer step


@dataclass
class Batch:
    encoder_ids: torch.Tensor  # [B, T] prompt right-aligned at P, then middle + EOS, padded
    encoder_mask: torch.Tensor  # [B, T] bool, real tokens
    positions: torch.Tensor  # [B, T]
    ar_labels: torch.Tensor  # [B, T] next token or -100
    prompt_width: int  # P: the decoder sees the cache cropped to the first P slots
    decoder_mask: torch.Tensor  # [B, P + C] bool
    decoder_positions: torch.Tensor  # [B, C]
    target: torch.Tensor  # [B, C]


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
    labels = torch.full_like(ids, -100)
    follows = mask[:, :-1] & mask[:, 1:]
    labels[:, :-1] = torch.where(follows, ids[:, 1:], -100)
    decoder_mask = torch.cat([mask[:, :width], torch.ones((n, canvas), dtype=torch.bool)], dim=1)
    return Batch(
        encoder_ids=ids,
        encoder_mask=mask,
        positions=positions,
        ar_labels=labels,
        prompt_width=width,
        decoder_mask=decoder_mask,
        decoder_positions=decoder_positions,
        target=torch.tensor([e.target for e in items]),
    )


def softcap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    return torch.tanh(logits / cap) * cap


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
    vocab = model.config.get_text_config().vocab_size
    cap = model.config.get_text_config().final_logit_softcapping
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    encoded = model.model.encoder(
        input_ids=batch.encoder_ids.to(device),
        attention_mask=batch.encoder_mask.to(device),
        position_ids=batch.positions.to(device),
        past_key_values=cache,
    )
    ar_logits = softcap(model.lm_head(encoded.last_hidden_state).float(), cap)
    ar_loss = F.cross_entropy(
        ar_logits.flatten(0, 1), batch.ar_labels.to(device).flatten(), ignore_index=-100
    )
    if not with_canvas:
        return None, ar_loss
    cache.crop(batch.prompt_width - batch.encoder_ids.shape[1])

    target = batch.target.to(device)
    rate = noise_rate
    if rate is None:
        rate = torch.empty(target.shape[0], 1, device=device).uniform_(cfg.min_noise, 1.0, generator=gen)
    noised = torch.where(
        torch.rand(target.shape, device=device, generator=gen) < rate,
        torch.randint(0, vocab, target.shape, device=device, generator=gen),
        target,
    )
    decoder_kwargs = dict(
        decoder_input_ids=noised,
        past_key_values=cache,
        decoder_attention_mask=batch.decoder_mask.to(device),
        decoder_position_ids=batch.decoder_positions.to(device),
    )
    self_conditioning = None
    if noise_rate is None and torch.rand((), generator=gen).item() < cfg.self_conditioning_rate:
        with torch.no_grad():
            self_conditioning = model(**decoder_kwargs).logits.detach()
    logits = model(**decoder_kwargs, self_conditioning_logits=self_conditioning).logits
    per_position = F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), reduction="none")
    weights = canvas_weights(target, model.config.get_text_config().eos_token_id, cfg.eos_tail_weight)
    diffusion_loss = (per_position * weights.flatten()).sum() / weights.sum()
    return diffusion_loss, ar_loss


def canvas_weights(target: torch.Tensor, eos: int, tail_weight: float) -> torch.Tensor:
    """1 for the middle and its EOS, `tail_weight` for the EOS fill after it ([B, C])."""
    is_eos = (target == eos).long()
    after_first = (is_eos.cumsum(dim=-1) - is_eos) > 0
    return torch.where(after_first, tail_weight, 1.0)


class Run:
    """A training run folder: tokenizer.json, config.json, state/ (resumable), train.log, exports."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.state = folder / "state"

    @property
    def tokenizer_path(self) -> Path:
        return self.folder / "tokenizer.json"

    def save(self, model, ema: dict[str, torch.Tensor], optimizer, progress: dict) -> None:
        tmp = self.folder / "state.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        save_file(parameters(model), tmp / "model.safetensors")
        save_file(ema, tmp / "ema.safetensors")
        names = {id(p): n for n, p in model.named_parameters()}
        moments, steps = {}, {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                state = optimizer.state.get(p)
                if state:
                    for key in OPTIMIZER_BUFFERS:
                        if key in state:
                            moments[f"{names[id(p)]}.{key}"] = state[key]
                    steps[names[id(p)]] = float(state["step"])
        save_file(moments, tmp / "optimizer.safetensors")
        (tmp / "progress.json").write_text(json.dumps({**progress, "adam_steps": steps}, indent=1))
        if self.state.exists():
            old = self.folder / "state.old"
            self.state.rename(old)
            tmp.rename(self.state)
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        else:
            tmp.rename(self.state)

    def load(self, model, optimizer) -> tuple[dict[str, torch.Tensor], dict]:
        model.load_state_dict(load_file(self.state / "model.safetensors"), strict=False)
        ema = load_file(self.state / "ema.safetensors")
        progress = json.loads((self.state / "progress.json").read_text())
        moments = load_file(self.state / "optimizer.safetensors")
        for name, p in model.named_parameters():
            buffers = {
                key: moments[f"{name}.{key}"] for key in OPTIMIZER_BUFFERS if f"{name}.{key}" in moments
            }
            if buffers:
                optimizer.state[p] = {"step": torch.tensor(progress["adam_steps"][name]), **buffers}
        return ema, progress


def parameters(model) -> dict[str, torch.Tensor]:
    """Trainable weights by name, each shared (tied) tensor once: what safetensors can store."""
    return {name: p.detach().contiguous() for name, p in model.named_parameters()}


OPTIMIZER_BUFFERS = ("exp_avg", "exp_avg_sq", "momentum_buffer")


def build_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if cfg.optimizer == "muon":
        hidden = [p for n, p in named if is_hidden_matrix(n, p)]
        decay = [p for n, p in named if p.dim() >= 2 and not is_hidden_matrix(n, p)]
        rest = [p for n, p in named if p.dim() < 2]
        return MuonAdamW(
            [
                {"params": hidden, "weight_decay": cfg.weight_decay, "muon": True},
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": rest, "weight_decay": 0.0},
            ],
            lr=cfg.lr,
        )
    decay = [p for n, p in named if p.dim() >= 2]
    rest = [p for n, p in named if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )


def learning_rate(
    cfg: TrainConfig, step: int, cooldown: dict | None = None, rewarm: dict | None = None
) -> float:
    # Warmup, then constant: the run has no planned end (it continues session after session).
    # A cooldown branch (a copy of the run, `--cooldown-steps N`) decays linearly to a tenth over
    # N steps: the warmup-stable-decay recipe, where the stable run goes on from before the branch.
    # A run restarted from a snapshot has fresh Adam moments, so it warms up again (`rewarm`).
    rate = cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps)
    if rewarm:
        rate *= min(1.0, (step - rewarm["from"] + 1) / rewarm["steps"])
    if cooldown:
        done = min(1.0, max(0, step - cooldown["from"]) / cooldown["steps"])
        rate *= 1.0 - 0.9 * done
    return rate


SNAPSHOT_FILES = ("config.json", "tokenizer.json", "progress.json", "model.safetensors", "ema.safetensors")


def snapshot(args: argparse.Namespace) -> None:
    """Pack a run into a folder small enough to commit: what a later session needs to go on training."""
    run, out = Run(Path(args.run)), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("model", "ema"):
        weights = load_file(run.state / f"{name}.safetensors")
        packed = {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}
        save_file(packed, out / f"{name}.safetensors")
    progress = json.loads((run.state / "progress.json").read_text())
    for per_run in ("adam_steps", "cooldown", "rewarm"):  # the next run gets its own
        progress.pop(per_run, None)
    (out / "progress.json").write_text(json.dumps(progress, indent=1))
    (out / "config.json").write_text((run.folder / "config.json").read_text())
    (out / "tokenizer.json").write_text(run.tokenizer_path.read_text())
    logger.info("snapshot of step %d in %s", progress["step"], out)


def seed_run_from_snapshot(run: Run, source: Path) -> None:
    """Copy a snapshot's config and tokenizer into a new run folder; weights load in train()."""
    missing = [name for name in SNAPSHOT_FILES if not (source / name).exists()]
    if missing:
        raise SystemExit(f"{source} is not a training snapshot: missing {', '.join(missing)}")
    for name in ("config.json", "tokenizer.json"):
        (run.folder / name).write_text((source / name).read_text())


def train(args: argparse.Namespace) -> None:
    run = Run(Path(args.run))
    run.folder.mkdir(parents=True, exist_ok=True)
    from_snapshot = Path(args.from_snapshot) if args.from_snapshot else None
    if from_snapshot and (run.state / "progress.json").exists():
        logger.info("the run has its own state: resuming it, not %s", from_snapshot)
        from_snapshot = None
    elif from_snapshot:
        seed_run_from_snapshot(run, from_snapshot)
    config_path = run.folder / "config.json"
    if config_path.exists():
        saved = json.loads(config_path.read_text())
        saved["prompt_budgets"] = tuple(saved["prompt_budgets"])
        saved["canvas_lengths"] = tuple(saved["canvas_lengths"])
        cfg = TrainConfig(**saved)
    else:
        cfg = TrainConfig(
            shape=args.shape,
            batch_size=args.batch_size,
            lr=args.lr,
            bf16=not args.no_bf16,
            ar_weight=args.ar_weight,
            canvas_weight=args.canvas_weight,
            canvas_from_tokens=int(args.canvas_from_tokens),
            canvas_ramp_tokens=int(args.canvas_ramp_tokens),
            optimizer=args.optimizer,
            accumulate=args.accumulate,
            warmup_steps=args.warmup_steps,
        )
        config_path.write_text(json.dumps(asdict(cfg), indent=1))
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    tokenizer = load_tokenizer(run.tokenizer_path)
    fmt = FimFormat(tokenizer)
    shape: ModelShape = shape_by_name(cfg.shape)
    model = new_model(shape, tokenizer, seed=cfg.seed).to(device).train()
    optimizer = build_optimizer(model, cfg)
    if (run.state / "progress.json").exists():
        ema, progress = run.load(model, optimizer)
        logger.info("resumed at step %d", progress["step"])
    elif from_snapshot:
        weights = {k: v.float() for k, v in load_file(from_snapshot / "model.safetensors").items()}
        model.load_state_dict(weights, strict=False)
        ema = {k: v.float() for k, v in load_file(from_snapshot / "ema.safetensors").items()}
        progress = json.loads((from_snapshot / "progress.json").read_text())
        progress["rewarm"] = {"from": progress["step"], "steps": max(1, cfg.warmup_steps // 3)}
        logger.info("started from the snapshot in %s at step %d", from_snapshot, progress["step"])
    else:
        ema = {k: v.clone().float() for k, v in parameters(model).items()}
        progress = {"step": 0, "tokens": 0, "seconds": 0.0, "canvas_tokens": 0}
    if args.cooldown_steps and "cooldown" not in progress:
        progress["cooldown"] = {"from": progress["step"], "steps": args.cooldown_steps}
    cooldown, rewarm = progress.get("cooldown"), progress.get("rewarm")
    rng = random.Random(cfg.seed * 1_000_003 + progress["step"])
    gen = torch.Generator(device=device).manual_seed(cfg.seed + progress["step"])
    languages = set(args.languages.split(",")) if args.languages else None
    documents = load_documents(Path(args.corpus), "train", languages)
    logger.info("%d training documents", len(documents))

    stop = {"now": False}

    def request_stop(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    deadline = time.monotonic() + args.hours * 3600 if args.hours else math.inf
    last_save = time.monotonic()
    window: list[tuple[float, float, float, int]] = []
    started_step = progress["step"]
    validation = validation_batches(Path(args.corpus), fmt, languages) if args.validate_every_tokens else None
    next_validation = progress["tokens"]
    while (
        not stop["now"]
        and time.monotonic() < deadline
        and (not args.steps or progress["step"] < started_step + args.steps)
        and (not cooldown or progress["step"] < cooldown["from"] + cooldown["steps"])
        and (not args.max_tokens or progress["tokens"] < args.max_tokens)
    ):
        step_start, cpu_start = time.perf_counter(), time.process_time()
        weight = canvas_weight_at(cfg, progress["tokens"])
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, progress["step"], cooldown, rewarm)
        optimizer.zero_grad(set_to_none=True)
        diffusion_sum, ar_sum, tokens = 0.0, 0.0, 0
        for _ in range(cfg.accumulate):
            batch = next_batch(documents, fmt, rng, cfg)
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=cfg.bf16):
                diffusion_loss, ar_loss = losses(model, batch, cfg, gen, device, with_canvas=weight > 0)
            loss = cfg.ar_weight * ar_loss
            if diffusion_loss is not None:
                loss = loss + weight * diffusion_loss
                diffusion_sum += diffusion_loss.item() / cfg.accumulate
                progress["canvas_tokens"] += batch.target.numel()
            (loss / cfg.accumulate).backward()
            ar_sum += ar_loss.item() / cfg.accumulate
            tokens += int(batch.encoder_mask.sum())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        with torch.no_grad():
            for name, value in parameters(model).items():
                ema[name].mul_(cfg.ema_decay).add_(value.float(), alpha=1 - cfg.ema_decay)
        elapsed = time.perf_counter() - step_start
        progress["step"] += 1
        progress["seconds"] += elapsed
        progress["cpu_seconds"] = progress.get("cpu_seconds", 0.0) + time.process_time() - cpu_start
        progress["tokens"] += tokens
        window.append((diffusion_sum, ar_sum, elapsed, tokens))
        if validation and progress["tokens"] >= next_validation:
            record_validation(run, model, validation, cfg, device, progress)
            next_validation = progress["tokens"] + args.validate_every_tokens
        if progress["step"] % args.log_every == 0:
            d, a, s, t = (sum(x[i] for x in window) / len(window) for i in range(4))
            rate = learning_rate(cfg, progress["step"], cooldown, rewarm)
            logger.info(
                "step %d diff %.3f ar %.3f canvas weight %.2f lr %.2e %.0f ms/step %.0f tok/s seen %.1fM tok "
                "%.2f h %.2f cpu h",
                progress["step"], d, a, weight, rate, s * 1000, t / s,
                progress["tokens"] / 1e6, progress["seconds"] / 3600, progress["cpu_seconds"] / 3600,
            )  # fmt: skip
            window.clear()
        if time.monotonic() - last_save > args.save_every_min * 60:
            run.save(model, ema, optimizer, progress)
            last_save = time.monotonic()
    run.save(model, ema, optimizer, progress)
    logger.info("saved at step %d", progress["step"])


def next_batch(documents: list[Document], fmt: FimFormat, rng: random.Random, cfg: TrainConfig) -> Batch:
    stream = examples(documents, fmt, rng, rng.choice(cfg.prompt_budgets), rng.choice(cfg.canvas_lengths))
    return collate([next(stream) for _ in range(cfg.batch_size)], fmt.special.pad)


VALIDATION_BATCHES = 8
VALIDATION_NOISE = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def validation_batches(corpus: Path, fmt: FimFormat, languages: set[str] | None) -> list[Batch]:
    """A fixed set of held-out batches (the corpus' valid split, seeded): equal for every run and step."""
    documents = load_documents(corpus, "valid", languages)
    rng = random.Random(20261203)
    batches = []
    for i in range(VALIDATION_BATCHES):
        stream = examples(documents, fmt, rng, (128, 256, 384, 512)[i % 4], (16, 32)[i % 2])
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


def record_validation(
    run: Run, model, batches: list[Batch], cfg: TrainConfig, device: str, progress: dict
) -> None:
    figures = validate(model, batches, cfg, device)
    row = {k: progress.get(k, 0) for k in ("step", "tokens", "seconds", "cpu_seconds")} | figures
    with (run.folder / "valid.jsonl").open("a") as out:
        out.write(json.dumps(row) + "\n")
    logger.info(
        "validation at %.2fM tokens: ar %.3f canvas %.3f",
        progress["tokens"] / 1e6,
        figures["ar"],
        figures["canvas"],
    )


def export(args: argparse.Namespace) -> None:
    run = Run(Path(args.run))
    cfg = json.loads((run.folder / "config.json").read_text())
    tokenizer = load_tokenizer(run.tokenizer_path)
    model = new_model(shape_by_name(cfg["shape"]), tokenizer)
    weights = load_file(run.state / ("model.safetensors" if args.raw else "ema.safetensors"))
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    dtype = {"bf16": torch.bfloat16, "fp32": None}[args.dtype]
    save_checkpoint(model.eval(), tokenizer, Path(args.out), settings=shipped_sampler_settings(), dtype=dtype)
    progress = json.loads((run.state / "progress.json").read_text())
    (Path(args.out) / "training.json").write_text(
        json.dumps(
            {k: v for k, v in progress.items() if k != "adam_steps"}
            | {"config": cfg, "weights": "raw" if args.raw else "ema"},
            indent=1,
        )
    )
    logger.info("exported step %d to %s", progress["step"], args.out)


def shipped_sampler_settings() -> SamplerSettings:
    """Sampler defaults written into an exported model's generation config: few steps for CPU latency."""
    return SamplerSettings(max_steps=8, entropy_bound=0.1, t_max=0.6, t_min=0.2)


def make_tokenizer(args: argparse.Namespace) -> None:
    documents = load_documents(Path(args.corpus), "train")
    rng = random.Random(0)
    rng.shuffle(documents)
    texts, size = [], 0
    for doc in documents:
        texts.append(doc.text)
        size += len(doc.text)
        if size > args.sample_mb * 1e6:
            break
    tokenizer = train_tokenizer(texts, args.vocab_size)
    Path(args.run).mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(Run(Path(args.run)).tokenizer_path))
    logger.info("tokenizer with %d tokens from %.1f MB", tokenizer.get_vocab_size(), size / 1e6)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.train", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenizer", help="train the BPE tokenizer of a run")
    tok.add_argument("--corpus", required=True)
    tok.add_argument("--run", required=True)
    tok.add_argument("--vocab-size", type=int, default=8192)
    tok.add_argument("--sample-mb", type=float, default=40)
    tr = sub.add_parser("run", help="train (or resume) a run")
    tr.add_argument("--corpus", required=True)
    tr.add_argument("--run", required=True)
    tr.add_argument("--shape", default="small")
    tr.add_argument("--languages", default="", help="comma-separated corpus languages (default: all)")
    tr.add_argument("--batch-size", type=int, default=16)
    tr.add_argument("--lr", type=float, default=2e-3)
    tr.add_argument("--threads", type=int, default=0)
    tr.add_argument("--device", default="cpu")
    tr.add_argument("--no-bf16", action="store_true")
    tr.add_argument("--hours", type=float, default=0)
    tr.add_argument("--steps", type=int, default=0)
    tr.add_argument(
        "--cooldown-steps", type=int, default=0,
        help="decay the learning rate to a tenth over N steps, then stop (run it on a copy of the run)",
    )  # fmt: skip
    tr.add_argument(
        "--from-snapshot", default="",
        help="start a new run from a snapshot folder (`snapshot`); ignored once the run has its own state",
    )  # fmt: skip
    tr.add_argument("--ar-weight", type=float, default=0.5)
    tr.add_argument("--canvas-weight", type=float, default=1.0)
    tr.add_argument(
        "--canvas-from-tokens", type=float, default=0, help="no canvas loss before this many tokens"
    )
    tr.add_argument("--canvas-ramp-tokens", type=float, default=0, help="then ramp it in over this many")
    tr.add_argument("--optimizer", choices=("adamw", "muon"), default="adamw")
    tr.add_argument("--accumulate", type=int, default=1, help="batches per optimizer step")
    tr.add_argument("--warmup-steps", type=int, default=300)
    tr.add_argument("--max-tokens", type=float, default=0, help="stop once the run has seen this many tokens")
    tr.add_argument("--validate-every-tokens", type=float, default=0, help="validation loss every N tokens")
    tr.add_argument("--log-every", type=int, default=20)
    tr.add_argument("--save-every-min", type=float, default=10)
    ex = sub.add_parser("export", help="write the run's EMA weights as a checkpoint folder")
    ex.add_argument("--run", required=True)
    ex.add_argument("--out", required=True)
    ex.add_argument("--raw", action="store_true", help="export the raw weights instead of the EMA")
    ex.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="weights on disk")
    sn = sub.add_parser("snapshot", help="pack a run's weights and progress into a committable folder")
    sn.add_argument("--run", required=True)
    sn.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(message)s")
    logger.setLevel(logging.INFO)
    if args.command == "tokenizer":
        make_tokenizer(args)
    elif args.command == "run":
        Path(args.run).mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(Path(args.run) / "train.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        try:
            train(args)
        finally:
            logger.removeHandler(handler)
            handler.close()
    elif args.command == "snapshot":
        snapshot(args)
    else:
        export(args)


if __name__ == "__main__":
    main()
