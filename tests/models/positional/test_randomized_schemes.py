"""SHAPE, CAPE, KERPLE and randomized positions: the formulas, the training-time distributions
(checked statistically over many draws, against bounds written here) and evaluation = the base."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.positional import build_positional
from models.transformer import Transformer
from utils.errors import ConfigError

PAD = 0


def model_cfg(name: str, *extra: str, d_model: int = 32, n_heads: int = 4):
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={d_model}",
                              f"model.n_heads={n_heads}", *extra]).model


def tiny(name: str, *extra: str, seed: int = 0) -> Transformer:
    cfg = load_config(None, [f"model.positional.name={name}", "model.d_model=32", "model.n_heads=4",
                             "model.d_ff=64", "model.n_encoder_layers=2", "model.n_decoder_layers=2",
                             "model.dropout=0.0", *extra]).model
    torch.manual_seed(seed)
    return Transformer(cfg, 40, 40, pad_id=PAD, joint_vocab=True)


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 40, (3, 7), generator=g), torch.randint(4, 40, (3, 6), generator=g)


def sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al.'s features written out here: [sin(p w_0), cos(p w_0), sin(p w_1), ...],
    w_i = 10000^(-2i/dim), for float positions of any shape -> (..., dim)."""
    w = torch.tensor([10000.0 ** (-2 * i / dim) for i in range(dim // 2)], dtype=torch.float64)
    angles = positions.to(torch.float64)[..., None] * w
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2).float()


def recover_positions(features: torch.Tensor) -> torch.Tensor:
    """Invert ``sinusoid`` with its slowest pair (unambiguous for |p| < pi / w_last)."""
    dim = features.size(-1)
    w_last = 10000.0 ** (-(dim - 2) / dim)
    return torch.atan2(features[..., -2].double(), features[..., -1].double()) / w_last


def dkw_uniform_ok(samples: torch.Tensor, low: float, high: float, alpha: float = 1e-6) -> bool:
    """Dvoretzky–Kiefer–Wolfowitz: the empirical CDF of n draws from U[low, high] stays within
    sqrt(ln(2/alpha) / 2n) of the uniform CDF, except with probability alpha."""
    x = ((samples.flatten().double() - low) / (high - low)).sort().values
    n = x.numel()
    upper = torch.arange(1, n + 1, dtype=torch.float64) / n
    gap = torch.maximum((upper - x).abs(), (x - (upper - 1 / n)).abs()).max().item()
    return gap <= math.sqrt(math.log(2 / alpha) / (2 * n))


# --- evaluation: deterministic and exactly the base ----------------------------------------


@pytest.mark.parametrize("name, base, extra", [
    ("shape", "sinusoidal", ()),
    ("cape", "sinusoidal", ()),
    ("randomized", "sinusoidal", ()),
    ("randomized", "rope", ("model.positional.randomized.base=rope",)),
    ("randomized", "alibi", ("model.positional.randomized.base=alibi",)),
])
def test_at_evaluation_the_scheme_is_its_base(name, base, extra):
    model, reference = tiny(name, *extra).eval(), tiny(base).eval()
    reference.load_state_dict(model.state_dict())
    src, tgt = batch()
    with torch.no_grad():
        first, second, want = model(src, tgt), model(src, tgt), reference(src, tgt)
    assert torch.equal(first, second)
    assert torch.allclose(first, want, atol=1e-6)
    # and in training mode it is not (the positions move)
    model.train()
    with torch.no_grad():
        assert not torch.allclose(model(src, tgt), want, atol=1e-3)


# --- SHAPE ---------------------------------------------------------------------------------


def test_shape_offsets_are_uniform_per_sequence_and_independent_between_stacks():
    k_max = 9
    cfg = model_cfg("shape", f"model.positional.shape.max_shift={k_max}")
    encoder, decoder = build_positional(cfg, "encoder").train(), build_positional(cfg, "decoder").train()
    torch.manual_seed(3)
    t, n = 5, 4000
    pos, zeros = torch.arange(t), torch.zeros(n, t, 32)

    def offsets(pe):
        added = pe.embed(zeros, pos)  # (n, t, 32): PE(pos + k) per row
        k = recover_positions(added)[:, 0].round().long()
        # every row is one shift of the whole sequence, PE(t + k)
        assert torch.allclose(added, sinusoid(pos[None, :] + k[:, None], 32), atol=1e-5)
        return k

    k_enc, k_dec = offsets(encoder), offsets(decoder)
    counts = torch.bincount(k_enc, minlength=k_max + 1).double()
    assert counts.numel() == k_max + 1 and k_enc.min() == 0  # support exactly 0..K
    expected = n / (k_max + 1)
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 37.7  # chi-square, 9 degrees of freedom, p = 1e-5
    correlation = torch.corrcoef(torch.stack([k_enc.double(), k_dec.double()]))[0, 1].item()
    assert abs(correlation) < 5 / math.sqrt(n)  # independent draws (5 standard errors)
    assert not torch.equal(k_enc, k_dec)


def test_shape_eval_shift_reproduces_the_authors_decoding_offset():
    pe = build_positional(model_cfg("shape", "model.positional.shape.eval_shift=7"), "encoder").eval()
    out = pe.embed(torch.zeros(1, 4, 32), torch.arange(4))
    assert torch.allclose(out[0], sinusoid(torch.arange(7, 11), 32), atol=1e-6)


# --- CAPE ----------------------------------------------------------------------------------


def cape_positions(*extra: str, n: int = 3000, t: int = 6) -> torch.Tensor:
    pe = build_positional(model_cfg("cape", *extra, d_model=64), "encoder").train()
    torch.manual_seed(5)
    return recover_positions(pe.embed(torch.zeros(n, t, 64), torch.arange(t)))  # (n, t)


def test_cape_global_shift_is_one_uniform_draw_per_sequence():
    p = cape_positions("model.positional.cape.max_local_shift=0", "model.positional.cape.max_global_scaling=1")
    delta = p - torch.arange(6)
    assert torch.allclose(delta, delta[:, :1].expand_as(delta), atol=1e-3)  # one shift per row
    assert delta.abs().max() <= 5 + 1e-3
    assert dkw_uniform_ok(delta[:, 0], -5.0, 5.0)


def test_cape_local_shift_is_uniform_per_position_within_half_a_step():
    p = cape_positions("model.positional.cape.max_global_shift=0", "model.positional.cape.max_global_scaling=1")
    eps = p - torch.arange(6)
    assert eps.abs().max() <= 0.5 + 1e-3
    assert dkw_uniform_ok(eps, -0.5, 0.5)
    assert (p[:, 1:] > p[:, :-1]).all()  # E = 1 keeps the order
    assert abs(torch.corrcoef(eps[:, :2].T)[0, 1].item()) < 5 / math.sqrt(eps.size(0))


def test_cape_global_scaling_is_log_uniform_per_sequence():
    s = 1.5  # a wide range, so that the check has power
    p = cape_positions("model.positional.cape.max_global_shift=0", "model.positional.cape.max_local_shift=0",
                       f"model.positional.cape.max_global_scaling={s}")
    ratio = p[:, 1:] / torch.arange(1, 6)
    assert torch.allclose(ratio, ratio[:, :1].expand_as(ratio), atol=1e-3)  # one factor per row
    assert dkw_uniform_ok(ratio[:, 0].log(), -math.log(s), math.log(s))


# --- KERPLE --------------------------------------------------------------------------------


def test_kerple_bias_is_the_log_kernel_per_head():
    pe = build_positional(model_cfg("kerple"), "encoder")
    with torch.no_grad():
        pe.r1.copy_(torch.tensor([0.5, 1.0, 2.0, -3.0]))  # the last below zero: clamped to 0.01
        pe.r2.copy_(torch.tensor([1.0, 0.1, 0.02, 0.5]))
    q_pos, k_pos = torch.arange(3, 8), torch.arange(0, 9)
    bias = pe.score_bias(None, None, q_pos, k_pos)[0]
    r1, r2 = [0.5, 1.0, 2.0, 0.01], [1.0, 0.1, 0.02, 0.5]
    for h in range(4):
        for i, qi in enumerate(q_pos.tolist()):
            for j, kj in enumerate(k_pos.tolist()):
                want = -r1[h] * math.log(1 + r2[h] * abs(kj - qi))
                assert bias[h, i, j].item() == pytest.approx(want, abs=1e-6)


def test_kerple_bias_depends_on_the_offset_only():
    pe = build_positional(model_cfg("kerple"), "decoder")
    base = pe.score_bias(None, None, torch.arange(6), torch.arange(6))
    for shift in (1, 50, 1000):
        assert torch.allclose(pe.score_bias(None, None, torch.arange(6) + shift, torch.arange(6) + shift), base)


# --- randomized ----------------------------------------------------------------------------


def test_randomized_positions_are_a_uniform_sorted_subset():
    length, t, n = 20, 5, 6000
    pe = build_positional(model_cfg("randomized", f"model.positional.randomized.max_length={length}"), "encoder")
    torch.manual_seed(7)
    draws = torch.stack([pe.training_positions(torch.arange(t)) for _ in range(n)])  # (n, t)
    assert (draws[:, 1:] > draws[:, :-1]).all() and draws.min() >= 0 and draws.max() < length
    # each position is in the subset with probability t / L
    counts = torch.bincount(draws.flatten(), minlength=length).double()
    expected = n * t / length
    assert ((counts - expected) ** 2 / expected).sum().item() < 45.3  # chi-square, 19 dof, p = 1e-4
    # the smallest of t out of L: P(min >= m) = C(L - m, t) / C(L, t)
    for m in (1, 3, 8):
        want = math.comb(length - m, t) / math.comb(length, t)
        got = (draws[:, 0] >= m).double().mean().item()
        assert abs(got - want) < 5 * math.sqrt(want * (1 - want) / n)
    # a batch longer than L: no randomisation
    assert torch.equal(pe.training_positions(torch.arange(length + 3)), torch.arange(length + 3))


def test_randomized_draws_once_per_pass_for_every_layer_and_each_stack_apart():
    model = tiny("randomized", "model.positional.randomized.base=rope",
                 "model.positional.randomized.max_length=200").train()
    seen = {"encoder": [], "decoder": []}
    for kind in seen:
        base = getattr(model, f"{kind}_pe").base
        real = base.rotate

        def record(q, k, q_pos, k_pos, kind=kind, real=real):
            seen[kind].append((q_pos.clone(), k_pos.clone()))
            return real(q, k, q_pos, k_pos)

        base.rotate = record
    src, tgt = batch()
    model(src, tgt)
    enc, dec = seen["encoder"], seen["decoder"]
    assert len(enc) == 2 and len(dec) == 2  # one call per layer
    assert all(torch.equal(q, enc[0][0]) and torch.equal(k, enc[0][0]) for q, k in enc)
    assert all(torch.equal(q, dec[0][0]) and torch.equal(k, dec[0][0]) for q, k in dec)
    assert not torch.equal(enc[0][0], torch.arange(7)) and enc[0][0].max() < 200
    assert not torch.equal(enc[0][0][:6], dec[0][0])
    model(src, tgt)  # the next pass draws again
    assert not torch.equal(seen["encoder"][2][0], enc[0][0])


@pytest.mark.parametrize("extra, key", [
    (("model.positional.randomized.base=none",), "model.positional.randomized.base"),
    (("model.positional.randomized.base=shape",), "model.positional.randomized.base"),
    (("model.positional.randomized.base=nope",), "model.positional.randomized.base"),
    (("model.positional.randomized.base=xl",), "model.positional.randomized.base"),  # needs contiguity
    (("model.positional.cross_attention=true",), "model.positional.cross_attention"),
    (("model.positional.randomized.base=learnable", "model.positional.max_positions=64"),
     "model.positional.max_positions"),
    (("model.positional.randomized.base=rope", "model.d_model=36", "model.n_heads=4"), "model.d_model"),
])
def test_randomized_refuses_bases_it_cannot_randomise(extra, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, ["model.positional.name=randomized", *extra])
