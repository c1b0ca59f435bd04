"""The encodings of 2025-26 against their papers' equations on hand-worked cases, beside the loop
references of ``tests/reference.py`` (``test_attention.py`` runs every attention case on them).

Learned-frequency RoPE (``rope.learn_frequencies``): in one dimension LieRE's rotation exp(m A) of a
learned skew-symmetric A (Ostmeier et al. 2025), ComRoPE's commuting generators, RoPE-Mixed's
learned frequencies and GRAPE-M's commuting form all score as RoPE with learned frequencies once the
orthogonal basis of A's blocks is folded into the query and key projections."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.positional import build_positional
from utils.errors import ConfigError, UserError

D, H = 32, 4
DH = D // H


def model_cfg(name: str, *extra: str):
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={D}", f"model.n_heads={H}",
                              *extra]).model


LEARNED = "model.positional.rope.learn_frequencies=true"


def test_learned_frequencies_start_as_rope_and_learn_a_speed_per_head_and_pair():
    plain = build_positional(model_cfg("rope"), "encoder")
    learned = build_positional(model_cfg("rope", LEARNED), "encoder")
    # the parameters are log theta_i = -(2i/Dh) log 10000, alike in every head
    want = [[-(2 * i / DH) * math.log(10000.0) for i in range(DH // 2)]] * H
    torch.testing.assert_close(learned.log_frequencies.detach().double(), torch.tensor(want, dtype=torch.float64),
                               atol=1e-6, rtol=0)
    q, k = torch.randn(2, H, 5, DH), torch.randn(2, H, 7, DH)
    for a, b in zip(learned.rotate(q, k, torch.arange(5), torch.arange(7)), plain.rotate(q, k, torch.arange(5), torch.arange(7))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    # a score's gradient reaches every head's and pair's speed (pair 0 of head 0 at least, and the last)
    rq, rk = learned.rotate(q, k, torch.arange(5), torch.arange(7))
    (rq @ rk.transpose(-1, -2)).pow(2).sum().backward()
    grad = learned.log_frequencies.grad
    assert grad.shape == (H, DH // 2) and bool((grad != 0).all())
    assert not any(True for _ in plain.parameters())  # plain RoPE learns nothing


def _skew(blocks: list[float]) -> torch.Tensor:
    """Block-diagonal skew-symmetric B (Dh x Dh): block m is [[0, -w_m], [w_m, 0]]."""
    b = torch.zeros(DH, DH, dtype=torch.float64)
    for m, w in enumerate(blocks):
        b[2 * m + 1, 2 * m], b[2 * m, 2 * m + 1] = w, -w
    return b


def test_a_dense_lie_generator_scores_as_learned_frequencies_in_its_own_basis():
    """LieRE in one dimension: q_m^T exp(m A)^T exp(n A) k_n with a dense skew-symmetric A = P B P^T
    (P orthogonal, B the blocks of speeds w) equals learned-frequency RoPE with speeds w applied to
    P^T q and P^T k — the rotation of A's basis is a change of the head's query/key projection."""
    torch.manual_seed(3)
    speeds = [[0.9, 0.31, 0.05, 0.007], [1.7, 0.4, 0.11, 0.002], [0.2, 0.2, 0.03, 0.0009], [2.5, 0.6, 0.08, 0.01]]
    pe = build_positional(model_cfg("rope", LEARNED), "decoder")
    with torch.no_grad():
        pe.log_frequencies.copy_(torch.tensor(speeds).log())
    q, k = torch.randn(1, H, 4, DH, dtype=torch.float64), torch.randn(1, H, 6, DH, dtype=torch.float64)
    q_pos, k_pos = [3, 4, 5, 6], [0, 1, 2, 3, 4, 5]
    lie = torch.empty(1, H, 4, 6, dtype=torch.float64)
    bases = []
    for h in range(H):
        p, _ = torch.linalg.qr(torch.randn(DH, DH, dtype=torch.float64))  # a random orthogonal basis
        bases.append(p)
        a = p @ _skew(speeds[h]) @ p.T  # dense, skew-symmetric
        assert torch.allclose(a, -a.T)
        for i, m in enumerate(q_pos):
            for j, n in enumerate(k_pos):
                lie[0, h, i, j] = (torch.linalg.matrix_exp(m * a) @ q[0, h, i]) @ (torch.linalg.matrix_exp(n * a) @ k[0, h, j])
    in_basis = torch.stack([b.T for b in bases])[None, :, None]  # (1, H, 1, Dh, Dh): x -> P^T x
    q_b, k_b = (in_basis @ q[..., None])[..., 0], (in_basis @ k[..., None])[..., 0]
    rq, rk = pe.rotate(q_b.float(), k_b.float(), torch.tensor(q_pos), torch.tensor(k_pos))
    torch.testing.assert_close((rq @ rk.transpose(-1, -2)).double(), lie, atol=1e-5, rtol=1e-5)


def test_learned_frequencies_refuse_test_time_frequency_scaling_and_the_export():
    with pytest.raises(ConfigError, match=r"length_scaling.rotary.*none with model.positional.rope.learn_frequencies"):
        load_config(None, ["model.positional.name=rope", LEARNED, "model.length_scaling.rotary=pi",
                           "model.length_scaling.train_source_tokens=20", "model.length_scaling.train_target_tokens=20"])
    from search.ctranslate2 import check_exportable

    with pytest.raises(UserError, match=r"^rope with learned frequencies .* cannot be exported") as err:
        check_exportable(load_config(None, ["model.positional.name=rope", LEARNED]).model)
    assert "\n" not in str(err.value)
    check_exportable(load_config(None, ["model.positional.name=rope"]).model)  # plain RoPE still exports
