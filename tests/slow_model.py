"""Build a slow engine for tests and benchmarks: a random-weight model of the released architecture
(DiffusionGemmaForBlockDiffusion, the bundled model's tokenizer), large enough that a completion takes
several hundred milliseconds on a laptop CPU. Built at run time in seconds, never committed as weights.

Its text is noise and a canvas from noise never settles (random weights are never confident), so a
request without drafts runs all its steps: what the resolving notifications and their benchmark need
(docs/performance.md).
"""

from __future__ import annotations

from pathlib import Path

from engine.sampler import SamplerSettings

DEFAULT_TOKENIZER = Path(__file__).resolve().parent.parent / "engine" / "default" / "tokenizer.json"
STEPS = 12  # denoising steps per canvas (the released model's default is 48)


def slow_shape():
    """The "base" shape four layers deep with four experts (hidden 384): 17.5M parameters, under the size
    the engine runs on one thread of a small CPU, ~13M active per token."""
    from training.shapes import shape_by_name

    return shape_by_name("base", num_layers=4, num_experts=4)


def build_slow_checkpoint(folder: Path, seed: int = 0) -> Path:
    """The slow checkpoint in `folder` (bf16 weights, the sampler running STEPS steps per canvas)."""
    import torch
    from tokenizers import Tokenizer

    from training.checkpoint import new_model, save_checkpoint

    tokenizer = Tokenizer.from_file(str(DEFAULT_TOKENIZER))
    model = new_model(slow_shape(), tokenizer, seed=seed)
    return save_checkpoint(model, tokenizer, folder, SamplerSettings(max_steps=STEPS), dtype=torch.bfloat16)


if __name__ == "__main__":
    import sys

    print(build_slow_checkpoint(Path(sys.argv[1])))
