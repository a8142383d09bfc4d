"""`python -m training`: train our own DiffusionGemma-architecture code model (see docs/training.md)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch

from training.config import TrainConfig
from training.export import export
from training.run_state import Run
from training.tokenizer import tokenizer_from_corpus
from training.trainer import Session, train

logger = logging.getLogger("training")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m training", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenizer", help="train the BPE tokenizer of a run")
    tok.add_argument("--corpus", required=True)
    tok.add_argument("--run", required=True)
    tok.add_argument("--vocab-size", type=int, default=8192)
    tok.add_argument("--sample-mb", type=float, default=40)
    tr = sub.add_parser("run", help="train (or resume) a run")
    tr.add_argument("--corpus", required=True)
    tr.add_argument("--run", required=True)
    tr.add_argument(
        "--shape", default="",
        help="shape of a new run (default small); with --from-model, a deeper shape grows the model",
    )  # fmt: skip
    tr.add_argument("--languages", default="", help="comma-separated corpus languages (default: all)")
    tr.add_argument(
        "--validate-languages", default="",
        help="languages of the validation batches (default: --languages), so runs of other mixes compare",
    )  # fmt: skip
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
        "--from-model", default="",
        help="start a new run from an exported model (engine/default); ignored once the run has state",
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
    tr.add_argument(
        "--completion-rows", type=int, default=0,
        help="at each validation, also complete this many held-out positions with the model alone",
    )  # fmt: skip
    tr.add_argument("--draft-share", type=float, default=0.0, help="share of canvases started from a draft")
    tr.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="change an objective field of the run's config from now on (a branch); repeatable",
    )  # fmt: skip
    tr.add_argument("--log-every", type=int, default=20)
    tr.add_argument("--save-every-min", type=float, default=10)
    ex = sub.add_parser("export", help="write the run's EMA weights as a checkpoint folder")
    ex.add_argument("--run", required=True)
    ex.add_argument("--out", required=True)
    ex.add_argument("--raw", action="store_true", help="export the raw weights instead of the EMA")
    ex.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="weights on disk")
    return parser


def new_run_config(args: argparse.Namespace) -> TrainConfig:
    """The config a new run gets from the flags; a run that has a config.json keeps its own."""
    return TrainConfig(
        shape=args.shape or "small",
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
        draft_share=args.draft_share,
    )


def session(args: argparse.Namespace) -> Session:
    return Session(
        corpus=Path(args.corpus),
        languages=set(args.languages.split(",")) if args.languages else None,
        validation_languages=set(args.validate_languages.split(",")) if args.validate_languages else None,
        device=args.device,
        hours=args.hours,
        steps=args.steps,
        max_tokens=args.max_tokens,
        cooldown_steps=args.cooldown_steps,
        from_model=Path(args.from_model) if args.from_model else None,
        deeper_shape=args.shape,
        validate_every_tokens=args.validate_every_tokens,
        completion_rows=args.completion_rows,
        log_every=args.log_every,
        save_every_min=args.save_every_min,
        overrides=dict(item.split("=", 1) for item in args.set),
    )


def make_tokenizer(args: argparse.Namespace) -> None:
    tokenizer, size = tokenizer_from_corpus(Path(args.corpus), args.vocab_size, args.sample_mb)
    run = Run(Path(args.run))
    run.folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(run.tokenizer_path))
    logger.info("tokenizer with %d tokens from %.1f MB", tokenizer.get_vocab_size(), size / 1e6)


def run_logged(args: argparse.Namespace) -> None:
    """Train with the log written to the run's train.log as well."""
    run = Run(Path(args.run))
    run.folder.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    handler = logging.FileHandler(run.log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    try:
        train(run, session(args), new_run_config(args))
    finally:
        logger.removeHandler(handler)
        handler.close()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(message)s")
    logger.setLevel(logging.INFO)
    if args.command == "tokenizer":
        make_tokenizer(args)
    elif args.command == "run":
        run_logged(args)
    else:
        export(Run(Path(args.run)), Path(args.out), raw=args.raw, dtype=args.dtype)
