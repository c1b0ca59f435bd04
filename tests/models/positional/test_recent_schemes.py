"""The schemes of 2024-2025 (p_rope, polar, fox, dape_*, cope) against the defining properties their
papers state, beside the loop references of ``tests/reference.py`` (``test_attention.py``): the
limits of p-RoPE, PoPE's polar score, FoX with constant gates as ALiBi, DAPE without its MLP as its
base, CoPE counting keys when every gate is open."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.positional import build_positional

D, H = 32, 4
DH = D // H


def model_cfg(name: str, *extra: str):
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={D}", f"model.n_heads={H}",
                              *extra]).model


def qk(seed: int = 0, b: int = 2, tq: int = 6, tk: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, H, tq, DH, generator=g), torch.randn(b, H, tk, DH, generator=g)


def rope_pairs(x: torch.Tensor, pos: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE written out for one position: pair m turned by pos * base^(-2m/Dh)."""
    out = x.clone()
    for m in range(DH // 2):
        angle = pos * base ** (-2 * m / DH)
        a, b = x[..., 2 * m], x[..., 2 * m + 1]
        out[..., 2 * m], out[..., 2 * m + 1] = a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle)
    return out


# ---------------------------------------------------------------- p-RoPE

@pytest.mark.parametrize("p,rotated", [(0.0, 0), (0.25, 1), (0.5, 2), (0.7, 3), (0.75, 3), (1.0, 4)])
def test_p_rope_rotates_the_highest_frequencies_and_leaves_the_rest(p, rotated):
    """Dh = 8: four pairs, round(4p) of them rotated (0.7: 2.8 rounds to 3) — the first (highest frequencies) — as RoPE
    rotates them; 0-RoPE is NoPE (nothing moves), 1-RoPE is RoPE."""
    pe = build_positional(model_cfg("p_rope", f"model.positional.p_rope.p={p}"), "encoder")
    q, _ = qk(tq=1)
    for pos in (0, 1, 7, 300):
        out, _ = pe.rotate(q, q[..., :0, :], torch.tensor([pos]), torch.tensor([], dtype=torch.long))
        want = rope_pairs(q, pos)
        torch.testing.assert_close(out[..., :2 * rotated], want[..., :2 * rotated], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out[..., 2 * rotated:], q[..., 2 * rotated:], atol=0, rtol=0)


def test_p_rope_at_1_is_rope_and_at_0_is_none_inside_the_model():
    from models.transformer import Transformer

    def logits(name: str, *extra: str) -> torch.Tensor:
        cfg = load_config(None, [f"model.positional.name={name}", "model.d_model=16", "model.n_heads=2",
                                 "model.d_ff=32", "model.n_encoder_layers=1", "model.n_decoder_layers=1", *extra]).model
        torch.manual_seed(0)
        model = Transformer(cfg, 30, 30).eval()
        src, tgt = torch.randint(3, 30, (2, 9), generator=torch.Generator().manual_seed(1)), torch.randint(
            3, 30, (2, 6), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            return model(src, tgt)

    torch.testing.assert_close(logits("p_rope", "model.positional.p_rope.p=1"), logits("rope"), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits("p_rope", "model.positional.p_rope.p=0"), logits("none"), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits("p_rope", "model.positional.p_rope.p=0.5"), logits("rope"), atol=1e-3)


# ---------------------------------------------------------------- PoPE

def test_polar_score_is_magnitudes_times_the_cosine_of_the_phase_difference():
    """q' . k' = sum_c softplus(q_c) softplus(k_c) cos((t - s) theta_c + delta_c), theta_c = base^(-c/Dh);
    the phase bias is clamped to [-2 pi, 0] (a bias of -10 acts as -2 pi, one of +3 as 0)."""
    pe = build_positional(model_cfg("polar"), "decoder")
    q, k = qk(tq=1, tk=1)
    for raw, delta in ((-0.7, -0.7), (-10.0, -2 * math.pi), (3.0, 0.0)):
        with torch.no_grad():
            pe.phase_bias.fill_(raw)
        for t, s in ((5, 2), (2, 5), (40, 40), (900, 3)):
            rq, rk = pe.rotate(q, k, torch.tensor([t]), torch.tensor([s]))
            assert rq.shape[-1] == rk.shape[-1] == 2 * DH
            want = sum(torch.nn.functional.softplus(q[..., c]) * torch.nn.functional.softplus(k[..., c])
                       * math.cos((t - s) * 10000.0 ** (-c / DH) + delta) for c in range(DH))
            torch.testing.assert_close((rq * rk).sum(-1), want, atol=1e-4, rtol=1e-4)


def test_polar_content_never_moves_the_phase():
    """Content sets magnitudes only: at equal positions and a zero phase bias every term is a
    product of non-negative magnitudes, so the score cannot be negative whatever q and k are (a
    RoPE dot product can)."""
    pe = build_positional(model_cfg("polar"), "encoder")
    q, k = qk(seed=3, tq=5, tk=5)
    pos = torch.arange(5)
    rq, rk = pe.rotate(q, k, pos, pos)
    assert ((rq * rk).sum(-1) >= 0).all()
    assert ((q * k).sum(-1) < 0).any()


# ---------------------------------------------------------------- FoX

@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_fox_with_constant_gates_is_alibi(kind):
    """Gate weights 0 and sigmoid(b_h) = e^(-m_h): every token forgets m_h, so the bias is ALiBi's
    -m_h |i - j| on both sides (the encoder's backward gates too); also what it starts from at zero input."""
    pe = build_positional(model_cfg("fox"), kind)
    slopes = [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        pe.gate.weight.zero_()
    pos = torch.arange(7)
    bias = pe.state_bias(pe.token_state(x), pos, pos)
    for h in range(H):
        for i in range(7):
            for j in range(7 if kind == "encoder" else i + 1):
                torch.testing.assert_close(bias[:, h, i, j], torch.full((2,), -slopes[h] * abs(i - j)),
                                           atol=1e-5, rtol=1e-5)


def test_fox_gates_follow_the_content():
    pe = build_positional(model_cfg("fox"), "encoder")
    pos = torch.arange(6)
    a, b = pe.token_state(torch.randn(1, 6, D)), pe.token_state(torch.randn(1, 6, D))
    assert a.shape == (1, H, 6, 2) and (a <= 0).all()  # log-gates of the two directions
    decoder = build_positional(model_cfg("fox"), "decoder")  # causal: one gate set, H gate outputs
    assert decoder.gate.out_features == H and decoder.token_state(torch.randn(1, 6, D)).shape == (1, H, 6, 1)
    assert not torch.allclose(pe.state_bias(a, pos, pos), pe.state_bias(b, pos, pos), atol=1e-3)


# ---------------------------------------------------------------- DAPE

@pytest.mark.parametrize("name", ["dape_alibi", "dape_kerple", "dape_fire"])
def test_dape_without_its_mlp_is_its_base_and_the_mlp_mixes_heads(name):
    pe = build_positional(model_cfg(name), "encoder")
    assert pe.base.kind == "encoder" and type(pe.base).__name__.lower().startswith(name.split("_")[1][:4])
    q, k = qk()
    pos = torch.arange(6)
    with torch.no_grad():
        pe.mix[2].weight.zero_()
        pe.mix[2].bias.zero_()
    torch.testing.assert_close(pe.score_bias(q, k, pos, pos), pe.base.score_bias(q, k, pos, pos).expand(2, -1, -1, -1))
    with torch.no_grad():
        pe.mix[2].weight.normal_()
    before = pe.score_bias(q, k, pos, pos)
    q2 = q.clone()
    q2[:, 0] += 1.0  # head 0's content only
    after = pe.score_bias(q2, k, pos, pos)
    assert not torch.allclose(before[:, 1], after[:, 1], atol=1e-4)  # head 1 sees head 0's logits


# ---------------------------------------------------------------- CoPE

@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_cope_counts_every_key_between_when_all_gates_are_open(kind):
    """q = k = a large vector: every gate is 1, so p_ij = |i - j| + 1 (the keys from j to i, both
    included), clamped at P - 1; with every gate shut (q = -k) nothing is counted."""
    pe = build_positional(model_cfg("cope", "model.positional.cope.max_positions=5"), kind)
    ones = torch.full((1, H, 7, DH), 4.0)
    pos = torch.arange(7)
    counts = pe.positions(ones, ones, pos, pos)
    for i in range(7):
        for j in range(7 if kind == "encoder" else i + 1):
            assert counts[0, 0, i, j].item() == pytest.approx(min(abs(i - j) + 1, 4), abs=1e-4)
    assert pe.positions(ones, -ones, pos, pos)[..., :, :].max().item() < 1e-4


def test_cope_interpolates_between_neighbouring_embeddings():
    """At p = 2.25: 0.75 q.e[2] + 0.25 q.e[3] (two gates open, a quarter of a third)."""
    pe = build_positional(model_cfg("cope"), "decoder")
    with torch.no_grad():
        pe.table.normal_()
    q = torch.randn(1, H, 1, DH)
    p = torch.full((1, H, 1, 1), 2.25)
    pe.positions = lambda *_: p  # the counts as given: the interpolation alone
    bias = pe.score_bias(q, torch.randn(1, H, 1, DH), torch.tensor([0]), torch.tensor([0]))
    want = 0.75 * (q[0, :, 0] @ pe.table[2]) + 0.25 * (q[0, :, 0] @ pe.table[3])
    torch.testing.assert_close(bias[0, :, 0, 0], want.detach(), atol=1e-5, rtol=1e-5)
