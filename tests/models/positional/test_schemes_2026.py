"""The encodings of 2025-26 against their papers' equations on hand-worked cases, beside the loop
references of ``tests/reference.py`` (``test_attention.py`` runs every attention case on them).

Learned-frequency RoPE (``rope.learn_frequencies``): in one dimension LieRE's rotation exp(m A) of a
learned skew-symmetric A (Ostmeier et al. 2025), ComRoPE's commuting generators, RoPE-Mixed's
learned frequencies and GRAPE-M's commuting form all score as RoPE with learned frequencies once the
orthogonal basis of A's blocks is folded into the query and key projections."""
from __future__ import annotations

import math
import re

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


# ---------------------------------------------------------------- Scalable-Softmax (model.softmax: ssmax)

SSMAX_SCHEMES = ["none", "rope", "alibi", "shaw", "fox"]  # nothing, a rotation, a fixed bias, a value term, gates


def ssmax_setup(name: str, kind: str):
    from models.attention import MultiHeadAttention

    cfg = model_cfg(name, "model.softmax=ssmax", "model.positional.cross_attention=" +
                    str(name in ("rope", "alibi")).lower())
    torch.manual_seed(0)
    pe = build_positional(cfg, kind).eval()
    att = MultiHeadAttention(D, H, cross=kind == "cross", softmax=cfg.softmax).eval()
    with torch.no_grad():
        for p in [*pe.parameters(), *att.parameters()]:
            p.add_(torch.randn_like(p) * 0.3)
    return cfg, pe, att, att.scaling.s.detach().double().tolist()


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name", SSMAX_SCHEMES)
def test_ssmax_scales_every_logit_by_s_ln_n_of_the_keys_a_query_sees(name, need_weights):
    """Against softmax((s_h ln n) z) written in the reference: the encoder with padded rows (n: a
    row's real keys), the decoder whole and step by step (n = i + 1), cross-attention by groups."""
    from tests.reference import reference_attention, scheme_terms

    cfg, pe, att, s = ssmax_setup(name, "encoder")
    assert s != [s[0]] * H  # perturbed: each head its own s
    x, pad, pos = torch.randn(3, 7, D), torch.arange(7)[None, :] >= torch.tensor([7, 5, 2])[:, None], list(range(7))
    want, probs = reference_attention(att, scheme_terms(name, pe, cfg, "encoder", pos, pos), x, None, pos, pos, pad,
                                      causal=False, ssmax=s)
    with torch.no_grad():
        out, _, weights = att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad, need_weights=need_weights)
    torch.testing.assert_close(out.double(), want, atol=2e-5, rtol=1e-4)
    if need_weights:
        torch.testing.assert_close(weights.double(), probs, atol=2e-5, rtol=1e-4)

    cfg, pe, att, s = ssmax_setup(name, "decoder")
    x, pos = torch.randn(2, 6, D), list(range(6))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "decoder", pos, pos), x, None, pos, pos, None,
                                  causal=True, ssmax=s)
    with torch.no_grad():
        whole, _, _ = att(x, pe, torch.arange(6), torch.arange(6), causal=True, need_weights=need_weights)
        torch.testing.assert_close(whole.double(), want, atol=2e-5, rtol=1e-4)
        past = None
        for t in range(6):
            step, past, _ = att(x[:, t:t + 1], pe, torch.tensor([t]), torch.arange(t + 1), causal=True, past=past,
                                need_weights=need_weights)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], atol=2e-5, rtol=1e-4)

    cfg, pe, att, s = ssmax_setup(name, "cross")
    x, memory = torch.randn(4, 3, D), torch.randn(2, 7, D)
    pad = torch.arange(7)[None, :] >= torch.tensor([7, 4])[:, None]
    q_pos, k_pos = list(range(3)), list(range(7))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "cross", q_pos, k_pos), x,
                                  memory.repeat_interleave(2, 0), q_pos, k_pos, pad.repeat_interleave(2, 0),
                                  causal=False, ssmax=s)
    with torch.no_grad():
        grouped, _, _ = att(x, pe, torch.arange(3), torch.arange(7), memory=memory, key_padding_mask=pad,
                            need_weights=need_weights, group=2)
    torch.testing.assert_close(grouped.double(), want, atol=2e-5, rtol=1e-4)


def test_ssmax_on_the_papers_example_keeps_the_maximum_where_softmax_fades():
    """Nakanishi's Figure 1: one logit +3 among n - 1 logits of -2, s = 0.43. Softmax's maximum
    e^3 / (e^3 + (n - 1) e^-2) fades with n; SSMax's n^(3s) / (n^(3s) + (n - 1) n^(-2s)) does not
    (the model's own normaliser, read off the attention's weights)."""
    from models.attention import MultiHeadAttention
    from models.positional.base import NoPositional

    att = MultiHeadAttention(2, 1, softmax="ssmax").eval()
    pe = NoPositional("encoder", 2, 1)
    tops, fading = [], []
    for n in (10, 100, 1000):
        s = 0.43
        with torch.no_grad():
            att.scaling.s.fill_(s)
            att.qkv_proj.weight.zero_()
            att.qkv_proj.bias.zero_()
            att.qkv_proj.weight[0, 0] = math.sqrt(2.0)  # q = sqrt(2) x0, k = x1: z = q k / sqrt(2) = x0 x1
            att.qkv_proj.weight[2, 1] = 1.0
            x = torch.zeros(1, n, 2)
            x[0, :, 0] = 1.0
            x[0, :, 1] = -2.0
            x[0, -1, 1] = 3.0
            _, _, weights = att(x, pe, torch.arange(n), torch.arange(n), need_weights=True)
        top = float(weights[0, 0, 0, -1])
        assert top == pytest.approx(n ** (3 * s) / (n ** (3 * s) + (n - 1) * n ** (-2 * s)), rel=1e-4)
        tops.append(top)
        fading.append(math.exp(3) / (math.exp(3) + (n - 1) * math.exp(-2)))
    assert tops == sorted(tops) and tops[0] > 0.9  # n^(5s) / (n^(5s) + n - 1) rises with n, since 5s > 1
    assert fading == sorted(fading, reverse=True) and fading[-1] < 0.15 and tops[-1] > 0.99


def test_ssmax_refuses_log_n_scaling_and_the_export():
    with pytest.raises(ConfigError, match=r"length_scaling.logn.*false with model.softmax=ssmax"):
        load_config(None, ["model.softmax=ssmax", "model.length_scaling.logn=true",
                           "model.length_scaling.train_source_tokens=9", "model.length_scaling.train_target_tokens=9"])
    from search.ctranslate2 import check_exportable

    with pytest.raises(UserError, match=r"^model.softmax=ssmax has no form in CTranslate2") as err:
        check_exportable(load_config(None, ["model.softmax=ssmax"]).model)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- hybrid NoPE layers (model.positional.nope_every)

@pytest.mark.parametrize("every,encoder,decoder", [(2, [1, 0, 1, 0], [1, 0, 1]), (3, [1, 1, 0, 1], [1, 1, 0]),
                                                   (0, [1, 1, 1, 1], [1, 1, 1])])
def test_hybrid_layers_leave_every_kth_self_attention_without_positions(every, encoder, decoder):
    """Which module each self-attention layer receives (1: the scheme's, 0: NoPE), read off the
    layers' calls; cross-attention keeps its own module in every layer."""
    from models.positional.base import NoPositional
    from models.transformer import Transformer

    cfg = load_config(None, ["model.positional.name=rope", f"model.d_model={D}", f"model.n_heads={H}", "model.d_ff=64",
                             "model.n_encoder_layers=4", "model.n_decoder_layers=3",
                             f"model.positional.nope_every={every}"]).model
    model = Transformer(cfg, 50, 50)
    seen = {"encoder": [], "decoder": [], "cross": []}
    for layer in model.encoder_layers:
        layer.register_forward_pre_hook(lambda _, args: seen["encoder"].append(args[1]))
    def decoder_modules(_, args) -> None:
        seen["decoder"].append(args[3])
        seen["cross"].append(args[4])

    for layer in model.decoder_layers:
        layer.register_forward_pre_hook(decoder_modules)
    model(torch.randint(1, 50, (2, 7)), torch.randint(1, 50, (2, 5)))
    assert [int(pe is model.encoder_pe) for pe in seen["encoder"]] == encoder
    assert [int(pe is model.decoder_pe) for pe in seen["decoder"]] == decoder
    assert all(isinstance(pe, NoPositional) for pe in seen["encoder"] + seen["decoder"]
               if pe not in (model.encoder_pe, model.decoder_pe))
    assert all(pe is model.cross_pe for pe in seen["cross"])


def test_hybrid_layers_refuse_embedding_schemes_a_period_of_one_and_the_export():
    for name, extra in (("sinusoidal", ()), ("learnable+t5", ()),
                        ("randomized", ("model.positional.randomized.base=sinusoidal",))):
        with pytest.raises(ConfigError, match=rf"nope_every.*0 with {name.split('+')[0]} \(it adds to the embeddings"):
            load_config(None, [f"model.positional.name={name}", "model.positional.nope_every=2", *extra])
    load_config(None, ["model.positional.name=randomized", "model.positional.randomized.base=rope",
                       "model.positional.nope_every=2"])  # a rotating base acts in attention: accepted
    with pytest.raises(ConfigError, match=r"nope_every.*0 \(every layer has the scheme\) or at least 2"):
        load_config(None, ["model.positional.name=rope", "model.positional.nope_every=1"])
    from search.ctranslate2 import check_exportable

    with pytest.raises(UserError, match=r"^hybrid layers \(model.positional.nope_every\) cannot be exported"):
        check_exportable(load_config(None, ["model.positional.name=rope", "model.positional.nope_every=2"]).model)


# ---------------------------------------------------------------- FoPE (Hua et al. 2025)

def test_fope_keeps_the_frequencies_that_complete_a_period_within_the_training_length():
    from models.positional.rotary import kept_frequencies

    # base 50, Dh 8: omega = 1, 0.376, 0.141, 0.053; 2 pi / 20 = 0.314 keeps the first two
    assert kept_frequencies(8, 50.0, 20) == 2 and kept_frequencies(8, 50.0, 0) == 4
    # base 10^4, Dh 64, L 512: 10^(-4i/32) >= 2 pi / 512 while i <= 32 ln(512 / 2 pi) / ln 10^4 = 15.3
    assert kept_frequencies(64, 10000.0, 512) == 16
    assert kept_frequencies(8, 50.0, 6) == 0  # even omega_0 = 1 < 2 pi / 6: nothing rotates
    pe = build_positional(model_cfg("fope", "model.positional.fope.base=50", "model.positional.fope.train_length=6"),
                          "decoder")
    q, k = torch.randn(1, H, 3, DH), torch.randn(1, H, 4, DH)
    assert all(torch.equal(a, b) for a, b in zip(pe.rotate(q, k, torch.arange(3), torch.arange(4)), (q, k)))


def test_fope_without_harmonics_is_p_rope_on_the_kept_frequencies_and_its_coefficients_learn():
    """Clip-floor-to-zero alone (sigma 0, at the start) is p-RoPE keeping the same K pairs; the series'
    coefficients are parameters every score reaches."""
    fope = build_positional(model_cfg("fope", "model.positional.fope.base=50", "model.positional.fope.sigma=0",
                                      "model.positional.fope.train_length=20"), "encoder")
    p_rope = build_positional(model_cfg("p_rope", "model.positional.p_rope.base=50", "model.positional.p_rope.p=0.5"),
                              "encoder")
    q, k = torch.randn(2, H, 5, DH), torch.randn(2, H, 6, DH)
    for a, b in zip(fope.rotate(q, k, torch.arange(5), torch.arange(6)), p_rope.rotate(q, k, torch.arange(5), torch.arange(6))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    rq, rk = fope.rotate(q, k, torch.arange(5), torch.arange(6))
    (rq @ rk.transpose(-1, -2)).pow(2).sum().backward()
    assert bool((fope.cos_coefficients.grad != 0).any()) and bool((fope.sin_coefficients.grad != 0).any())


def test_fope_turns_a_pair_by_its_fourier_series_on_a_hand_worked_case():
    """Dh 4 (two pairs, omega = 1 and 1/sqrt(base) = 0.1 for base 100), head 0 at n = 3 with
    c = [[1, 0.5], [0.2, 1]] and s = [[1, 0], [-0.3, 1]]: pair 0's C = cos 3 + 0.2 cos 0.3 and
    S = sin 3 - 0.3 sin 0.3, the pair (1, 2) going to (C - 2 S, S + 2 C)."""
    cfg = load_config(None, ["model.positional.name=fope", "model.d_model=8", "model.n_heads=2",
                             "model.positional.fope.base=100"]).model
    pe = build_positional(cfg, "encoder")
    with torch.no_grad():
        pe.cos_coefficients[0] = torch.tensor([[1.0, 0.5], [0.2, 1.0]])
        pe.sin_coefficients[0] = torch.tensor([[1.0, 0.0], [-0.3, 1.0]])
    c = math.cos(3) + 0.2 * math.cos(0.3)
    s = math.sin(3) - 0.3 * math.sin(0.3)
    x = torch.zeros(1, 2, 1, 4)
    x[0, 0, 0, :2] = torch.tensor([1.0, 2.0])
    turned, _ = pe.rotate(x, x[..., :0, :], torch.tensor([3]), torch.arange(0))
    torch.testing.assert_close(turned[0, 0, 0, :2], torch.tensor([c - 2 * s, s + 2 * c]), atol=1e-6, rtol=0)
    # pair 1 is zero in, zero out; its series is 0.5 cos 3 + cos 0.3 and 0 sin 3 + sin 0.3
    assert torch.equal(turned[0, 0, 0, 2:], torch.zeros(2))


# ---------------------------------------------------------------- HoPE (Chen et al. 2025): p-RoPE's cut by length

def test_hope_keeps_the_pairs_with_a_period_within_the_training_length_whatever_p():
    """HoPE's rule beside p: base 50, Dh 8 has theta = 1, 0.376, 0.141, 0.053 and 2 pi / 20 = 0.314, so
    L = 20 keeps pairs 0 and 1 rotated (p = 0.5's cut) even with p = 0.1, and pairs 2, 3 as they are."""
    hope = build_positional(model_cfg("p_rope", "model.positional.p_rope.base=50", "model.positional.p_rope.p=0.1",
                                      "model.positional.p_rope.train_length=20"), "encoder")
    half = build_positional(model_cfg("p_rope", "model.positional.p_rope.base=50", "model.positional.p_rope.p=0.5"),
                            "encoder")
    q, k = torch.randn(2, H, 5, DH), torch.randn(2, H, 6, DH)
    qp, kp = torch.arange(5) + 3, torch.arange(6)
    rq, rk = hope.rotate(q, k, qp, kp)
    for a, b in zip((rq, rk), half.rotate(q, k, qp, kp)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert torch.equal(rq[..., 4:], q[..., 4:]) and torch.equal(rk[..., 4:], k[..., 4:])
    # pair 1 of a query at position 4 turned by 4 x 50^(-1/4)
    angle = 4 * 50 ** -0.25
    x1, x2 = q[..., 1, 2], q[..., 1, 3]
    torch.testing.assert_close(rq[..., 1, 2], x1 * math.cos(angle) - x2 * math.sin(angle), atol=1e-5, rtol=0)


def test_hope_on_the_length_study_keeps_six_of_thirty_two_pairs():
    """The length study's model (Dh 64, base 10^4, longest training source 34 tokens): theta_i >= 2 pi / 34
    while i <= 32 ln(34 / 2 pi) / ln 10^4 = 5.86, so pairs 0-5 rotate; L = 512 keeps 16."""
    from models.positional.p_rope import rotated_pairs

    options = load_config(None, ["model.positional.name=p_rope", "model.positional.p_rope.train_length=34"]).model
    assert rotated_pairs(options.positional.p_rope, 64) == 6
    options.positional.p_rope.train_length = 512
    assert rotated_pairs(options.positional.p_rope, 64) == 16
    options.positional.p_rope.train_length = 0  # p = 0.75 decides again
    assert rotated_pairs(options.positional.p_rope, 64) == 24
    with pytest.raises(ConfigError, match="train_length"):
        load_config(None, ["model.positional.name=p_rope", "model.positional.p_rope.train_length=-1"])


def test_fope_options_refuse_what_its_formula_cannot_take():
    for override, rule in (("base=1", "greater than 1 (else every frequency is 1)"), ("sigma=-0.1", "0 or more"),
                           ("train_length=-1", "0 (keep every frequency) or more")):
        with pytest.raises(ConfigError, match=re.escape(f"must be {rule}")):
            model_cfg("fope", f"model.positional.fope.{override}")
    assert model_cfg("fope", "model.positional.fope.base=1.5").positional.fope.base == 1.5  # just above 1 is fine


def test_fope_harmonics_start_with_spread_sigma_over_root_k_drawn_per_head():
    """The coefficients start at the identity plus N(0, sigma^2 / K): with K = 64 kept frequencies over
    4 heads (16,384 draws a matrix) their spread is 0.3 / 8; with K = 1 over 256 heads, 0.3. Each head
    draws its own."""
    torch.manual_seed(0)
    wide = build_positional(load_config(None, ["model.positional.name=fope", "model.d_model=512", "model.n_heads=4"])
                            .model, "encoder")
    for coefficients in (wide.cos_coefficients, wide.sin_coefficients):
        noise = (coefficients - torch.eye(64)).detach()
        assert abs(noise.std().item() / (0.3 / 8) - 1) < 0.05
        assert not torch.equal(noise[0], noise[1])  # not one draw shared by the heads
    one = build_positional(load_config(None, ["model.positional.name=fope", "model.d_model=512", "model.n_heads=256"])
                           .model, "encoder")  # Dh 2: one frequency
    assert abs((one.cos_coefficients - 1).detach().std().item() / 0.3 - 1) < 0.2


def test_fope_learns_only_its_coefficients_whatever_rope_s_options_say():
    """FoPE's frequencies are its own (fope.base, clipped): rope's options (learned frequencies) are
    not read, and its parameters are the two coefficient tensors alone."""
    pe = build_positional(model_cfg("fope", LEARNED), "encoder")
    assert sorted(name for name, _ in pe.named_parameters()) == ["cos_coefficients", "sin_coefficients"]


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
def test_ssmax_without_a_padding_mask_counts_every_key(need_weights):
    """No padding mask: n is the number of keys, for every row and head alike — the same output as a
    mask that hides nothing, and the reference's softmax((s_h ln 7) z)."""
    from tests.reference import reference_attention, scheme_terms

    cfg, pe, att, s = ssmax_setup("rope", "encoder")
    x, pos = torch.randn(3, 7, D), list(range(7))
    nothing_hidden = torch.zeros(3, 7, dtype=torch.bool)
    with torch.no_grad():
        plain, _, _ = att(x, pe, torch.arange(7), torch.arange(7), need_weights=need_weights)
        masked, _, _ = att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=nothing_hidden,
                           need_weights=need_weights)
    want, _ = reference_attention(att, scheme_terms("rope", pe, cfg, "encoder", pos, pos), x, None, pos, pos,
                                  nothing_hidden, causal=False, ssmax=s)
    assert plain.shape == (3, 7, D)
    torch.testing.assert_close(plain, masked, atol=1e-6, rtol=0)
    torch.testing.assert_close(plain.double(), want, atol=2e-5, rtol=1e-4)
