"""Positional encodings against independent references written here, and their defining properties."""
from __future__ import annotations

import cmath
import itertools
import math

import pytest
import torch

from experiment.config import load_config
from models.positional import SCHEMES, build_positional
from models.positional.alibi import alibi_slopes
from models.positional.rotary import apply_rotary, rotary_angles, rotate_pairs, rotate_pairs_real
from models.positional.sinusoidal import sinusoidal_table
from models.positional.t5 import relative_position_bucket
from tests.reference import mlp, t5_bucket
from utils.errors import UserError

RELATIVE = ["alibi", "t5", "shaw", "xl", "deberta", "nezha", "fire", "rope", "xpos", "p_rope", "polar",
            "dape_alibi", "dape_kerple", "dape_fire", "cope"]


def model_cfg(name: str, *extra: str, d_model: int = 32, n_heads: int = 4):
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={d_model}",
                              f"model.n_heads={n_heads}", *extra]).model


def randomize(module: torch.nn.Module, seed: int = 0) -> None:
    """Give every learned parameter a non-trivial value (zero-initialised u, v etc. included)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + p)


def logits(pe, q, k, q_pos, k_pos):
    """Attention logits as attention computes them: rotate, q.k * scale + bias."""
    q, k = pe.rotate(q, k, q_pos, k_pos)
    out = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(pe.d_head * pe.score_scale)
    bias = pe.score_bias(q, k, q_pos, k_pos)
    return out if bias is None else out + bias


# ---------------------------------------------------------------- public functions vs references

def test_sinusoidal_table_matches_formula():
    table = sinusoidal_table(50, 16, base=100.0)
    for t in (0, 1, 7, 49):
        for i in range(8):
            angle = t / 100.0 ** (2 * i / 16)
            assert table[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_shift_is_a_fixed_linear_map():
    dim, k = 16, 5
    table = sinusoidal_table(120, dim)
    # PE(t + k) = M_k PE(t), M_k block-diagonal: each (sin, cos) pair rotated by k * omega_i
    m = torch.zeros(dim, dim)
    for i in range(dim // 2):
        w = k / 10000.0 ** (2 * i / dim)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[math.cos(w), -math.sin(w)],
                                                            [math.sin(w), math.cos(w)]])
    assert torch.allclose(table[:-k] @ m, table[k:], atol=1e-5)


def test_apply_rotary_matches_complex_form():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8)
    pos = torch.tensor([0, 3, 4, 10, 99])
    out = apply_rotary(x, pos, base=500.0)
    for t in range(5):
        for i in range(4):
            z = complex(x[1, 2, t, 2 * i], x[1, 2, t, 2 * i + 1])
            w = z * cmath.exp(1j * pos[t].item() * 500.0 ** (-2 * i / 8))
            assert out[1, 2, t, 2 * i].item() == pytest.approx(w.real, abs=1e-5)
            assert out[1, 2, t, 2 * i + 1].item() == pytest.approx(w.imag, abs=1e-5)


@pytest.mark.parametrize("layout", ["heads of a fused projection", "odd offset", "odd offset only", "odd stride only",
                                    "strided pairs", "transposed", "bf16"])
def test_apply_rotary_on_views_and_bf16_matches_complex_form(layout):
    """What attention passes: a permuted view into the q/k/v projection (its strides), a slice at
    an odd memory offset (copied before the complex view), bf16 (rotated in float32, returned bf16)."""
    torch.manual_seed(1)
    if layout == "heads of a fused projection":
        x = torch.randn(2, 5, 3, 3, 8).permute(2, 0, 3, 1, 4)[1]  # (B, H, T, Dh) view, as MultiHeadAttention._heads
    elif layout == "odd offset":
        x = torch.randn(2, 3, 5, 9)[..., 1:]
    elif layout == "odd offset only":  # even strides: only the offset forbids a complex view
        x = torch.randn(2 * 3 * 5 * 8 + 3)[3:].view(2, 3, 5, 8)  # offset 3: odd, and not a multiple of 2
    elif layout == "odd stride only":  # offset 0, even outer strides: only the positions' stride (9) forbids it
        x = torch.randn(2, 3, 6, 9)[:, :, :5, :8]
    elif layout == "strided pairs":  # the last dimension not contiguous
        x = torch.randn(2, 3, 5, 16)[..., ::2]
    elif layout == "transposed":  # dense, but the pairs lie 5 apart: a copy must be laid out anew
        x = torch.randn(2, 3, 8, 5).transpose(-1, -2)
    else:
        x = torch.randn(2, 3, 5, 8).bfloat16()
    pos = torch.tensor([0, 2, 7, 8, 30])
    out = apply_rotary(x, pos, base=100.0)
    assert out.dtype == x.dtype and out.shape == x.shape
    for b, h, t, i in itertools.product(range(2), range(3), range(5), range(4)):
        z = complex(x[b, h, t, 2 * i].item(), x[b, h, t, 2 * i + 1].item())
        w = z * cmath.exp(1j * pos[t].item() * 100.0 ** (-2 * i / 8))
        tolerance = 1e-2 * max(1.0, abs(w)) if x.dtype == torch.bfloat16 else 1e-5
        assert out[b, h, t, 2 * i].item() == pytest.approx(w.real, abs=tolerance)
        assert out[b, h, t, 2 * i + 1].item() == pytest.approx(w.imag, abs=tolerance)


def test_alibi_slopes_follow_the_paper():
    assert alibi_slopes(8).tolist() == pytest.approx([2.0 ** -k for k in range(1, 9)])
    assert alibi_slopes(16).tolist() == pytest.approx([2.0 ** (-k / 2) for k in range(1, 17)])
    # not a power of two: the 8 slopes of 8 heads, then the odd-indexed slopes of 16 heads
    twelve = alibi_slopes(12).tolist()
    assert twelve == pytest.approx([2.0 ** -k for k in range(1, 9)] + [2.0 ** (-k / 2) for k in (1, 3, 5, 7)])


@pytest.mark.parametrize("buckets,distance", [(32, 128), (6, 4), (7, 9), (4, 3)])  # T5's and small tables
@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bucket_matches_reference(bidirectional, buckets, distance):
    rel = torch.arange(-300, 301)
    got = relative_position_bucket(rel, bidirectional, num_buckets=buckets, max_distance=distance)
    want = [t5_bucket(r, bidirectional, buckets, distance) for r in rel.tolist()]
    assert got.tolist() == want
    assert int(got.max()) <= buckets - 1 and int(got.min()) >= 0


# ---------------------------------------------------------------- score terms vs explicit loops

def qk(seed=0, b=2, h=4, tq=5, tk=6, dh=8):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, tq, dh, generator=g), torch.randn(b, h, tk, dh, generator=g)


def test_alibi_bias_is_minus_slope_times_distance():
    pe = build_positional(model_cfg("alibi"), "encoder")
    q, k = qk()
    bias = pe.score_bias(q, k, torch.arange(5), torch.arange(6))
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(6):
                assert bias[0, h, i, j].item() == pytest.approx(-slopes[h].item() * abs(j - i))


def test_t5_bias_reads_the_table_by_bucket():
    pe = build_positional(model_cfg("t5"), "decoder")
    q, k = qk()
    bias = pe.score_bias(q, k, torch.arange(5), torch.arange(6))
    for h in range(4):
        for i in range(5):
            for j in range(6):
                bucket = t5_bucket(j - i, False, 32, 128)
                assert bias[0, h, i, j].item() == pytest.approx(pe.bias.weight[bucket, h].item())


def test_shaw_terms_match_loops():
    pe = build_positional(model_cfg("shaw", "model.positional.shaw.max_distance=2"), "encoder")
    q, k = qk()
    bias = pe.score_bias(q, k, torch.arange(5), torch.arange(6))
    probs = torch.softmax(torch.randn(2, 4, 5, 6), -1)
    value = pe.value_term(probs, torch.arange(5), torch.arange(6))
    for i in range(5):
        acc = torch.zeros(2, 4, 8)
        for j in range(6):
            r = max(-2, min(2, j - i)) + 2
            want = (q[:, :, i] * pe.key_table[r]).sum(-1) / math.sqrt(8)
            assert torch.allclose(bias[:, :, i, j], want, atol=1e-5)
            acc += probs[:, :, i, j, None] * pe.value_table[r]
        assert torch.allclose(value[:, :, i], acc, atol=1e-5)


def test_nezha_tables_are_fixed_sinusoids_of_the_clipped_distance():
    pe = build_positional(model_cfg("nezha", "model.positional.nezha.max_distance=3"), "encoder")
    assert not list(pe.parameters())
    for r, distance in enumerate(range(-3, 4)):
        for i in range(4):
            angle = distance / 10000 ** (2 * i / 8)
            assert pe.key_table[r, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe.key_table[r, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_xl_terms_match_loops():
    cfg = model_cfg("xl")
    pe = build_positional(cfg, "encoder")
    randomize(pe)
    q, k = qk()
    q_pos, k_pos = torch.arange(3, 8), torch.arange(6)
    bias = pe.score_bias(q, k, q_pos, k_pos)
    for i in range(5):
        for j in range(6):
            d = float(q_pos[i] - k_pos[j])
            r = torch.tensor([math.sin(d / 10000 ** (2 * m / 32)) if c == 0 else math.cos(d / 10000 ** (2 * m / 32))
                              for m in range(16) for c in (0, 1)])
            wr = (pe.w_r.weight @ r).view(4, 8)  # (H, Dh)
            want = ((q[:, :, i] + pe.v) * wr).sum(-1) + (pe.u * k[:, :, j]).sum(-1)
            assert torch.allclose(bias[:, :, i, j], want / math.sqrt(8), atol=1e-4)


@pytest.mark.parametrize("span", [3, 1])
def test_deberta_terms_match_loops(span):
    """Both ways of computing the terms: each (query, key) pair against its own row of the table
    (span 3: 60 pairs < 66 table rows x positions) and every position against the whole table
    (span 1: 60 >= 22)."""
    pe = build_positional(model_cfg("deberta", f"model.positional.deberta.max_distance={span}"), "encoder")
    q, k = qk()
    bias = pe.score_bias(q, k, torch.arange(5), torch.arange(6))
    kr = pe.w_kr(pe.table).view(2 * span, 4, 8)
    qr = pe.w_qr(pe.table).view(2 * span, 4, 8)

    def delta(a, b):
        return max(0, min(2 * span - 1, a - b + span))

    for i in range(5):
        for j in range(6):
            c2p = (q[:, :, i] * kr[delta(i, j)]).sum(-1)
            p2c = (k[:, :, j] * qr[delta(j, i)]).sum(-1)
            assert torch.allclose(bias[:, :, i, j], (c2p + p2c) / math.sqrt(3 * 8), atol=1e-5)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_fire_bias_matches_its_formula_with_the_signed_distance_and_positions_past_l(kind):
    """bias[h, i, j] = f(sign(i - j) psi(|i - j|) / psi(max(L, i + 1)))_h, psi(x) = log(c x + 1), with
    L = 4 so that queries at positions 4.. use their own normaliser."""
    pe = build_positional(model_cfg("fire", "model.positional.fire.threshold_init=4.0",
                                    "model.positional.fire.c_init=0.5"), kind)
    randomize(pe)
    c, threshold = math.exp(pe.log_c.item()), math.exp(pe.log_threshold.item())
    q, k = qk(tq=9, tk=9)
    with torch.no_grad():
        bias = pe.score_bias(q, k, torch.arange(9), torch.arange(9))
    for i in range(9):
        for j in range(9):
            d = i - j
            x = math.copysign(math.log(c * abs(d) + 1), d) / math.log(c * max(threshold, i + 1) + 1)
            assert bias[0, :, i, j].tolist() == pytest.approx(mlp(pe.mlp, x), abs=1e-5), (i, j)
    if kind == "encoder":  # left and right of the query differ
        assert not torch.allclose(bias[0, :, 5, 3], bias[0, :, 5, 7], atol=1e-3)


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotary_score_depends_only_on_offset(name):
    pe = build_positional(model_cfg(name), "decoder")
    q, k = qk(tq=1, tk=1)
    scores = {}
    for m, n in [(3, 1), (10, 8), (40, 38), (7, 9), (107, 109)]:
        rq, rk = pe.rotate(q, k, torch.tensor([m]), torch.tensor([n]))
        scores.setdefault(m - n, []).append((rq * rk).sum(-1))
    for values in scores.values():
        assert all(torch.allclose(values[0], v, atol=1e-4) for v in values)


def test_rope_keeps_norms():
    rope = build_positional(model_cfg("rope"), "decoder")
    x = torch.randn(2, 4, 9, 8)
    rotated, _ = rope.rotate(x, x, torch.arange(9) * 13, torch.arange(9))
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_xpos_is_rope_scaled_by_zeta_to_the_offset():
    cfg = model_cfg("xpos")
    xpos, rope = build_positional(cfg, "decoder"), build_positional(model_cfg("rope"), "decoder")
    q, k = qk(tq=1, tk=1)
    zeta = torch.tensor([(2 * i / 8 + 0.4) / 1.4 for i in range(4)])
    assert (zeta < 1).all()
    for n, m in [(5, 0), (300, 20), (40, 39)]:
        xq, xk = xpos.rotate(q, k, torch.tensor([n]), torch.tensor([m]))
        rq, rk = rope.rotate(q, k, torch.tensor([n]), torch.tensor([m]))
        pair_products = (rq * rk).view(2, 4, 1, 4, 2).sum(-1)  # one term per rotated pair
        want = (pair_products * zeta ** ((n - m) / 512)).sum(-1)
        assert torch.allclose((xq * xk).sum(-1), want, atol=1e-4)


@pytest.mark.parametrize("name", RELATIVE)
def test_encoder_logits_invariant_to_a_common_shift(name):
    pe = build_positional(model_cfg(name), "encoder")
    randomize(pe)
    q, k = qk(tq=6, tk=6)
    pos = torch.arange(6)
    base = logits(pe, q, k, pos, pos)
    for shift in (1, 17, 200):
        assert torch.allclose(logits(pe, q, k, pos + shift, pos + shift), base, atol=1e-4), shift


def test_rope_frequencies_span_the_head_dimension():
    cfg = model_cfg("rope", d_model=64, n_heads=4)  # d_head 16
    pe = build_positional(cfg, "encoder")
    expected = torch.tensor([10000.0 ** (-2 * i / 16) for i in range(8)])
    # the first member of every pair set to 1, at position 1: pair i turns by theta_i
    q = torch.zeros(1, 1, 1, 16)
    q[..., 0::2] = 1.0
    rotated, _ = pe.rotate(q, q[..., :0, :], torch.tensor([1]), torch.tensor([], dtype=torch.long))
    angles = torch.atan2(rotated[0, 0, 0, 1::2], rotated[0, 0, 0, 0::2])
    assert torch.allclose(angles, expected, atol=1e-6)


# embedding-only schemes never act in cross-attention; randomized and the self-attention-only schemes
# (p_rope, polar, fox, dape_*, cope) refuse cross_attention: true
@pytest.mark.parametrize("name", [n for n in SCHEMES if SCHEMES[n].card.cross_attention == "acts" and n != "none"])
def test_schemes_stay_out_of_cross_attention_unless_asked(name):
    q, k = qk()
    off = build_positional(model_cfg(name), "cross")
    assert torch.equal(logits(off, q, k, torch.arange(5), torch.arange(6)),
                       torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(8))
    on = build_positional(model_cfg(name, "model.positional.cross_attention=true"), "cross")
    randomize(on)
    assert not torch.allclose(logits(on, q, k, torch.arange(5), torch.arange(6)),
                              logits(off, q, k, torch.arange(5), torch.arange(6)))


SELF_ONLY = ["p_rope", "polar", "fox", "dape_alibi", "dape_kerple", "dape_fire", "cope"]


@pytest.mark.parametrize("name", SELF_ONLY)
def test_self_attention_schemes_refuse_cross_attention_in_one_line(name):
    """Defined for self-attention only: ``cross_attention: true`` is the standard config error, and
    with it off the cross-attention module is the plain dot product (none of the scheme's terms)."""
    from utils.errors import ConfigError

    assert SCHEMES[name].card.cross_attention == "refused"
    with pytest.raises(ConfigError) as err:
        model_cfg(name, "model.positional.cross_attention=true")
    assert str(err.value) == (
        "config key 'model.positional.cross_attention' in the command line must be false with "
        f"{name} (defined for self-attention; cross-attention keeps the plain dot product), got True")
    assert type(build_positional(model_cfg(name), "cross")).__name__ == "NoPositional"


def test_learnable_table_refuses_positions_past_its_size():
    """The model checks the lengths on the host before it embeds: 10 positions fit a table of
    10, 11 do not (source and target alike), and the error names the limit."""
    from models.transformer import Transformer

    model = Transformer(model_cfg("learnable", "model.positional.max_positions=10"), 20, 20, pad_id=0).eval()
    ids = torch.randint(1, 20, (1, 11))
    with torch.no_grad():
        assert model(ids[:, :10], ids[:, :10]).shape == (1, 10, 20)
        with pytest.raises(UserError, match=r"position 10 .*encoder.*max_positions=10"):
            model(ids, ids[:, :10])
        with pytest.raises(UserError, match=r"position 10 .*decoder.*max_positions=10"):
            model(ids[:, :10], ids)


def test_combined_schemes_apply_both():
    cfg = model_cfg("learnable+t5")
    pe = build_positional(cfg, "encoder")
    q, k = qk()
    assert pe.score_bias(q, k, torch.arange(5), torch.arange(6)) is not None
    x = torch.zeros(1, 5, 32)
    assert pe.embed(x, torch.arange(5)).abs().sum() > 0


def test_unknown_scheme_is_a_config_error():
    from utils.errors import ConfigError
    with pytest.raises(ConfigError) as err:
        build_positional(model_cfg("rotary"), "encoder")
    assert str(err.value) == ("config key 'model.positional.name' in the command line must be a registered scheme, "
                              "or several joined by + ('rotary' is unknown; known: " + ", ".join(SCHEMES) + "), got 'rotary'")


def _numeric_options() -> list[tuple[str, str, type]]:
    import dataclasses

    from models.positional import SCHEMES as registry

    return [(name, f.name, f.type if isinstance(f.type, type) else {"int": int, "float": float}.get(f.type, str))
            for name, scheme in registry.items() if scheme.Options is not None
            for f in dataclasses.fields(scheme.Options)
            if (f.type if isinstance(f.type, str) else f.type.__name__) in ("int", "float")]


@pytest.mark.parametrize("scheme,option,kind", _numeric_options(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_scheme_option_is_range_checked_when_the_config_loads(scheme, option, kind):
    """Each numeric option of each registered scheme, set to 0, -1 and 1: either the config loader
    refuses it with the usual one-line message naming the key, or a model built with it trains and
    decodes with finite outputs. An out-of-range value never gets as far as the model's arithmetic."""
    from experiment.config import load_config
    from models.transformer import Transformer
    from utils.errors import ConfigError

    key = f"model.positional.{scheme}.{option}"
    for value in (0, -1, 1):
        overrides = [f"model.positional.name={scheme}", "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
                     "model.n_encoder_layers=1", "model.n_decoder_layers=1", f"{key}={kind(value)}"]
        try:
            cfg = load_config(None, overrides).model
        except ConfigError as err:
            assert str(err).startswith(f"config key '{key}' in the command line must be "), str(err)
            assert str(err).endswith(f", got {kind(value)!r}") and "\n" not in str(err)
            continue
        torch.manual_seed(0)
        model = Transformer(cfg, 20, 20, pad_id=0, joint_vocab=True)
        src, tgt = torch.randint(4, 20, (2, 9)), torch.randint(4, 20, (2, 7))
        assert torch.isfinite(model.train()(src, tgt)).all(), (key, value)
        with torch.no_grad():
            assert torch.isfinite(model.eval()(src, tgt)).all(), (key, value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_rotations_real_and_complex_forms_agree_with_the_formula(dtype, monkeypatch):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 9, generator=g)[..., 1:].to(dtype)  # an odd storage offset
    angles = rotary_angles(torch.arange(5) * 3, 8, 10000.0)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    expected = torch.empty(x.shape)
    expected[..., 0::2] = x1 * cos - x2 * sin
    expected[..., 1::2] = x1 * sin + x2 * cos
    real, complex_form = rotate_pairs_real(x, cos, sin), rotate_pairs(x, cos, sin)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)  # what a traced model sees
    traced = rotate_pairs(x, cos, sin)
    assert real.dtype == complex_form.dtype == traced.dtype == dtype
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    for form in (real, complex_form, traced):
        torch.testing.assert_close(form.float(), expected, **tol)
