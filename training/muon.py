"""Muon for hidden matrices, AdamW for the rest, in one optimizer (one state to save and resume)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def orthogonalize(update: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """Approximately U V^T of the SVD of each trailing matrix of `update` (quintic Newton-Schulz)."""
    a, b, c = _NS_COEFFICIENTS
    x = update.to(torch.bfloat16)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.mT if tall else x).to(update.dtype)


class MuonAdamW(torch.optim.Optimizer):
    """Groups with `muon=True` take Muon steps; the others take AdamW steps.

    Muon (Jordan et al., 2024; Moonlight, arXiv 2502.16982) orthogonalizes each matrix's Nesterov
    momentum by a Newton-Schulz iteration. A stack of matrices (the MoE experts, [E, out, in]) is
    orthogonalized matrix by matrix. Updates are scaled by 0.2 * sqrt(max(out, in)) so that their RMS
    matches AdamW's and one learning rate serves both kinds of group (Moonlight's rule).
    """

    def __init__(
        self,
        groups: Iterable[dict],
        lr: float,
        momentum: float = 0.95,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        ns_steps: int = 5,
    ) -> None:
        defaults = dict(lr=lr, momentum=momentum, betas=betas, eps=eps, weight_decay=0.0, muon=False)
        super().__init__(list(groups), defaults)
        self.ns_steps = ns_steps

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                if group["muon"]:
                    self._muon(p, group)
                else:
                    self._adamw(p, group)

    def _muon(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["momentum_buffer"] = torch.zeros_like(p)
        state["step"] += 1
        buffer = state["momentum_buffer"]
        buffer.lerp_(p.grad, 1 - group["momentum"])
        nesterov = p.grad.lerp(buffer, group["momentum"])
        scale = 0.2 * math.sqrt(max(p.size(-2), p.size(-1)))
        p.add_(orthogonalize(nesterov, self.ns_steps), alpha=-group["lr"] * scale)

    def _adamw(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        beta1, beta2 = group["betas"]
        state["exp_avg"].lerp_(p.grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        step = float(state["step"])
        denominator = (state["exp_avg_sq"] / (1 - beta2**step)).sqrt_().add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denominator, value=-group["lr"] / (1 - beta1**step))


def is_hidden_matrix(name: str, p: torch.Tensor) -> bool:
    """Matrices of the layers (experts too) and of self-conditioning; not the embedding, router or vision."""
    return p.dim() >= 2 and not any(part in name for part in ("embed", "router", "vision"))
