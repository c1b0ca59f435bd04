"""The attention kernels (models.attention_kernels) against softmax attention written out here: each
backend, given one call's inputs, returns what the formula says — whichever path it takes inside."""
from __future__ import annotations

import math

import pytest
import torch

from models.attention_kernels import KERNELS, Attending, ExplicitKernel, attention_kernel
from models.positional.base import PositionalEncoding

B, H, TQ, TK, DH = 2, 3, 4, 5, 8


class PositionBias(PositionalEncoding):
    """A bias of positions alone, -0.3 |i - j| per head slope (h + 1): FlexAttention's kind."""

    bias_from_positions = True

    def score_bias(self, q, k, q_pos, k_pos):
        slopes = torch.arange(1, self.n_heads + 1, dtype=torch.float32)[:, None, None]
        return (-0.3 * slopes * (q_pos[:, None] - k_pos[None, :]).abs())[None]  # (1, H, Tq, Tk)


class ValueTerm(PositionalEncoding):
    """A value term: each query adds twice its probabilities' mean key position to every channel."""

    has_value_term = True

    def value_term(self, probs, q_pos, k_pos):
        return 2.0 * (probs * k_pos.float()).sum(-1, keepdim=True).expand(*probs.shape[:-1], DH)


def inputs(pe: PositionalEncoding, causal: bool = False, padded: bool = True, factor=None) -> Attending:
    torch.manual_seed(0)
    q, k, v = torch.randn(B, H, TQ, DH), torch.randn(B, H, TK, DH), torch.randn(B, H, TK, DH)
    pad = torch.tensor([[False] * TK, [False] * 3 + [True] * 2]) if padded else None
    q_pos, k_pos = torch.arange(1, TQ + 1), torch.arange(TK)
    return Attending(q, k, v, None, pe, q_pos, k_pos, pad, causal, cached=False, scale=1 / math.sqrt(DH),
                     factor=factor, p=0.0)


def formula(a: Attending) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(factor · (q kᵀ / sqrt(Dh) + bias) + holes) v (+ the value term), in float64."""
    logits = (a.q.double() @ a.k.double().transpose(-1, -2)) / math.sqrt(DH)
    bias = a.pe.score_bias(a.q, a.k, a.q_pos, a.k_pos)
    if bias is not None:
        logits = logits + bias.double()
    if a.factor is not None:
        logits = logits * a.factor.double()
    hidden = torch.zeros(B, 1, len(a.q_pos), len(a.k_pos), dtype=torch.bool)
    if a.causal:
        hidden |= (a.k_pos[None, :] > a.q_pos[:, None])[None, None]
    if a.key_padding_mask is not None:
        hidden |= a.key_padding_mask[:, None, None, :]
    probs = torch.softmax(logits.masked_fill(hidden, -math.inf), -1)
    out = probs @ a.v.double()
    if a.pe.has_value_term:
        out = out + a.pe.value_term(probs, a.q_pos, a.k_pos)
    return out, probs


SCHEMES = {"none": PositionalEncoding, "bias": PositionBias, "value": ValueTerm}


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("causal", [False, True])
def test_every_kernel_computes_softmax_attention(kernel, scheme, causal):
    a = inputs(SCHEMES[scheme]("encoder", H * DH, H), causal=causal)
    want, probs = formula(a)
    with torch.no_grad():
        out, weights = attention_kernel(kernel)(a, need_weights=False)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    assert weights is None  # the weights only when asked for
    out, weights = attention_kernel(kernel)(a, need_weights=True)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.double(), probs, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_a_logit_scaling_multiplies_content_and_bias_alike(kernel):
    factor = torch.tensor([1.5, 0.5])[:, None, None, None]  # (B, 1, 1, 1): each row its own
    a = inputs(PositionBias("encoder", H * DH, H), factor=factor)
    with torch.no_grad():
        out, _ = attention_kernel(kernel)(a, need_weights=False)
    torch.testing.assert_close(out.double(), formula(a)[0], atol=1e-5, rtol=1e-5)


def test_flex_serves_a_position_bias_and_leaves_the_rest_to_sdpa(monkeypatch):
    import models.attention_kernels as kernels

    flex, fused = [], []
    real_flex, real_sdpa = kernels.flex_attention, kernels.F.scaled_dot_product_attention
    monkeypatch.setattr(kernels, "flex_attention", lambda *a, **kw: flex.append(1) or real_flex(*a, **kw))
    monkeypatch.setattr(kernels.F, "scaled_dot_product_attention",
                        lambda *a, **kw: fused.append(1) or real_sdpa(*a, **kw))
    with torch.no_grad():
        attention_kernel("flex")(inputs(PositionBias("encoder", H * DH, H)), need_weights=False)
        assert (len(flex), len(fused)) == (1, 0)
        attention_kernel("flex")(inputs(PositionalEncoding("encoder", H * DH, H)), need_weights=False)
        assert (len(flex), len(fused)) == (1, 1)  # no score_mod: the fused kernel
        attention_kernel("sdpa")(inputs(PositionBias("encoder", H * DH, H)), need_weights=False)
        assert (len(flex), len(fused)) == (1, 2)  # sdpa never reaches FlexAttention
        attention_kernel("flex")(inputs(ValueTerm("encoder", H * DH, H)), need_weights=False)
        assert (len(flex), len(fused)) == (1, 2)  # a value term needs the probabilities: explicit


def test_sdpa_builds_the_causal_mask_itself_only_when_it_is_the_whole_mask(monkeypatch):
    import models.attention_kernels as kernels

    seen = []
    real = kernels.F.scaled_dot_product_attention
    monkeypatch.setattr(kernels.F, "scaled_dot_product_attention",
                        lambda *a, **kw: seen.append((kw["is_causal"], kw["attn_mask"] is None)) or real(*a, **kw))
    square = inputs(PositionalEncoding("decoder", H * DH, H), causal=True, padded=False)
    square = Attending(**{**square.__dict__, "k": square.k[:, :, :TQ], "v": square.v[:, :, :TQ],
                          "k_pos": square.q_pos})
    with torch.no_grad():
        want = formula(square)[0]
        torch.testing.assert_close(attention_kernel("sdpa")(square, False)[0].double(), want, atol=1e-5, rtol=1e-5)
        biased = Attending(**{**square.__dict__, "pe": PositionBias("decoder", H * DH, H)})
        torch.testing.assert_close(attention_kernel("sdpa")(biased, False)[0].double(), formula(biased)[0],
                                   atol=1e-5, rtol=1e-5)
    assert seen == [(True, True), (False, False)]  # a bias: the mask carries it and the causal holes


def test_an_unknown_kernel_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown attention kernel 'cuda'; one of sdpa, flex"):
        attention_kernel("cuda")
    assert ExplicitKernel.name == "explicit" and {k().name for k in KERNELS.values()} == set(KERNELS)
