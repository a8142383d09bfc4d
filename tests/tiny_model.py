"""Build the tiny test checkpoint described in fixtures/tiny_model (random weights, fixed seed)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURE = Path(__file__).parent.parent / "fixtures" / "tiny_model"


def build_tiny_checkpoint(folder: Path) -> Path:
    from training.checkpoint import new_model, save_checkpoint
    from training.shapes import shape_by_name
    from training.tokenizer import train_tokenizer

    spec = json.loads((FIXTURE / "shape.json").read_text())
    texts = [path.read_text() for path in sorted(FIXTURE.glob("corpus_*.py"))]
    tokenizer = train_tokenizer(texts, spec["vocab_size"])
    model = new_model(shape_by_name(spec["shape"]), tokenizer, seed=spec["seed"])
    return save_checkpoint(model, tokenizer, folder)
