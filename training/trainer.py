"""The training loop: start or resume a run, optimizer steps, EMA, validation, logging and saving."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import torch

from engine.loading import bound_kernel_caches
from engine.prompts import FimFormat
from engine.tokenizer import load_tokenizer
from training.checkpoint import new_model
from training.completion_check import completion_figures
from training.config import TrainConfig
from training.data import DocumentMix, load_documents
from training.growth import added_layers, added_part
from training.muon import MuonAdamW, is_hidden_matrix
from training.objective import Batch, canvas_weight_at, losses, next_batch, validate, validation_batches
from training.repository import PackageContexts
from training.run_state import Run, load_model, parameters, seed_run_from_model
from training.shapes import shape_by_name

logger = logging.getLogger(__name__)


@dataclass
class Session:
    """What one `run` command asks for, beside the run's own config: data, device, when to stop."""

    corpus: Path
    languages: set[str] | None = None
    validation_languages: set[str] | None = None  # None: the training languages
    device: str = "cpu"
    hours: float = 0  # 0: no limit, as for steps and max_tokens
    steps: int = 0
    max_tokens: float = 0
    cooldown_steps: int = 0
    from_model: Path | None = None  # an exported model a new run starts from (engine/default)
    deeper_shape: str = ""  # a new run from a model grows to this shape (more layers, all else equal)
    validate_every_tokens: float = 0
    completion_rows: int = 0  # held-out positions completed by the model alone at each validation
    log_every: int = 20
    save_every_min: float = 10
    # Objective fields set on the run's config from now on (a branch that ramps the canvas loss in,
    # or starts canvases from drafts): what `--set KEY=VALUE` gives; recorded in config.json.
    overrides: dict[str, str] = field(default_factory=dict)


def build_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (or Muon on hidden matrices); an added layer's weights and its gates in groups of their own
    (`added`: "layer" or "gate"), whose rate is the run's times the config's scale for them."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    added, named = _split_added(named, cfg)
    if cfg.optimizer == "muon":
        hidden = [p for n, p in named if is_hidden_matrix(n, p)]
        decay = [p for n, p in named if p.dim() >= 2 and not is_hidden_matrix(n, p)]
        rest = [p for n, p in named if p.dim() < 2]
        return MuonAdamW(
            [
                {"params": hidden, "weight_decay": cfg.weight_decay, "muon": True},
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": rest, "weight_decay": 0.0},
                *added,
            ],
            lr=cfg.lr,
        )
    decay = [p for n, p in named if p.dim() >= 2]
    rest = [p for n, p in named if p.dim() < 2]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": rest, "weight_decay": 0.0},
            *added,
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )


def _split_added(
    named: list[tuple[str, torch.nn.Parameter]], cfg: TrainConfig
) -> tuple[list[dict], list[tuple[str, torch.nn.Parameter]]]:
    """(the added layers' groups, the other parameters): groups by part and kind in a fixed order (a saved
    optimizer state loads by position), matrices with the trained layers' weight decay, vectors and gates
    without; AdamW's update even under Muon."""
    found: dict[tuple[str, bool], list[torch.nn.Parameter]] = {}
    others = []
    for name, param in named:
        if part := added_part(name, cfg.added_layers):
            found.setdefault((part, param.dim() >= 2), []).append(param)
        else:
            others.append((name, param))
    order = (("layer", True), ("layer", False), ("gate", False))
    groups = [
        {"params": found[key], "weight_decay": cfg.weight_decay if key[1] else 0.0, "added": key[0]}
        for key in order
        if key in found
    ]
    return groups, others


def lr_scale(cfg: TrainConfig, group: dict) -> float:
    """The multiple of the run's rate a parameter group trains at: read from the config at every step, so
    that `--set` changes it on a resumed run (a loaded optimizer state keeps its groups' old keys)."""
    return {"layer": cfg.added_lr_scale, "gate": cfg.added_gate_lr_scale}.get(group.get("added", ""), 1.0)


def learning_rate(
    cfg: TrainConfig, step: int, cooldown: dict | None = None, rewarm: dict | None = None
) -> float:
    # Warmup, then constant: the run has no planned end (it continues session after session).
    # A cooldown branch (a copy of the run, `--cooldown-steps N`) decays linearly to a tenth over
    # N steps: the warmup-stable-decay recipe, where the stable run goes on from before the branch.
    # A run started from an exported model has fresh Adam moments, so it warms up again (`rewarm`).
    rate = cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps)
    if rewarm:
        rate *= min(1.0, (step - rewarm["from"] + 1) / rewarm["steps"])
    if cooldown:
        done = min(1.0, max(0, step - cooldown["from"]) / cooldown["steps"])
        rate *= 1.0 - 0.9 * done
    return rate


def open_run(
    run: Run,
    new_config: TrainConfig,
    from_model: Path | None,
    overrides: dict[str, str] | None = None,
    deeper_shape: str = "",
) -> tuple[TrainConfig, Path | None]:
    """The run's config (`new_config` for a new run) and the model to start from, if any is still due."""
    run.folder.mkdir(parents=True, exist_ok=True)
    if from_model and run.has_state():
        logger.info("the run has its own state: resuming it, not %s", from_model)
        from_model = None
    elif from_model:
        seed_run_from_model(run, from_model)
    cfg = run.read_config()
    if cfg is None:
        cfg = new_config
        run.write_config(cfg)
    elif from_model and deeper_shape and deeper_shape != cfg.shape:
        cfg = deeper(cfg, deeper_shape)
        run.write_config(cfg)
    if overrides:
        cfg = cfg.with_overrides(overrides)
        run.write_config(cfg)
        logger.info("config set from now on: %s", overrides)
    return cfg, from_model


def deeper(cfg: TrainConfig, shape: str) -> TrainConfig:
    """The model's config with a deeper shape: the only change a run started from a model can make."""
    have, want = shape_by_name(cfg.shape), shape_by_name(shape)
    if replace(want, num_layers=have.num_layers) != have or want.num_layers <= have.num_layers:
        raise SystemExit(f"--shape {shape}: a run from a {cfg.shape} model can only grow deeper")
    logger.info("growing the model's %d layers to %d (%s)", have.num_layers, want.num_layers, shape)
    return replace(cfg, shape=shape, added_layers=added_layers(have.num_layers, want.num_layers))


def initial_state(
    run: Run, model, optimizer, cfg: TrainConfig, from_model: Path | None
) -> tuple[dict[str, torch.Tensor], dict]:
    """(EMA weights, progress): the run's own state, else the exported model's, else a fresh start."""
    if run.has_state():
        ema, progress = run.load(model, optimizer)
        logger.info("resumed at step %d", progress["step"])
        return ema, progress
    if from_model:
        return load_model(from_model, model, cfg)
    ema = {k: v.clone().float() for k, v in parameters(model).items()}
    return ema, {"step": 0, "tokens": 0, "seconds": 0.0, "canvas_tokens": 0}


@dataclass
class StepFigures:
    diffusion: float  # mean over the accumulated batches; 0 while the canvas weight is 0
    ar: float
    tokens: int  # encoder tokens read
    canvas_tokens: int


def optimizer_step(
    model,
    optimizer,
    cfg: TrainConfig,
    *,
    batches: Callable[[], Batch],
    gen: torch.Generator,
    device: str,
    weight: float,
) -> StepFigures:
    """Accumulate `cfg.accumulate` batches of ar_weight * AR loss + weight * canvas loss, then step."""
    optimizer.zero_grad(set_to_none=True)
    figures = StepFigures(0.0, 0.0, 0, 0)
    for _ in range(cfg.accumulate):
        batch = batches()
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=cfg.bf16):
            diffusion_loss, ar_loss = losses(model, batch, cfg, gen, device, with_canvas=weight > 0)
        loss = cfg.ar_weight * ar_loss
        if diffusion_loss is not None:
            loss = loss + weight * diffusion_loss
            figures.diffusion += diffusion_loss.item() / cfg.accumulate
            figures.canvas_tokens += batch.target.numel()
        (loss / cfg.accumulate).backward()
        figures.ar += ar_loss.item() / cfg.accumulate
        figures.tokens += int(batch.encoder_mask.sum())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return figures


def update_ema(ema: dict[str, torch.Tensor], model, decay: float) -> None:
    with torch.no_grad():
        for name, value in parameters(model).items():
            ema[name].mul_(decay).add_(value.float(), alpha=1 - decay)


def release_freed_memory() -> None:
    """Hand memory freed by the allocator back to the system: batches of varying shapes fragment
    glibc's heap, and a long run's resident size keeps growing without this."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def time_left(
    session: Session, progress: dict, started_step: int, deadline: float, rate: float, step_s: float
) -> str:
    """When the run will stop, if it has a limit: the soonest of tokens, steps and hours."""
    left = []
    if session.max_tokens and rate > 0:
        left.append((session.max_tokens - progress["tokens"]) / rate)
    if session.steps:
        left.append((started_step + session.steps - progress["step"]) * step_s)
    if deadline != math.inf:
        left.append(deadline - time.monotonic())
    return f", {max(0.0, min(left)) / 60:.0f} min left" if left else ""


def train(run: Run, session: Session, new_config: TrainConfig) -> None:
    cfg, from_model = open_run(run, new_config, session.from_model, session.overrides, session.deeper_shape)
    device = session.device
    if cfg.bf16 and device == "cpu":
        # Batches of many shapes filled oneDNN's per-shape caches as they fill the server's: capped,
        # the trainer's memory grew a quarter as fast and it read about a third more tokens per second.
        bound_kernel_caches(primitives=64)
    tokenizer = load_tokenizer(run.tokenizer_path)
    fmt = FimFormat(tokenizer)
    model = new_model(shape_by_name(cfg.shape), tokenizer, seed=cfg.seed).to(device).train()
    optimizer = build_optimizer(model, cfg)
    ema, progress = initial_state(run, model, optimizer, cfg, from_model)
    if session.cooldown_steps and "cooldown" not in progress:
        progress["cooldown"] = {"from": progress["step"], "steps": session.cooldown_steps}
    cooldown, rewarm = progress.get("cooldown"), progress.get("rewarm")
    rng = random.Random(cfg.seed * 1_000_003 + progress["step"])
    gen = torch.Generator(device=device).manual_seed(cfg.seed + progress["step"])
    documents = load_documents(session.corpus, "train", session.languages)
    try:
        mix = DocumentMix(documents, cfg.language_weights)
    except ValueError as error:
        raise SystemExit(f"--set language_weights: {error}") from None
    logger.info("%d training documents, drawn %s", len(documents), cfg.language_weights or "by file")
    contexts = PackageContexts(documents) if cfg.context_share else None

    stop = {"now": False}

    def request_stop(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    deadline = time.monotonic() + session.hours * 3600 if session.hours else math.inf
    last_save = time.monotonic()
    window: list[tuple[float, float, float, int]] = []
    started_step = progress["step"]
    validation_languages = session.validation_languages or session.languages
    validation = (
        validation_batches(session.corpus, fmt, validation_languages)
        if session.validate_every_tokens
        else None
    )
    # The same held-out spans with their packages' context: what reading it is worth, as it is learned.
    context_validation = (
        validation_batches(session.corpus, fmt, validation_languages, contexts)
        if validation and contexts
        else None
    )
    next_validation = progress["tokens"]
    while (
        not stop["now"]
        and time.monotonic() < deadline
        and (not session.steps or progress["step"] < started_step + session.steps)
        and (not cooldown or progress["step"] < cooldown["from"] + cooldown["steps"])
        and (not session.max_tokens or progress["tokens"] < session.max_tokens)
    ):
        step_start, cpu_start = time.perf_counter(), time.process_time()
        weight = canvas_weight_at(cfg, progress["tokens"])
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, progress["step"], cooldown, rewarm) * lr_scale(cfg, group)
        batches = partial(next_batch, mix, fmt, rng, cfg, contexts)
        figures = optimizer_step(
            model, optimizer, cfg, batches=batches, gen=gen, device=device, weight=weight
        )
        update_ema(ema, model, cfg.ema_decay)
        elapsed = time.perf_counter() - step_start
        progress["step"] += 1
        progress["seconds"] += elapsed
        progress["cpu_seconds"] = progress.get("cpu_seconds", 0.0) + time.process_time() - cpu_start
        progress["tokens"] += figures.tokens
        progress["canvas_tokens"] += figures.canvas_tokens
        window.append((figures.diffusion, figures.ar, elapsed, figures.tokens))
        if validation and progress["tokens"] >= next_validation:
            record_validation(
                run,
                model,
                validation,
                cfg,
                device,
                progress,
                fmt,
                session.completion_rows,
                context_validation,
            )
            next_validation = progress["tokens"] + session.validate_every_tokens
        if progress["step"] % session.log_every == 0:
            d, a, s, t = (sum(x[i] for x in window) / len(window) for i in range(4))
            rate = learning_rate(cfg, progress["step"], cooldown, rewarm)
            logger.info(
                "step %d diff %.3f ar %.3f canvas weight %.2f lr %.2e %.0f ms/step %.0f tok/s seen %.1fM tok "
                "%.2f h %.2f cpu h%s",
                progress["step"], d, a, weight, rate, s * 1000, t / s,
                progress["tokens"] / 1e6, progress["seconds"] / 3600, progress["cpu_seconds"] / 3600,
                time_left(session, progress, started_step, deadline, t / s, s),
            )  # fmt: skip
            window.clear()
        if time.monotonic() - last_save > session.save_every_min * 60:
            run.save(model, ema, optimizer, progress)
            release_freed_memory()
            last_save = time.monotonic()
    run.save(model, ema, optimizer, progress)
    logger.info("saved at step %d", progress["step"])


COMPLETIONS_LOGGED = (
    ", model alone on {completion_rows} held-out positions: EM {completion_em:.3f} ES {completion_es:.3f}"
    " (left to right: EM {completion_ar_em:.3f} ES {completion_ar_es:.3f})"
)


def record_validation(
    run: Run,
    model,
    batches: list[Batch],
    cfg: TrainConfig,
    device: str,
    progress: dict,
    fmt: FimFormat,
    completion_rows: int = 0,
    context_batches: list[Batch] | None = None,
) -> None:
    figures = validate(model, batches, cfg, device)
    if context_batches:
        with_context = validate(model, context_batches, cfg, device)
        figures |= {"ar_context": with_context["ar"], "canvas_context": with_context["canvas"]}
    completions = ""
    if completion_rows and device == "cpu":  # the check serves a bf16 copy as the CPU server would
        figures |= completion_figures(model, fmt, completion_rows)
        completions = COMPLETIONS_LOGGED.format(**figures)
    run.append_validation(
        {k: progress.get(k, 0) for k in ("step", "tokens", "seconds", "cpu_seconds")} | figures
    )
    context = (
        " (with their packages' context: ar {ar_context:.3f} canvas {canvas_context:.3f})".format(**figures)
        if "ar_context" in figures
        else ""
    )
    logger.info(
        "validation at %.2fM tokens: ar %.3f canvas %.3f%s%s",
        progress["tokens"] / 1e6,
        figures["ar"],
        figures["canvas"],
        context,
        completions,
    )
