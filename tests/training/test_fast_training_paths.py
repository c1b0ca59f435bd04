"""The two speed paths of a training update: the fused output projection + label-smoothed loss
(training/loss.py) and the CPU dropout mask (models/dropout.py), checked against the textbook
formulas written here and against PyTorch's own implementations."""
from __future__ import annotations

import math

import pytest
import torch

import training.loss as loss_module
from models.dropout import Dropout, dropout
from training.loss import fused_token_loss, token_loss

PAD = 0


def _problem(seed=0, b=5, t=7, d=16, v=50):
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(b, t, d, generator=g, dtype=torch.float64, requires_grad=True)
    weight = (torch.randn(v, d, generator=g, dtype=torch.float64) * 0.3).requires_grad_()
    target = torch.randint(1, v, (b, t), generator=g)
    target[0, 4:] = PAD
    target[3, 2:] = PAD
    return states, weight, target


def _textbook(states, weight, target, eps):
    """sum over real tokens of -sum_j q_j log p_j with q = (1 - eps) onehot + eps / V."""
    logits = states @ weight.T
    logp = logits - logits.logsumexp(-1, keepdim=True)
    v = weight.size(0)
    q = torch.full_like(logp, eps / v).scatter_add_(-1, target[..., None], torch.full_like(logp[..., :1], 1 - eps))
    per_token = -(q * logp).sum(-1)
    return (per_token * target.ne(PAD)).sum()


@pytest.mark.parametrize("block_elements", [50, 3 * 50, 10 ** 6])  # one row per block, 3 rows, all rows
def test_fused_loss_and_gradients_match_the_formula(monkeypatch, block_elements):
    monkeypatch.setattr(loss_module, "BLOCK_ELEMENTS", block_elements)
    states, weight, target = _problem()
    expected = _textbook(states, weight, target, 0.1)
    g_states, g_weight = torch.autograd.grad(expected, (states, weight))
    loss, n = fused_token_loss(states, weight, target, PAD, 0.1)
    assert n == int(target.ne(PAD).sum()) == 5 * 7 - 3 - 5
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    f_states, f_weight = torch.autograd.grad(loss, (states, weight))
    assert torch.allclose(f_states, g_states, atol=1e-12)
    assert torch.allclose(f_weight, g_weight, atol=1e-12)
    assert f_states[0, 4:].abs().max() == 0 and f_states[3, 2:].abs().max() == 0  # padding: no gradient


def test_fused_loss_equals_pytorch_cross_entropy_in_float32():
    states, weight, target = _problem(seed=1, v=300)
    states32, weight32 = states.detach().float().requires_grad_(), weight.detach().float().requires_grad_()
    ref, n_ref = token_loss(states32 @ weight32.T, target, PAD, 0.1)
    fused, n = fused_token_loss(states32, weight32, target, PAD, 0.1)
    assert n == n_ref and fused.item() == pytest.approx(ref.item(), rel=1e-5)
    (ref * 2).backward()
    ref_grads = states32.grad.clone(), weight32.grad.clone()
    states32.grad = weight32.grad = None
    (fused * 2).backward()  # the incoming gradient scales the result
    assert torch.allclose(states32.grad, ref_grads[0], atol=1e-5)
    assert torch.allclose(weight32.grad, ref_grads[1], atol=1e-5)


def test_fused_loss_refuses_a_second_backward():
    states, weight, target = _problem()
    loss, _ = fused_token_loss(states, weight, target, PAD, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match=r"^LinearLabelSmoothedCrossEntropy: backward can run only once per forward$"):
        loss.backward()


@pytest.mark.filterwarnings("error")  # e.g. an out= block of the wrong size, silently resized
@pytest.mark.parametrize("needs", ["rows", "weight", "both"])
def test_fused_loss_gives_the_gradient_of_each_input_that_asks_for_it(monkeypatch, needs):
    """A frozen output projection (or frozen states) gets no gradient; the other gets the formula's.
    Computed before the reference, in blocks of 2 rows, so no buffer can hold an earlier answer."""
    monkeypatch.setattr(loss_module, "BLOCK_ELEMENTS", 2 * 50)
    states, weight, target = _problem(seed=2)
    states.requires_grad_(needs in ("rows", "both"))
    weight.requires_grad_(needs in ("weight", "both"))
    loss, _ = fused_token_loss(states, weight, target, PAD, 0.1)
    loss.backward()
    got = states.grad, weight.grad
    states.grad = weight.grad = None
    _textbook(states, weight, target, 0.1).backward()
    for mine, want in zip(got, (states.grad, weight.grad)):
        assert (mine is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(mine, want, atol=1e-12, rtol=0)


def test_a_batch_without_a_real_token_has_zero_loss_and_zero_gradient():
    states, weight, target = _problem(seed=4)
    target = torch.full_like(target, PAD)
    for loss, n in (fused_token_loss(states, weight, target, PAD, 0.1), token_loss(states @ weight.T, target, PAD, 0.1)):
        assert n == 0 and loss.item() == 0.0
        g_states, g_weight = torch.autograd.grad(loss, (states, weight))
        assert not g_states.any() and not g_weight.any()


def test_fused_loss_in_bfloat16_keeps_float32_statistics():
    """bf16 states and weight (as under mixed precision): the logits are bf16 products, but the
    softmax statistics and the sum over 600 tokens are float32, so the loss is the float64 formula
    on the same bf16 values to ~1e-4; the gradients come back in bf16, within bf16 rounding."""
    states, weight, target = _problem(seed=3, b=40, t=15, d=32, v=400)
    states16 = states.detach().to(torch.bfloat16).requires_grad_()
    weight16 = weight.detach().to(torch.bfloat16).requires_grad_()
    exact_states, exact_weight = states16.detach().double().requires_grad_(), weight16.detach().double().requires_grad_()
    expected = _textbook(exact_states, exact_weight, target, 0.1)
    expected.backward()
    loss, _ = fused_token_loss(states16, weight16, target, PAD, 0.1)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(expected.item(), rel=2e-4)
    loss.backward()
    assert states16.grad.dtype == weight16.grad.dtype == torch.bfloat16
    torch.testing.assert_close(states16.grad.double(), exact_states.grad, atol=1e-2, rtol=5e-2)
    torch.testing.assert_close(weight16.grad.double(), exact_weight.grad, atol=1e-2, rtol=5e-2)


def test_dropout_drops_with_probability_p_and_scales_the_rest():
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 0.5  # no zeros: a zero in the output is a dropped element
    for p in (0.1, 0.3, 0.5):
        out = dropout(x, p)
        dropped = out.eq(0)
        n = dropped.numel()
        assert abs(dropped.float().mean().item() - p) < 5 * math.sqrt(p * (1 - p) / n)  # 5 sigma
        kept = ~dropped
        assert torch.allclose(out[kept], x[kept] / (1 - p), rtol=1e-6)
        # neighbouring elements (four share one 64-bit draw) are dropped independently
        both = (dropped[:, :-1] & dropped[:, 1:]).float().mean().item()
        assert abs(both - p * p) < 5 * math.sqrt(p * p * (1 - p * p) / n)
        every_fourth = dropped.view(-1, 4).float().mean(0)  # each 16-bit lane of a draw
        assert (every_fourth - p).abs().max() < 5 * math.sqrt(p * (1 - p) / (n / 4))


def test_dropout_gradient_is_the_mask_and_a_seed_fixes_the_mask():
    x = torch.rand(64, 33, dtype=torch.float32).add_(0.5).requires_grad_()
    torch.manual_seed(3)
    out = dropout(x, 0.25)
    out.sum().backward()
    assert torch.equal(x.grad, out.detach().ne(0).float() / 0.75)
    torch.manual_seed(3)
    assert torch.equal(dropout(x.detach(), 0.25), out.detach())


def test_dropout_module_is_identity_in_eval_and_at_zero():
    x = torch.randn(10, 10)
    module = Dropout(0.5).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert dropout(x, 1.0).abs().max() == 0
    with pytest.raises(ValueError):
        Dropout(1.5)
