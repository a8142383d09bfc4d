"""A middle that must begin with text taken off the end of the prompt (`InfillRequest.lead`).

Which tokens may open it (a bias over the vocabulary for the first position), and its text without it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.sampler import SUPPRESS


def lead_bias(
    vocab: int, decode: Callable[[list[int]], str], lead: str, device: torch.device
) -> torch.Tensor:
    """[V]: 0 for the tokens whose text begins with `lead`, a large negative number for the others."""
    allowed = [token for token in range(vocab) if decode([token]).startswith(lead)]
    if not allowed:
        raise ValueError(f"no token begins with the lead {lead!r}")
    bias = torch.full((vocab,), SUPPRESS, device=device)
    bias[allowed] = 0.0
    return bias


def without_lead(text: str, lead: str) -> str:
    """The candidate as the editor inserts it: the lead is already in the document."""
    return text[len(lead) :] if lead and text.startswith(lead) else text


def offsets_without_lead(offsets: tuple[int, ...], lead: str) -> tuple[int, ...]:
    """Token offsets into the text without the lead (the lead's own token starts the text)."""
    return tuple(max(0, offset - len(lead)) for offset in offsets)
