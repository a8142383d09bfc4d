"""The next-token loss through the tied head, soft-capping and cross-entropy, a block of rows at a time.

Written out, the loss makes a dozen passes over fp32 logits of every encoder position ([N, V]: hundreds
of MB per batch, far larger than the CPU's caches): the head's output, its fp32 copy, the cap's divide,
tanh and multiply, log-softmax, the loss's gather, and as many again backwards, padding positions
included. Here each block of labelled rows is computed, used and dropped while it is still in cache,
its gradients too: they are computed in the forward pass for a loss gradient of one, and the backward
pass scales them, so no logits are kept or computed twice. The arithmetic is the written-out one:
logits rounded to the compute dtype as autocast's linear leaves them, cap * tanh(logits / cap), the
mean of logsumexp minus the label's logit over labelled rows, gradients rounded to the compute dtype
before the head's two matmuls as autocast's backward rounds them.
Shapes: N = rows (labelled positions), H = hidden, V = vocabulary.
"""

from __future__ import annotations

import torch

IGNORE = -100  # a position without a label, as in F.cross_entropy
BLOCK_ROWS = 256  # rows per block: [256, V] fp32 logits are 8 MB at V = 8,192


def softcapped_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """Mean cross-entropy of softcap(hidden @ weight.T) against `labels` ([..., H], [V, H], [...]),
    over the positions whose label is not -100; the head in autocast's dtype where autocast is on (as
    its linear would run), else in `hidden`'s."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    keep = labels.reshape(-1) != IGNORE
    rows = hidden.reshape(-1, hidden.shape[-1])[keep].to(dtype)
    with torch.autocast(device, enabled=False):
        return _SoftcappedCrossEntropy.apply(rows, weight, labels.reshape(-1)[keep], cap or 0.0)


def _block_logits(
    rows: torch.Tensor, weight: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(capped fp32 logits, tanh of logits / cap or None without a cap) of one block of rows."""
    logits = (rows @ weight.t()).float()  # rounded to the compute dtype first, as autocast's linear
    if not cap:
        return logits, None
    squashed = logits.div_(cap).tanh_()
    return squashed * cap, squashed


class _SoftcappedCrossEntropy(torch.autograd.Function):
    """The loss, and while each block's logits are at hand, its gradients for a loss gradient of one
    (the backward pass only scales them): no logits are kept or computed twice."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, cap: float):
        compute = weight.to(rows.dtype)  # autocast's cast of the master weight, once per call
        count = max(rows.shape[0], 1)
        wants_grads = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        total = torch.zeros((), dtype=torch.float32, device=rows.device)
        grad_rows = torch.empty_like(rows) if wants_grads else None
        grad_weight = (
            torch.zeros(compute.shape, dtype=torch.float32, device=rows.device) if wants_grads else None
        )
        for start in range(0, rows.shape[0], BLOCK_ROWS):
            block = slice(start, start + BLOCK_ROWS)
            capped, squashed = _block_logits(rows[block], compute, cap)
            label_logits = capped.gather(1, labels[block, None]).squeeze(1)
            log_norms = capped.logsumexp(dim=-1)
            total += (log_norms - label_logits).sum()
            if grad_rows is None or grad_weight is None:
                continue
            # d loss / d capped = (softmax - one-hot) / count; through the cap, times 1 - tanh^2
            grad = capped.sub_(log_norms[:, None]).exp_()
            grad[torch.arange(grad.shape[0], device=grad.device), labels[block]] -= 1.0
            if squashed is not None:
                grad.mul_(1.0 - squashed.square_())
            grad = grad.div_(count).to(rows.dtype)  # rounded as autocast's backward rounds it
            grad_rows[block] = grad @ compute
            grad_weight += (grad.t() @ rows[block]).float()
        ctx.save_for_backward(grad_rows, None if grad_weight is None else grad_weight.to(weight.dtype))
        return total / count

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_rows, grad_weight = ctx.saved_tensors
        return grad_rows * grad_loss.to(grad_rows.dtype), grad_weight * grad_loss, None, None
