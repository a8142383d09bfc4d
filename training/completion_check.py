"""What users get, measured while training: the model alone completing held-out calibration positions.

Validation loss and completions came apart once (a branch 1.0 nats lower in next-token loss completed
no better), so each validation can also run the weights as they are through the server's own
pipeline: the weights rounded to bf16 as an export ships them, computing in the dtype the engine loads
them in on this CPU (bf16 where native, else fp32), served by `LocalEngine`, the sampler settings an
export writes, no drafts, no confidence gates and no deadline (the figure must not depend on how busy
the machine is), on the first rows of the held-out Python calibration set (never trained on). The
same weights decoded left to right by the next-token head go beside it: where the code offers no
draft, the server starts the canvas from what that head writes.
"""

from __future__ import annotations

from pathlib import Path

import torch

from engine.api import EngineInfo
from engine.backbone import backbone_of
from engine.loading import native_bf16
from engine.local_engine import LocalEngine
from engine.prompts import FimFormat
from evaluation.benchmarks import BENCHMARKS, heldout
from evaluation.runner import AUTOREGRESSIVE, DIFFUSION, EvalOptions, run_eval
from training.checkpoint import cast_copy
from training.export import shipped_sampler_settings

CHECK_SET = "python-calibration"
MODEL_ALONE = EvalOptions(
    copy_baseline=False, drafts=False, gates=False, budget_ms=0, execute=False, warmup=False, compare_ar=True
)


def completion_figures(model: torch.nn.Module, fmt: FimFormat, rows: int) -> dict[str, float]:
    """Exact match and edit similarity of the model alone on the first `rows` calibration positions, by
    diffusion from noise and by the next-token head left to right."""
    items = list(heldout(Path(), CHECK_SET))[:rows]
    with torch.random.fork_rng():  # building the copy draws an initialisation: not from training's RNG
        copy = cast_copy(model, torch.bfloat16).eval()  # export's default dtype: its rounded weights
    if not native_bf16("cpu"):
        copy.float()  # as `load_engine` computes a bf16 checkpoint here: the same values, in fp32
    backbone = backbone_of(copy)
    info = EngineInfo(
        name="training",
        source="the run's current weights",
        family=fmt.family,
        device="cpu",
        dtype=str(next(copy.parameters()).dtype).removeprefix("torch."),
        canvas_length=backbone.canvas_length,
        parameters=backbone.parameter_count,
    )
    engine = LocalEngine(backbone, fmt, shipped_sampler_settings(), info)
    report = run_eval(engine, BENCHMARKS["heldout"], items, MODEL_ALONE, language=CHECK_SET)
    summary = next(s for s in report.summaries if s.decoder == DIFFUSION)
    ar = next(s for s in report.summaries if s.decoder == AUTOREGRESSIVE)
    return {
        "completion_rows": summary.n,
        "completion_em": summary.exact_match or 0.0,
        "completion_es": summary.edit_similarity or 0.0,
        "completion_steps": summary.steps or 0.0,
        "completion_ar_em": ar.exact_match or 0.0,
        "completion_ar_es": ar.edit_similarity or 0.0,
    }
