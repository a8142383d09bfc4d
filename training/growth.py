"""Deepen a trained model without changing what it computes: new layers start as identities.

A new layer copies the trained layer below it with its two post-norms (after attention and after the
feed-forward block) at zero, so it adds nothing to the residual stream until training opens them: the
grown model starts at the snapshot's loss and learns with the extra depth from there.
"""

from __future__ import annotations

import re

import torch

_LAYER = re.compile(r"^(model\.encoder\.language_model\.layers\.)(\d+)\.(.+)$")
_SILENT = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")


def layer_count(weights: dict[str, torch.Tensor]) -> int:
    """Decoder layers in a state dict of our DiffusionGemma shape."""
    return 1 + max(int(m.group(2)) for key in weights if (m := _LAYER.match(key)))


def source_layers(old: int, new: int) -> list[int]:
    """For each of `new` layers, the trained layer it copies: spread evenly, each old layer at least once."""
    if new < old:
        raise ValueError(f"cannot grow {old} layers into {new}")
    return [j * old // new for j in range(new)]


def grow_layers(weights: dict[str, torch.Tensor], new: int) -> dict[str, torch.Tensor]:
    """`weights` with `new` layers: old layers in order, each added one an identity copy of its source."""
    old = layer_count(weights)
    sources = source_layers(old, new)
    grown = {key: value for key, value in weights.items() if not _LAYER.match(key)}
    for target, source in enumerate(sources):
        added = target > 0 and sources[target - 1] == source
        for key, value in weights.items():
            match = _LAYER.match(key)
            if not match or int(match.group(2)) != source:
                continue
            name = match.group(3)
            copy = value.clone()
            if added and name in _SILENT:
                copy.zero_()
            grown[f"{match.group(1)}{target}.{name}"] = copy
    return grown
