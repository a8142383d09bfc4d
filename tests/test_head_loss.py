"""The blocked next-token loss equals the written-out head, soft-cap and cross-entropy, gradients too."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.forward import softcap
from training.head_loss import BLOCK_ROWS, softcapped_cross_entropy


def inputs(seed: int = 0, batch: int = 3, length: int = 250, hidden: int = 32, vocab: int = 500):
    """More labelled rows than one block, a quarter of the positions unlabelled (padding, prompt)."""
    gen = torch.Generator().manual_seed(seed)
    states = torch.randn(batch, length, hidden, generator=gen).requires_grad_()
    weight = (torch.randn(vocab, hidden, generator=gen) * 0.3).requires_grad_()
    labels = torch.randint(0, vocab, (batch, length), generator=gen)
    labels[torch.rand(batch, length, generator=gen) < 0.25] = -100
    assert int((labels != -100).sum()) > BLOCK_ROWS
    return states, weight, labels


def written_out(states, weight, labels, cap):
    return F.cross_entropy(softcap(F.linear(states, weight).float(), cap).flatten(0, 1), labels.flatten())


def loss_and_grads(loss_of, states, weight, labels, cap, autocast=False, scale=1.0):
    states.grad = weight.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = loss_of(states, weight, labels, cap)
    (loss * scale).backward()
    return loss.detach(), states.grad.clone(), weight.grad.clone()


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("cap", [30.0, None])
def test_fp32_loss_and_gradients_are_the_written_out_ones(cap):
    states, weight, labels = inputs()
    ours = loss_and_grads(softcapped_cross_entropy, states, weight, labels, cap)
    reference = loss_and_grads(written_out, states, weight, labels, cap)
    assert ours[0].item() == pytest.approx(reference[0].item(), rel=1e-6)
    assert relative(ours[1], reference[1]) < 1e-5
    assert relative(ours[2], reference[2]) < 1e-5


def test_under_autocast_the_head_runs_in_bf16_as_autocast_would_run_it():
    states, weight, labels = inputs(seed=1)
    ours = loss_and_grads(softcapped_cross_entropy, states, weight, labels, 30.0, autocast=True)
    reference = loss_and_grads(written_out, states, weight, labels, 30.0, autocast=True)
    exact = loss_and_grads(written_out, states, weight, labels, 30.0)
    assert ours[1].dtype == torch.float32 and ours[2].dtype == torch.float32  # master dtype, as autocast
    assert ours[0].item() == pytest.approx(reference[0].item(), rel=1e-5)
    assert relative(ours[1], reference[1]) < 1e-3
    # autocast rounds the whole weight gradient to bf16 once; the blocks add theirs up in fp32
    assert relative(ours[2], exact[2]) <= relative(reference[2], exact[2]) * 1.1


def test_the_backward_pass_scales_the_gradients_by_the_loss_gradient():
    states, weight, labels = inputs(seed=2)
    _, states_grad, weight_grad = loss_and_grads(softcapped_cross_entropy, states, weight, labels, 30.0)
    _, halved_states, halved_weight = loss_and_grads(
        softcapped_cross_entropy, states, weight, labels, 30.0, scale=0.5
    )
    assert torch.allclose(halved_states, states_grad * 0.5) and torch.allclose(
        halved_weight, weight_grad * 0.5
    )


def test_without_gradients_the_loss_is_the_same_and_nothing_unlabelled_counts():
    states, weight, labels = inputs(seed=3)
    with torch.no_grad():
        loss = softcapped_cross_entropy(states, weight, labels, 30.0)
        moved = states.clone()
        moved[labels == -100] += 100.0  # unlabelled positions may hold anything
        assert softcapped_cross_entropy(moved, weight, labels, 30.0).item() == loss.item()
    assert loss.item() == pytest.approx(written_out(states, weight, labels, 30.0).item(), rel=1e-6)
