"""The trainer's losses on a fixed tiny batch equal the values recorded before training left engine/."""

from __future__ import annotations

import random

import pytest
import torch

from engine.prompts import FimFormat
from engine.tokenizer import load_tokenizer
from tests.tiny_model import FIXTURE
from training.checkpoint import new_model
from training.config import TrainConfig
from training.data import Document, DocumentMix, examples
from training.objective import collate, losses, noise_rates, validate
from training.shapes import shape_by_name
from training.trainer import build_optimizer

# (diffusion loss, AR loss) from engine/train.py at commit 40dce7d, same seeds, CPU, fp32.
RECORDED = {
    "self_conditioned": (5.906374931335449, 6.254605293273926),
    "plain": (6.080083847045898, 6.254605293273926),
    "validate": (5.993358612060547, 6.254605293273926),
    "adamw after one step": (5.566012859344482, 6.196638584136963),
    "muon after one step": (5.723391056060791, 6.211292743682861),
}


def same(values, recorded, rel: float = 1e-6) -> bool:
    return list(values) == pytest.approx(list(recorded), rel=rel, abs=0)


@pytest.mark.filterwarnings("error::FutureWarning")  # e.g. transformers' `past_key_values` deprecation
@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_losses_on_a_fixed_batch_are_the_recorded_ones(tiny_model_dir, optimizer):
    tokenizer = load_tokenizer(tiny_model_dir / "tokenizer.json")
    fmt = FimFormat(tokenizer)
    text = (FIXTURE / "corpus_textwrap.py").read_text()
    stream = examples(
        DocumentMix([Document(text, "python")]), fmt, random.Random(0), prompt_budget=128, canvas=16
    )
    batch = collate([next(stream) for _ in range(4)], fmt.special.pad)
    model = new_model(shape_by_name("tiny"), tokenizer, seed=0).train()
    cfg = TrainConfig(bf16=False, self_conditioning_rate=1.0, optimizer=optimizer)
    gen = torch.Generator().manual_seed(0)

    diffusion, ar = losses(model, batch, cfg, gen, "cpu")
    assert same((diffusion.item(), ar.item()), RECORDED["self_conditioned"])
    plain = losses(model, batch, TrainConfig(bf16=False, self_conditioning_rate=0.0), gen, "cpu")
    assert same((t.item() for t in plain), RECORDED["plain"])
    no_canvas, ar_only = losses(model, batch, cfg, gen, "cpu", with_canvas=False)
    assert no_canvas is None and same([ar_only.item()], RECORDED["plain"][1:])
    figures = validate(model, [batch], cfg, "cpu")
    assert same((figures["canvas"], figures["ar"]), RECORDED["validate"])

    (0.5 * ar + diffusion).backward()
    build_optimizer(model, cfg).step()
    after = losses(model, batch, cfg, torch.Generator().manual_seed(0), "cpu")
    # Muon orthogonalizes in bf16, whose matrix products round differently from one CPU's kernels to
    # another's (the same torch gave 5.72334 here and 5.72339 on the machine that recorded it).
    rel = 1e-4 if optimizer == "muon" else 1e-6
    assert same((t.item() for t in after), RECORDED[f"{optimizer} after one step"], rel)


@pytest.mark.parametrize("power", [1.0, 2.0, 4.0])
def test_noise_rates_lean_towards_low_rates_with_the_noise_power(power):
    cfg = TrainConfig(min_noise=0.02, noise_power=power)
    rates = noise_rates(cfg, 20_000, "cpu", torch.Generator().manual_seed(0))
    assert rates.shape == (20_000, 1)
    assert float(rates.min()) >= 0.02 - 1e-6 and float(rates.max()) <= 1.0
    expected = 0.02 + 0.98 / (power + 1)  # the mean of u ** p over u uniform on [0, 1] is 1 / (p + 1)
    assert abs(float(rates.mean()) - expected) < 0.01
