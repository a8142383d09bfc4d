"""`dgemma-lsp eval BENCH` (or `python -m evaluation BENCH`): score a model on a FIM benchmark.

Every row goes through the server's completion pipeline with the server's options (latency budget
included). Prints one table row per decoder (diffusion, and autoregressive with --compare-ar) and,
with --json, writes every row's completion and scores next to the summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path

from engine.api import EngineError
from evaluation.benchmarks import (
    BENCHMARKS,
    BENCHMARKS_ENV,
    HELDOUT_LANGUAGES,
    SANTACODER_LANGUAGES,
    load_items,
)
from evaluation.execute import DEFAULT_TIMEOUT_S

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dgemma-lsp eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS), metavar="BENCH", help=", ".join(BENCHMARKS))
    parser.add_argument("--limit", type=int, help="the first N rows only")
    parser.add_argument("--model", default="default", help="default, a checkpoint folder or a cached HF id")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write per-row results and the summary here")
    parser.add_argument("--compare-ar", action="store_true", help="also decode autoregressively, compare")
    parser.add_argument("--max-steps", type=int, help="denoising steps per canvas (default: checkpoint)")
    parser.add_argument(
        "--budget-ms", type=int, help="latency budget per completion (default: the server's; 0: none)"
    )
    parser.add_argument(
        "--single-line-canvas", type=int, metavar="N",
        help="tokens per canvas of a single-line completion (default: the server's; 0: the model's canvas)",
    )  # fmt: skip
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--language",
        default="py",
        choices=sorted({*SANTACODER_LANGUAGES, *HELDOUT_LANGUAGES}),
        help="santacoder-fim: py, js or java; heldout: python, python-calibration, typescript, lua, "
        "or a cross-file subset: python-crossfile, typescript-crossfile, lua-crossfile",
    )
    parser.add_argument("--benchmarks", metavar="DIR", help=f"benchmark data folder (or ${BENCHMARKS_ENV})")
    parser.add_argument("--no-execute", action="store_true", help="skip running tests (no pass@1)")
    parser.add_argument("--no-baseline", action="store_true", help="leave out the copy heuristic's row")
    parser.add_argument("--no-drafts", action="store_true", help="turn the pipeline's drafts stage off")
    parser.add_argument(
        "--no-next-token-draft", action="store_true",
        help="no next-token draft where the code around the cursor offers none (other drafts stay)",
    )  # fmt: skip
    parser.add_argument(
        "--no-context-drafts", action="store_true",
        help="no lookup or structure draft: the model alone, its next-token head drafting for its canvas",
    )  # fmt: skip
    parser.add_argument(
        "--no-gates", action="store_true", help="ignore the model's calibrated confidence gates"
    )
    parser.add_argument(
        "--fix-gate", action="append", default=[], metavar="NAME=PERCENT",
        help="with --calibrate: hold this gate (e.g. min_mean_confidence_percent=40) and choose the others",
    )  # fmt: skip
    parser.add_argument(
        "--calibrate", type=Path, metavar="OUT",
        help="choose the model's confidence gates on these rows and write them (calibration.json)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per test run")
    parser.add_argument(
        "--workspace", nargs="?", const="data/heldout-workspaces", default="", metavar="DIR",
        help="heldout only: complete each row with its package as the workspace (DIR from `python -m "
        "evaluation.heldout workspaces`, default data/heldout-workspaces)",
    )  # fmt: skip
    parser.add_argument(
        "--workspace-tokens", type=int, metavar="N",
        help="prompt tokens for the workspace's snippets (default: the server's; 0: its lookup drafts only)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from engine import load_engine
    from evaluation.runner import EvalOptions, run_eval

    try:
        items = load_items(args.benchmark, args.limit, args.language, args.benchmarks)
        engine = load_engine(args.model, device=args.device, threads=args.threads)
        options = EvalOptions(
            compare_ar=args.compare_ar, max_steps=args.max_steps, budget_ms=args.budget_ms,
            execute=not args.no_execute, timeout_s=args.timeout, copy_baseline=not args.no_baseline,
            drafts=not args.no_drafts, next_token_draft=not args.no_next_token_draft,
            context_drafts=not args.no_context_drafts,
            gates=not args.no_gates, single_line_canvas=args.single_line_canvas, workspaces=args.workspace,
            workspace_tokens=args.workspace_tokens,
        )  # fmt: skip
        if args.workspace and args.benchmark != "heldout":
            raise ValueError("--workspace scores held-out rows only: their packages are the workspaces")
        language = args.language if args.benchmark in ("santacoder-fim", "heldout") else ""
        if args.calibrate:
            return write_calibration(engine, BENCHMARKS[args.benchmark], items, args, argv)
        report = run_eval(engine, BENCHMARKS[args.benchmark], items, options, language)
    except (EngineError, OSError, ValueError) as err:
        print(f"dgemma-lsp eval: {err}", file=sys.stderr)
        return 2
    print(format_table(report))
    if args.json:
        # The command line goes with the figures: a number in a model card names the command behind it.
        payload = report.to_json() | {"command": shlex.join(["dgemma-lsp", "eval", *argv])}
        args.json.write_text(json.dumps(payload, indent=1, allow_nan=False))
        logger.info("wrote %s", args.json)
    return 0


def write_calibration(engine, benchmark, items, args: argparse.Namespace, argv: list[str]) -> int:
    """`--calibrate OUT`: the confidence gates for this model, chosen on these rows (a validation split)."""
    from engine.loading import GATES
    from evaluation.calibrate import calibrate

    if args.benchmark == "heldout" and not args.language.endswith("calibration"):
        print(
            "dgemma-lsp eval: calibrate on the validation split: --language python-calibration",
            file=sys.stderr,
        )
        return 2
    try:
        fixed = {name: int(value) for name, value in (f.split("=", 1) for f in args.fix_gate)}
    except ValueError:
        print(f"dgemma-lsp eval: --fix-gate takes NAME=PERCENT, got {args.fix_gate}", file=sys.stderr)
        return 2
    if not all(0 <= value <= 100 for value in fixed.values()):
        print(
            f"dgemma-lsp eval: --fix-gate takes a percent from 0 to 100, got {args.fix_gate}", file=sys.stderr
        )
        return 2
    if unknown := set(fixed) - set(GATES):
        print(
            f"dgemma-lsp eval: no gate named {', '.join(sorted(unknown))}: one of {', '.join(GATES)}",
            file=sys.stderr,
        )
        return 2
    found = calibrate(engine, benchmark, items, args.budget_ms, argv, fixed)
    args.calibrate.write_text(json.dumps(found, indent=1))
    mean, line = found["min_mean_confidence_percent"], found["min_line_confidence_percent"]
    next_token = found["min_next_token_confidence_percent"]
    print(f"gates: mean >= {mean}%, line >= {line}%, next-token draft's by the head >= {next_token}%")
    for name in ("chosen", "open_gates"):
        point = found[name]
        print(
            f"  {name}: offered {point['offered']:.0%}, "
            f"single-line precision {_cell(point['precision'], '.0%')} of {point['single_offered']} "
            f"(goal {found['precision_goal']:.0%}), {point['accepted_chars_per_request']:.1f} characters "
            "accepted per request"
        )
    logger.info("wrote %s", args.calibrate)
    return 0


def _cell(value: float | None, spec: str, width: int = 0) -> str:
    return ("-" if value is None else format(value, spec)).rjust(width)


def format_table(report) -> str:
    """The summary as a plain-text table (a report from evaluation.runner.run_eval)."""
    model = report.model
    title = report.benchmark + (f" ({report.language})" if report.language else "")
    lines = [
        f"{title}: model {model['name']} on {model['device']} ({model['dtype']}), the server's pipeline",
        f"{'decoder':<15} {'n':>5} {'exact':>7} {'edit sim':>8} {'offered':>7} {'precise':>7} {'pass@1':>7} "
        f"{'steps':>6} {'tok/fwd':>7} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for s in report.summaries:
        lines.append(
            f"{s.decoder:<15} {s.n:>5} {_cell(s.exact_match, '.1%', 7)} {_cell(s.edit_similarity, '.3f', 8)} "
            f"{_cell(s.offered, '.0%', 7)} {_cell(s.precision, '.0%', 7)} {_cell(s.pass_at_1, '.1%', 7)} "
            f"{_cell(s.steps, '.1f', 6)} "
            f"{_cell(s.tokens_per_forward, '.2f', 7)} {_cell(s.p50_ms, '.0f', 8)} {_cell(s.p95_ms, '.0f', 8)}"
        )
        if len(s.shown_by_origin) > 1:
            lines.append(
                "  shown from: "
                + ", ".join(
                    f"{o} {n} (steps {_cell(s.steps_by_origin[o], '.1f')})"
                    for o, n in s.shown_by_origin.items()
                )
            )
        for kind, f in s.by_kind.items():
            lines.append(
                f"  {kind:<13} {f['n']:>5} {_cell(f['exact_match'], '.1%', 7)} "
                f"{_cell(f['edit_similarity'], '.3f', 8)} {_cell(f['offered'], '.0%', 7)} "
                f"{_cell(f['precision'], '.0%', 7)}"
            )
    speed = report.speed
    if speed is not None:
        span = f"{speed.min_tokens}-{speed.max_tokens} token completions"
        if speed.rows:
            lines.append(
                f"speed on the {speed.rows} rows where both wrote {span}: diffusion "
                f"{_cell(speed.diffusion_tokens_per_s, '.1f')} tok/s, autoregressive "
                f"{_cell(speed.autoregressive_tokens_per_s, '.1f')} tok/s, ratio "
                f"{_cell(speed.ratio, '.2f')}x; after the prompt's prefill (the same for both): diffusion "
                f"{_cell(speed.diffusion_decode_tokens_per_s, '.1f')} tok/s, autoregressive "
                f"{_cell(speed.autoregressive_decode_tokens_per_s, '.1f')} tok/s, ratio "
                f"{_cell(speed.decode_ratio, '.2f')}x"
            )
        else:
            lines.append(f"speed: no row where both decoders wrote {span}")
    return "\n".join(lines)
