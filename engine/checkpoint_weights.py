"""A checkpoint folder's text weights, read straight from its safetensors files (one or sharded), for the
fused layers: no model object is built, so transformers' modeling module is never imported."""

from __future__ import annotations

import json
from pathlib import Path

import torch

# What the fused layers read: the decoder (whose layers the encoder shares) and the encoder's layer
# scalars, which are buffers and not tied to the decoder's.
TEXT_PREFIXES = ("model.decoder.", "model.encoder.language_model.layers.")
# Buffers a checkpoint stores beside the parameters (not counted as parameters).
_BUFFER_SUFFIXES = ("layer_scalar",)


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of `folder`: those its index names, or every one there."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / name for name in names]
    return sorted(folder.glob("*.safetensors"))


def read_text_weights(folder: Path, dtype: torch.dtype) -> tuple[dict[str, torch.Tensor], int]:
    """The tensors under `TEXT_PREFIXES` in `dtype`, and the checkpoint's parameter count (every stored
    tensor that is not a buffer; tied weights are stored once, as the model counts them)."""
    from safetensors import safe_open

    weights: dict[str, torch.Tensor] = {}
    parameters = 0
    for path in weight_files(folder):
        with safe_open(path, framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - a safetensors handle has no __iter__
                if name.startswith(TEXT_PREFIXES):
                    weights[name] = f.get_tensor(name).to(dtype)
                if not name.endswith(_BUFFER_SUFFIXES):
                    shape = f.get_slice(name).get_shape()
                    parameters += int(torch.Size(shape).numel())
    return weights, parameters
