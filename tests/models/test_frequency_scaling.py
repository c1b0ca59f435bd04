"""Test-time rotary frequency scaling (``model.length_scaling.rotary``: PI, NTK-aware, YaRN), each
checked against its formula written here: position interpolation rotates position m as RoPE rotates
m / s; NTK-aware scaling is RoPE with the base raised to base · s^(Dh / (Dh − 2)) (PoPE: its exponents
c / Dh give s^(Dh / (Dh − 1))); YaRN replaces theta_i by (1 − γ) theta_i / s + γ theta_i with the ramp
γ = clamp((r − α) / (β − α), 0, 1) on r = n_train / (2π / theta_i), and multiplies the logits by
(0.1 ln s + 1)². Each sentence has its own factor s = max(1, source tokens / n_train): a sentence
decodes the same alone or beside others, within the training lengths as trained, and a cached,
beam-grouped decode equals the full pass."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.positional import build_positional
from models.positional.base import lengths_scaled
from models.transformer import Transformer
from search.ctranslate2 import check_exportable
from tests.reference import rotate as reference_rotate
from utils.errors import ConfigError, UserError

D_MODEL, HEADS = 32, 2  # Dh = 16: eight rotary frequencies
DH = D_MODEL // HEADS


def scaled_rotate(pe, factor, q, k, q_pos, k_pos):
    """``pe.rotate`` while ``pe`` holds ``factor`` (B,), as the model holds it for a forward pass."""
    with lengths_scaled(pe, factor):
        return pe.rotate(q, k, q_pos, k_pos)


def model_cfg(scheme: str, method: str, *extra: str, n_source: int = 100, n_target: int = 90):
    return load_config(None, [f"model.positional.name={scheme}", f"model.d_model={D_MODEL}", f"model.n_heads={HEADS}",
                              f"model.length_scaling.rotary={method}",
                              f"model.length_scaling.train_source_tokens={n_source}",
                              f"model.length_scaling.train_target_tokens={n_target}", *extra]).model


def yarn_theta(base: float, exponent: float, s: float, n_train: int, alpha: float, beta: float) -> tuple[float, float]:
    """YaRN's scaled frequency of theta = base^(-exponent), and its ramp γ."""
    theta = base ** -exponent
    wavelength = 2 * math.pi / theta
    gamma = min(1.0, max(0.0, (n_train / wavelength - alpha) / (beta - alpha)))
    return (1 - gamma) * theta / s + gamma * theta, gamma


def rotate_by(x: torch.Tensor, positions: list[int], thetas: list[float], magnitude: float = 1.0) -> torch.Tensor:
    """Each pair (x_2m, x_2m+1) at position p turned by p theta_m and scaled by ``magnitude``. x: (H, T, Dh)."""
    x = x.double()
    out = torch.empty_like(x)
    for t, p in enumerate(positions):
        for m, theta in enumerate(thetas):
            z = torch.complex(x[..., t, 2 * m], x[..., t, 2 * m + 1]) * complex(math.cos(p * theta), math.sin(p * theta))
            out[..., t, 2 * m], out[..., t, 2 * m + 1] = z.real * magnitude, z.imag * magnitude
    return out


def rotated(scheme: str, method: str, factors: list[float], *extra: str, kind: str = "encoder", positions=None):
    """Queries (B, H, T, Dh) and the module's rotated queries with each row's factor."""
    pe = build_positional(model_cfg(scheme, method, *extra), kind)
    torch.manual_seed(0)
    positions = torch.arange(12) if positions is None else positions
    q = torch.randn(len(factors), HEADS, len(positions), DH)
    out, _ = scaled_rotate(pe, torch.tensor(factors), q, q[..., :0, :], positions, positions[:0])
    return q, out.double(), positions.tolist()


def test_position_interpolation_rotates_position_m_as_rope_rotates_m_over_s():
    q, out, pos = rotated("rope", "pi", [1.0, 2.5])
    assert torch.allclose(out[0], reference_rotate(q[0], pos, 10000.0), atol=1e-5)  # s = 1: RoPE itself
    assert torch.allclose(out[1], reference_rotate(q[1], [p / 2.5 for p in pos], 10000.0), atol=1e-5)
    assert not torch.allclose(out[1], reference_rotate(q[1], pos, 10000.0), atol=1e-2)


def test_ntk_scaling_is_rope_with_the_base_raised_to_base_times_s_to_the_dh_over_dh_minus_2():
    q, out, pos = rotated("rope", "ntk", [3.0, 1.0])
    assert torch.allclose(out[0], reference_rotate(q[0], pos, 10000.0 * 3.0 ** (DH / (DH - 2))), atol=1e-5)
    assert torch.allclose(out[1], reference_rotate(q[1], pos, 10000.0), atol=1e-5)
    # the highest frequency (theta_0 = 1) is kept, the lowest interpolated by exactly s
    lowest, scaled_base = 10000.0 ** (-(DH - 2) / DH), 10000.0 * 3.0 ** (DH / (DH - 2))
    assert scaled_base ** (-(DH - 2) / DH) == pytest.approx(lowest / 3.0)


def test_yarn_ramps_between_interpolation_and_extrapolation_and_scales_the_logits():
    alpha, beta, n_train, s = 1.0, 8.0, 100, 2.0
    extra = (f"model.length_scaling.yarn_alpha={alpha}", f"model.length_scaling.yarn_beta={beta}")
    q, out, pos = rotated("rope", "yarn", [s], *extra)  # n_source: 100
    scaled = [yarn_theta(10000.0, 2 * m / DH, s, n_train, alpha, beta) for m in range(DH // 2)]
    gammas = [g for _, g in scaled]
    assert gammas[0] == 1.0 and 0 < gammas[1] < 1 and gammas[-1] == 0.0  # every regime of the ramp is tested
    magnitude = 0.1 * math.log(s) + 1
    assert torch.allclose(out[0], rotate_by(q[0], pos, [t for t, _ in scaled], magnitude), atol=1e-5)
    # the logits of a rotated query and key: times (0.1 ln s + 1)^2 = 1 / t
    pe = build_positional(model_cfg("rope", "yarn", *extra, n_source=n_train), "encoder")
    plain = build_positional(model_cfg("rope", "none"), "encoder")
    k = torch.randn(1, HEADS, 1, DH)
    q0, k0 = q[:, :, :1], k
    sq, sk = scaled_rotate(pe, torch.tensor([s]), q0, k0, torch.tensor([0]), torch.tensor([0]))
    pq, pk = plain.rotate(q0, k0, torch.tensor([0]), torch.tensor([0]))
    assert (sq * sk).sum() == pytest.approx(float((pq * pk).sum()) * magnitude ** 2, rel=1e-5)


def test_a_ramp_past_its_bounds_is_pi_or_nothing():
    q, out, pos = rotated("rope", "yarn", [2.0], "model.length_scaling.yarn_alpha=1000",
                          "model.length_scaling.yarn_beta=2000")
    magnitude = 0.1 * math.log(2.0) + 1  # every r below alpha: interpolation everywhere, and the temperature
    assert torch.allclose(out[0], reference_rotate(q[0], [p / 2.0 for p in pos], 10000.0) * magnitude, atol=1e-5)


def test_xpos_rescales_its_rotation_and_keeps_its_decay():
    base, gamma, scale_base = 10000.0, 0.4, 512.0
    q, out, pos = rotated("xpos", "ntk", [2.0])
    zeta = [(2 * m / DH + gamma) / (1 + gamma) for m in range(DH // 2)]
    want = reference_rotate(q[0], pos, base * 2.0 ** (DH / (DH - 2)), zeta=zeta, scale_base=scale_base)
    assert torch.allclose(out[0], want, atol=1e-5)


def test_p_rope_rescales_the_kept_frequencies_and_leaves_the_others_unrotated():
    q, out, pos = rotated("p_rope", "pi", [4.0], "model.positional.p_rope.p=0.5")
    kept = DH // 4  # round(0.5 * Dh/2) pairs rotated
    thetas = [10000.0 ** (-2 * m / DH) / 4.0 for m in range(kept)] + [0.0] * (DH // 2 - kept)
    assert torch.allclose(out[0], rotate_by(q[0], pos, thetas), atol=1e-5)
    assert torch.equal(out[0][..., 2 * kept:], q[0][..., 2 * kept:].double())


def polar_inputs(pe, twin, seed: int):
    """Queries (1, H, 5, Dh) at positions 3..7 and keys (1, H, 7, Dh) at 0..6; ``pe``'s phase bias set
    non-trivial and copied into ``twin`` (the module it is compared with)."""
    torch.manual_seed(seed)
    q, k = torch.randn(1, HEADS, 5, DH), torch.randn(1, HEADS, 7, DH)
    with torch.no_grad():
        pe.phase_bias.uniform_(-1.0, 0.0)
        twin.phase_bias.copy_(pe.phase_bias)
    return q, k, torch.arange(3, 8), torch.arange(7)


def test_polar_ntk_raises_its_base_by_its_own_largest_exponent():
    s = 3.0
    scaled = build_positional(model_cfg("polar", "ntk"), "encoder")
    raised = build_positional(model_cfg("polar", "none", f"model.positional.polar.base={10000.0 * s ** (DH / (DH - 1))}"),
                              "encoder")
    q, k, q_pos, k_pos = polar_inputs(scaled, raised, seed=2)
    got = scaled_rotate(scaled, torch.tensor([s]), q, k, q_pos, k_pos)
    want = raised.rotate(q, k, q_pos, k_pos)
    for a, b in zip(got, want):
        assert a.shape == b.shape == (1, HEADS, a.size(2), 2 * DH)
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("kind,n_train", [("encoder", 100), ("decoder", 90)])
def test_polar_yarn_turns_its_phases_and_scales_its_magnitudes_by_the_formula(kind, n_train):
    """PoPE under YaRN: channel c's frequency theta_c = base^(-c/Dh) scaled by YaRN's ramp on the
    attention kind's own training length (the decoder's keys are target tokens: 90, not 100), and both
    magnitudes softplus(x) times 0.1 ln s + 1; the keys' phases less the clamped phase bias. Without
    a factor the module rotates as trained."""
    s, alpha, beta = 3.0, 1.0, 32.0
    cfg = model_cfg("polar", "yarn", f"model.length_scaling.yarn_alpha={alpha}", f"model.length_scaling.yarn_beta={beta}")
    pe, plain = build_positional(cfg, kind), build_positional(model_cfg("polar", "none"), kind)
    q, k, q_pos, k_pos = polar_inputs(pe, plain, seed=3)
    got_q, got_k = (x[0].double() for x in scaled_rotate(pe, torch.tensor([s]), q, k, q_pos, k_pos))
    thetas = torch.tensor([yarn_theta(10000.0, c / DH, s, n_train, alpha, beta)[0] for c in range(DH)], dtype=torch.float64)
    magnitude = 0.1 * math.log(s) + 1
    delta = pe.phase_bias.detach().double().clamp(-2 * math.pi, 0.0)[:, None, :]  # (H, 1, Dh)
    for x, pos, shift, got in ((q, q_pos, 0.0, got_q), (k, k_pos, delta, got_k)):
        phase = pos.double()[:, None] * thetas - shift  # (T, Dh) or (H, T, Dh)
        mu = torch.nn.functional.softplus(x[0].double()) * magnitude
        assert torch.allclose(got, torch.cat((mu * phase.cos(), mu * phase.sin()), dim=-1), atol=1e-5)
    for a, b in zip(pe.rotate(q, k, q_pos, k_pos), plain.rotate(q, k, q_pos, k_pos)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("method", ["pi", "ntk", "yarn"])
@pytest.mark.parametrize("scheme", ["rope", "xpos", "p_rope", "polar"])
def test_scaled_rotations_are_computed_on_the_inputs_device(scheme, method):
    """On the meta device (shapes, no data), a frequency table or exponents made on the CPU beside
    meta inputs fails: each scheme's scaled rotation is built where its inputs are."""
    meta = torch.device("meta")
    pe = build_positional(model_cfg(scheme, method), "encoder").to(meta)
    q, k = torch.empty(2, HEADS, 5, DH, device=meta), torch.empty(2, HEADS, 7, DH, device=meta)
    out_q, out_k = scaled_rotate(pe, torch.empty(2, device=meta), q, k, torch.arange(5, device=meta),
                                 torch.arange(7, device=meta))
    assert out_q.device == out_k.device == meta and out_q.shape[:3] == (2, HEADS, 5) and out_k.shape[:3] == (2, HEADS, 7)


@pytest.mark.parametrize("scheme", ["alibi", "sinusoidal", "t5", "none"])
def test_a_scheme_without_rotary_frequencies_refuses_the_setting_in_one_line(scheme):
    with pytest.raises(ConfigError) as err:
        model_cfg(scheme, "yarn")
    message = str(err.value)
    assert "\n" not in message and "model.length_scaling.rotary" in message and scheme in message
    assert "rope, xpos, p_rope, polar" in message


@pytest.mark.parametrize("scheme", ["rope", "xpos", "p_rope", "polar", "learnable+rope"])
def test_rotary_schemes_take_every_method(scheme):
    for method in ("pi", "ntk", "yarn"):
        assert model_cfg(scheme, method).length_scaling.rotary == method


def test_unknown_training_lengths_are_refused_in_one_line():
    cfg = model_cfg("rope", "pi", n_source=0)
    with pytest.raises(ConfigError, match=r"rotary=pi needs the run's training lengths \(model.length_scaling."
                                          r"train_source_tokens is 0\)"):
        Transformer(cfg, 20, 20, pad_id=0, joint_vocab=True)


def test_ctranslate2_export_refuses_test_time_settings():
    with pytest.raises(UserError, match="model.length_scaling"):
        check_exportable(model_cfg("rope", "yarn"))


def pair_of_models(method: str, n_source: int = 6, n_target: int = 5):
    overrides = ["model.d_model=32", "model.n_heads=4", "model.d_ff=64", "model.n_encoder_layers=2",
                 "model.n_decoder_layers=2", "model.positional.name=rope"]
    plain_cfg = load_config(None, overrides).model
    scaled_cfg = load_config(None, [*overrides, f"model.length_scaling.rotary={method}",
                                    f"model.length_scaling.train_source_tokens={n_source}",
                                    f"model.length_scaling.train_target_tokens={n_target}"]).model
    torch.manual_seed(1)
    plain = Transformer(plain_cfg, 30, 30, pad_id=0, joint_vocab=True).eval()
    scaled = Transformer(scaled_cfg, 30, 30, pad_id=0, joint_vocab=True).eval()
    scaled.load_state_dict(plain.state_dict())
    return plain, scaled


@pytest.mark.parametrize("method", ["pi", "ntk", "yarn"])
def test_a_model_decodes_sentences_within_the_training_lengths_as_trained(method):
    plain, scaled = pair_of_models(method)
    g = torch.Generator().manual_seed(3)
    short_src, tgt = torch.randint(4, 30, (2, 6), generator=g), torch.randint(4, 30, (2, 9), generator=g)
    long_src = torch.randint(4, 30, (2, 14), generator=g)
    with torch.no_grad():
        assert torch.allclose(plain(short_src, tgt), scaled(short_src, tgt), atol=1e-5)  # 6 tokens: s = 1
        assert not torch.allclose(plain(long_src, tgt), scaled(long_src, tgt), atol=1e-3)  # 14 tokens: s = 14 / 6


def test_each_sentence_keeps_its_own_factor_in_a_batch():
    _, scaled = pair_of_models("yarn")
    g = torch.Generator().manual_seed(4)
    src, tgt = torch.randint(4, 30, (2, 15), generator=g), torch.randint(4, 30, (2, 8), generator=g)
    src[1, 4:] = 0  # row 1: 4 real tokens (s = 1), row 0: 15 (s = 2.5)
    with torch.no_grad():
        together = scaled(src, tgt)
        alone = [scaled(src[i:i + 1, :15 if i == 0 else 4], tgt[i:i + 1]) for i in range(2)]
    assert torch.allclose(together[0], alone[0][0], atol=1e-5)
    assert torch.allclose(together[1], alone[1][0], atol=1e-5)


def test_cached_grouped_decoding_equals_the_full_pass():
    _, scaled = pair_of_models("yarn")
    g = torch.Generator().manual_seed(5)
    src, tgt = torch.randint(4, 30, (2, 13), generator=g), torch.randint(4, 30, (6, 7), generator=g)
    src[1, 9:] = 0
    group = 3  # three hypotheses a sentence, as beam search keeps them
    with torch.no_grad():
        full = scaled(src.repeat_interleave(group, 0), tgt)
        cache, steps = scaled.start_decoding(scaled.encode(src), group=group), []
        for t in range(tgt.size(1)):
            out = scaled.decode(tgt[:, t:t + 1], cache)
            cache, steps = out.cache, steps + [out.logits]
        index = torch.tensor([2, 0, 1, 5, 5, 3])  # hypotheses reordered within their sentences
        reordered = scaled.decode(tgt[index, :1], cache.reorder(index)).logits
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
    appended = torch.cat([tgt[index], tgt[index, :1]], 1)
    with torch.no_grad():
        again = scaled(src.repeat_interleave(group, 0), appended)
    assert torch.allclose(reordered[:, 0], again[:, -1], atol=1e-5)


def test_cross_attention_rotations_take_each_sentences_factor_whole_cached_and_grouped():
    """RoPE in cross-attention too (``model.positional.cross_attention=true``): position interpolation
    turns sentence b's target queries and source keys by p / s_b there as well, so its attention equals
    plain RoPE's at the positions divided by s_b — computed whole, from the cached memory keys, and with
    the beam's hypotheses grouped on their sentence's memory row."""
    from models.attention import MultiHeadAttention

    cross = "model.positional.cross_attention=true"
    scaled_pe = build_positional(model_cfg("rope", "pi", cross), "cross")
    plain_pe = build_positional(load_config(None, ["model.positional.name=rope", f"model.d_model={D_MODEL}",
                                                   f"model.n_heads={HEADS}", cross]).model, "cross")
    torch.manual_seed(6)
    att = MultiHeadAttention(D_MODEL, HEADS, cross=True).eval()
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 9, D_MODEL)
    q_pos, k_pos, s = torch.arange(5), torch.arange(9), [1.0, 2.5]
    factors = torch.tensor(s)
    with torch.no_grad():
        want = torch.cat([att(x[b:b + 1], plain_pe, q_pos / s[b], k_pos / s[b], memory=memory[b:b + 1])[0]
                          for b in range(2)])
        with lengths_scaled(scaled_pe, factors):  # one factor per memory row, as the model holds it
            whole, kv, _ = att(x, scaled_pe, q_pos, k_pos, memory=memory)
            cached, _, _ = att(x, scaled_pe, q_pos, k_pos, past=kv)
            grouped, _, _ = att(x.repeat_interleave(3, 0), scaled_pe, q_pos, k_pos, memory=memory, group=3)
            grouped_cached, _, _ = att(x.repeat_interleave(3, 0), scaled_pe, q_pos, k_pos, past=kv, group=3)
        assert scaled_pe.length_factor is None  # held for the block alone
        unscaled, _, _ = att(x, plain_pe, q_pos, k_pos, memory=memory)
    assert not torch.allclose(want[1], unscaled[1], atol=1e-3)  # the factor changes sentence 1's attention
    torch.testing.assert_close(want[0], unscaled[0], atol=1e-6, rtol=0)  # s = 1: RoPE itself
    for got in (whole, cached, grouped[::3], grouped[2::3], grouped_cached[1::3]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_a_rotate_written_with_a_length_factor_parameter_is_deprecated_and_still_gets_the_factor():
    """Until 2026-11-30 the attention passed each row's factor to ``rotate(q, k, q_pos, k_pos, length_factor)``;
    a plugin written so still scales its rotation — from the factor the module holds — and its class is
    named in a DeprecationWarning when it is defined. A rotate of four parameters gets no warning."""
    from models.positional.base import PositionalEncoding

    with pytest.warns(DeprecationWarning, match=r"OldRotary\.rotate takes `length_factor`.*self\.length_factor"):
        class OldRotary(PositionalEncoding):
            def rotate(self, q, k, q_pos, k_pos, length_factor=None):
                s = torch.ones(q.size(0)) if length_factor is None else length_factor
                return q * s[:, None, None, None], k
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class NewRotary(PositionalEncoding):
            def rotate(self, q, k, q_pos, k_pos):
                return q, k
    pe, q = OldRotary("encoder", D_MODEL, HEADS), torch.ones(2, HEADS, 3, DH)
    plain, _ = pe.rotate(q, q, torch.arange(3), torch.arange(3))
    held, _ = scaled_rotate(pe, torch.tensor([1.0, 2.5]), q, q, torch.arange(3), torch.arange(3))
    assert torch.equal(plain, q) and torch.equal(held[1], 2.5 * q[1]) and torch.equal(held[0], q[0])
    assert pe.length_factor is None  # after the block, as trained again


def test_a_model_holds_each_sentences_factor_in_every_scheme_inside_a_combination():
    """``rope+t5`` under PI: the combination's rotary part gets each sentence's factor during the
    forward pass — the whole model's output equals the RoPE part turned by p / s — and none after it."""
    model = Transformer(model_cfg("rope+t5", "pi", n_source=4), 50, 50).eval()
    seen = []
    rope = model.encoder_pe.parts[0]
    real = rope.rotate

    def record(q, k, q_pos, k_pos):
        seen.append(rope.length_factor)
        return real(q, k, q_pos, k_pos)

    rope.rotate = record
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12], [5, 6, 7, 0, 0, 0, 0, 0]])
    with torch.no_grad():
        model.encode(src)
    # s = max(1, source tokens / 4): 8 real tokens -> 2, 3 -> 1
    assert len(seen) == len(model.encoder_layers) and all(torch.equal(f, torch.tensor([2.0, 1.0])) for f in seen)
    assert rope.length_factor is None and model.encoder_pe.length_factor is None
