"""Deepen a trained model and hardly change what it computes: new layers start nearly silent.

A new layer copies the trained layer below it with its two post-norms (after attention and after the
feed-forward block) at ADDED_GATE of that layer's, so it adds little to the residual stream and the
grown model starts near the source model's loss. At exactly zero the grown model would compute what
the source did, but AdamW opens such gates by at most the learning rate per step, and with noisy
gradients far slower: six layers grown that way stayed at a 4-layer model's loss (docs/training.md).
So an added layer's weights and its gates may learn at multiples of the run's rate (`added_lr_scale`,
`added_gate_lr_scale`): Adam's step does not shrink with the gate, so a nearly silent layer still learns.
"""

from __future__ import annotations

import re

import torch

_PREFIX = "model.encoder.language_model.layers."
_LAYER = re.compile(rf"^{re.escape(_PREFIX)}(\d+)\.(.+)$")
_GATES = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")
ADDED_GATE = 0.05  # an added layer's post-norms, as a share of its source's (docs/training.md)


def _by_layer(
    weights: dict[str, torch.Tensor],
) -> tuple[dict[int, dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    """(layer index -> its weights by name inside the layer, the weights outside the layers)."""
    layers: dict[int, dict[str, torch.Tensor]] = {}
    rest: dict[str, torch.Tensor] = {}
    for key, value in weights.items():
        if match := _LAYER.match(key):
            layers.setdefault(int(match.group(1)), {})[match.group(2)] = value
        else:
            rest[key] = value
    return layers, rest


def layer_count(weights: dict[str, torch.Tensor]) -> int:
    """Decoder layers in a state dict of our DiffusionGemma shape."""
    return len(_by_layer(weights)[0])


def source_layers(old: int, new: int) -> list[int]:
    """For each of `new` layers, the trained layer it copies: spread evenly, each old layer at least once."""
    if new < old:
        raise ValueError(f"cannot grow {old} layers into {new}")
    return [j * old // new for j in range(new)]


def added_layers(old: int, new: int) -> tuple[int, ...]:
    """Indices of the layers growth adds (copies of the layer before them), as `grow_layers` places them."""
    sources = source_layers(old, new)
    return tuple(j for j in range(1, new) if sources[j - 1] == sources[j])


def added_part(name: str, added: tuple[int, ...]) -> str:
    """What a parameter is to growth: "gate" (an added layer's post-norm), "layer" (the rest of an added
    layer) or "" (a trained layer's or outside the layers); each part trains at its own rate."""
    match = _LAYER.match(name)
    if not match or int(match.group(1)) not in added:
        return ""
    return "gate" if match.group(2) in _GATES else "layer"


def grow_layers(
    weights: dict[str, torch.Tensor], new: int, gate: float = ADDED_GATE
) -> dict[str, torch.Tensor]:
    """`weights` with `new` layers: old layers in order, each added one a copy of its source with its
    post-norms scaled by `gate` (0: an exact identity)."""
    layers, grown = _by_layer(weights)
    added = added_layers(len(layers), new)
    for target, source in enumerate(source_layers(len(layers), new)):
        for name, value in layers[source].items():
            copy = value.clone()
            if target in added and name in _GATES:
                copy.mul_(gate)
            grown[f"{_PREFIX}{target}.{name}"] = copy
    return grown
