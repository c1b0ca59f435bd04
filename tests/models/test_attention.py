"""``MultiHeadAttention`` with every registered scheme against the reference attention written in
``tests/reference.py`` (plain arithmetic from the papers' formulas, float64): encoder
self-attention with padding, decoder self-attention over the whole sequence and step by step from
the cache, cross-attention with padding (computed and cached memory), on the fused (SDPA) path and
on the explicit path that returns the weights."""
from __future__ import annotations

import pytest
import torch

from experiment.config import load_config
from models.attention import MultiHeadAttention
from models.positional import SCHEMES, build_positional
from tests.reference import REFERENCES, reference_attention, scheme_terms

# Small tables and thresholds so that every branch of every formula is reached by 7 positions:
# clipped distances (shaw, nezha, deberta), logarithmic buckets (t5), positions past FIRE's L.
OPTIONS = ["model.positional.shaw.max_distance=2", "model.positional.nezha.max_distance=2",
           "model.positional.deberta.max_distance=3", "model.positional.t5.num_buckets=8",
           "model.positional.t5.max_distance=6", "model.positional.fire.threshold_init=3.0",
           "model.positional.xpos.scale_base=4.0", "model.positional.rope.base=50.0",
           # FoPE: frequencies 1, 0.38, 0.14, 0.05 of base 50; a 20-position training length keeps two
           "model.positional.fope.base=50.0", "model.positional.fope.train_length=20"]
CASES = [(name, ()) for name in SCHEMES] + [
    ("randomized", ("model.positional.randomized.base=t5",)),
    ("randomized", ("model.positional.randomized.base=xpos",)),
    ("randomized", ("model.positional.randomized.base=shaw",)),
    ("randomized", ("model.positional.randomized.base=deberta",)),
    ("rope+t5", ()),
    ("shaw+alibi", ()),  # a content bias, a fixed bias and a value term summed
    ("xl+t5", ()),
    ("fox+rope", ()),  # gates cached beside rotated keys; a combination splits its parts' states
    ("fox+fox", ()),  # two state-carrying parts: each gets its own slice of the cached states
    ("fox+alibi", ()),  # a bias from the gates added to a bias from positions
    ("shaw", ("model.positional.shaw.values=false",)),
    ("nezha", ("model.positional.nezha.values=false",)),
    ("rope", ("model.positional.rope.learn_frequencies=true",)),  # each head its own (perturbed) speeds
    ("fope", ("model.positional.fope.train_length=0",)),  # every frequency kept: each pair a series of four
    ("p_rope", ("model.positional.p_rope.train_length=20",)),  # HoPE: Dh 8, 2 pi / 20 keeps theta_0 = 1 alone
    ("randomized", ("model.positional.randomized.base=rope", "model.positional.rope.learn_frequencies=true")),
]
IDS = [name + "".join(f"[{e.split('.')[-1]}]" for e in extra) for name, extra in CASES]
D, H, B = 32, 4, 3
TOLERANCE = dict(atol=2e-5, rtol=1e-4)  # float32 model against the float64 reference


def setup(name: str, extra: tuple[str, ...], kind: str, seed: int = 0, kernel: str = "sdpa"):
    # schemes that do not act in cross-attention (randomized, the self-attention-only ones) refuse it there
    cross_attention = all(SCHEMES[n].card.cross_attention == "acts" for n in name.split("+"))
    cfg = load_config(None, [f"model.positional.name={name}", f"model.d_model={D}", f"model.n_heads={H}",
                             f"model.positional.cross_attention={str(cross_attention).lower()}",
                             *OPTIONS, *extra]).model
    torch.manual_seed(seed)
    pe = build_positional(cfg, kind).eval()
    att = MultiHeadAttention(D, H, cross=kind == "cross", kernel=kernel).eval()
    with torch.no_grad():  # non-trivial values everywhere (XL's u and v start at zero)
        for p in [*pe.parameters(), *att.parameters()]:
            p.add_(torch.randn_like(p) * 0.3)
    return cfg, pe, att


def padded(lengths: list[int], total: int) -> torch.Tensor:
    """(B, total) True at padding."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name,extra", CASES, ids=IDS)
def test_encoder_self_attention_matches_the_reference(name, extra, need_weights):
    cfg, pe, att = setup(name, extra, "encoder")
    x = torch.randn(B, 7, D)
    pad = padded([7, 5, 2], 7)
    pos = list(range(7))
    with torch.no_grad():
        out, _, weights = att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad, need_weights=need_weights)
    want, probs = reference_attention(att, scheme_terms(name, pe, cfg, "encoder", pos, pos), x, None, pos, pos,
                                      pad, causal=False)
    torch.testing.assert_close(out.double(), want, **TOLERANCE)
    if need_weights:
        torch.testing.assert_close(weights.double(), probs, **TOLERANCE)
    else:
        assert weights is None  # computed only when asked for (value-term schemes compute them anyway)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name,extra", CASES, ids=IDS)
def test_decoder_self_attention_matches_the_reference_whole_and_step_by_step(name, extra, need_weights):
    cfg, pe, att = setup(name, extra, "decoder")
    x = torch.randn(B, 6, D)
    pos = list(range(6))
    want, probs = reference_attention(att, scheme_terms(name, pe, cfg, "decoder", pos, pos), x, None, pos, pos,
                                      None, causal=True)
    with torch.no_grad():
        out, _, weights = att(x, pe, torch.arange(6), torch.arange(6), causal=True, need_weights=need_weights)
        torch.testing.assert_close(out.double(), want, **TOLERANCE)
        if need_weights:
            torch.testing.assert_close(weights.double(), probs, **TOLERANCE)
        # step by step from the cache: query t sees keys 0..t
        past = None
        for t in range(6):
            step, past, step_weights = att(x[:, t:t + 1], pe, torch.tensor([t]), torch.arange(t + 1), causal=True,
                                           past=past, need_weights=need_weights)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], **TOLERANCE)
            if need_weights:
                torch.testing.assert_close(step_weights.double(), probs[:, :, t:t + 1, :t + 1], **TOLERANCE)
        # two queries at once after a cached prefix of three
        _, prefix, _ = att(x[:, :3], pe, torch.arange(3), torch.arange(3), causal=True)
        two, _, _ = att(x[:, 3:5], pe, torch.arange(3, 5), torch.arange(5), causal=True, past=prefix,
                        need_weights=need_weights)
        torch.testing.assert_close(two.double(), want[:, 3:5], **TOLERANCE)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name,extra", CASES, ids=IDS)
def test_cross_attention_matches_the_reference_computed_and_cached(name, extra, need_weights):
    cfg, pe, att = setup(name, extra, "cross")
    x, memory = torch.randn(B, 5, D), torch.randn(B, 7, D)
    pad = padded([7, 4, 6], 7)
    q_pos, k_pos = list(range(5)), list(range(7))
    want, probs = reference_attention(att, scheme_terms(name, pe, cfg, "cross", q_pos, k_pos), x, memory,
                                      q_pos, k_pos, pad, causal=False)
    with torch.no_grad():
        out, kv, weights = att(x, pe, torch.arange(5), torch.arange(7), memory=memory, key_padding_mask=pad,
                               need_weights=need_weights)
        torch.testing.assert_close(out.double(), want, **TOLERANCE)
        if need_weights:
            torch.testing.assert_close(weights.double(), probs, **TOLERANCE)
        for t in range(5):  # decoding: one query at a time over the cached memory keys/values alone
            step, _, _ = att(x[:, t:t + 1], pe, torch.tensor([t]), torch.arange(7), memory=None,
                             key_padding_mask=pad, past=kv, need_weights=need_weights)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], **TOLERANCE)


@pytest.mark.parametrize("group", [2, 3])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name,extra", CASES, ids=IDS)
def test_grouped_cross_attention_matches_the_reference_computed_and_cached(name, extra, need_weights, group):
    """Beam search's form (``group``): G consecutive query rows share one memory row; each row must
    attend exactly as if it had its own copy of that memory (the reference gets the copies)."""
    cfg, pe, att = setup(name, extra, "cross")
    x, memory = torch.randn(B * group, 4, D), torch.randn(B, 7, D)
    pad = padded([7, 4, 6], 7)
    q_pos, k_pos = list(range(2, 6)), list(range(7))  # queries past position 0: offsets matter
    want, probs = reference_attention(att, scheme_terms(name, pe, cfg, "cross", q_pos, k_pos), x,
                                      memory.repeat_interleave(group, 0), q_pos, k_pos,
                                      pad.repeat_interleave(group, 0), causal=False)
    with torch.no_grad():
        out, kv, weights = att(x, pe, torch.tensor(q_pos), torch.arange(7), memory=memory, key_padding_mask=pad,
                               need_weights=need_weights, group=group)
        assert out.shape == (B * group, 4, D) and kv[0].shape[0] == B  # memory keys kept once per sentence
        torch.testing.assert_close(out.double(), want, **TOLERANCE)
        if need_weights:
            assert weights.shape == (B * group, H, 4, 7)
            torch.testing.assert_close(weights.double(), probs, **TOLERANCE)
        for t in range(4):  # decoding steps over the cached memory keys/values
            step, _, step_weights = att(x[:, t:t + 1], pe, torch.tensor([q_pos[t]]), torch.arange(7), memory=None,
                                        key_padding_mask=pad, past=kv, need_weights=need_weights, group=group)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], **TOLERANCE)
            if need_weights:
                torch.testing.assert_close(step_weights.double(), probs[:, :, t:t + 1], **TOLERANCE)


def test_every_registered_scheme_has_a_reference():
    """A new scheme cannot join the registry without a reference of its own (tests/reference.py's
    REFERENCES, keyed as SCHEMES is) and a case here."""
    assert set(REFERENCES) == set(SCHEMES)
    assert {name for name, _ in CASES} >= set(SCHEMES)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name", ["none", "alibi", "shaw"])
def test_causal_attention_with_padded_keys_hides_both(name, need_weights):
    cfg, pe, att = setup(name, (), "decoder")
    x, pad = torch.randn(B, 6, D), padded([6, 4, 2], 6)
    pos = list(range(6))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "decoder", pos, pos), x, None, pos, pos, pad,
                                  causal=True)
    with torch.no_grad():
        out, _, _ = att(x, pe, torch.arange(6), torch.arange(6), key_padding_mask=pad, causal=True,
                        need_weights=need_weights)
    torch.testing.assert_close(out.double(), want, **TOLERANCE)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name", ["none", "alibi", "t5", "fire", "shaw", "rope"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_bfloat16_autocast_stays_in_bfloat16_and_near_the_reference(name, kind, need_weights):
    """Under bf16 autocast (float32 weights, bf16 activations, as in mixed-precision training) the
    float32 biases are cast to the queries' dtype for the fused kernels and the weights come back
    from the float32 softmax in bf16: the output is bf16 and within bf16 rounding of the reference."""
    cfg, pe, att = setup(name, (), kind)
    x = torch.randn(B, 6, D)
    pos = list(range(6))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, kind, pos, pos), x, None, pos, pos, None,
                                  causal=kind == "decoder")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, _, weights = att(x, pe, torch.arange(6), torch.arange(6), causal=kind == "decoder",
                              need_weights=need_weights)
    assert out.dtype == torch.bfloat16 and (weights is None or weights.dtype == torch.bfloat16)
    torch.testing.assert_close(out.double(), want, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
def test_attention_dropout_acts_in_training_only_and_keeps_the_expectation(need_weights):
    """Default: no dropout (training equals evaluation). With p = 0.5: evaluation is the reference,
    training drops weights (outputs vary) and its mean over many draws comes back to evaluation's."""
    cfg, pe, plain = setup("alibi" if need_weights else "none", (), "encoder")
    x = torch.randn(B, 5, D)
    pos = torch.arange(5)
    with torch.no_grad():
        evaluated = plain(x, pe, pos, pos, need_weights=need_weights)[0]
        assert torch.equal(plain.train()(x, pe, pos, pos, need_weights=need_weights)[0], evaluated)
        dropping = MultiHeadAttention(D, H, dropout=0.5)
        dropping.load_state_dict(plain.state_dict())
        assert torch.equal(dropping.eval()(x, pe, pos, pos, need_weights=need_weights)[0], evaluated)
        dropping.train()
        torch.manual_seed(0)
        draws = torch.stack([dropping(x, pe, pos, pos, need_weights=need_weights)[0] for _ in range(400)])
    assert not torch.allclose(draws[0], draws[1])
    assert (draws.mean(0) - evaluated).abs().max() < 0.15 * evaluated.abs().max()


def test_defaults_and_shape_errors():
    att = MultiHeadAttention(D, H)
    assert hasattr(att, "qkv_proj") and not hasattr(att, "kv_proj")  # self-attention by default
    x = torch.randn(1, 3, D)
    pe = build_positional(load_config(None, [f"model.d_model={D}", f"model.n_heads={H}"]).model, "encoder")
    assert att(x, pe, torch.arange(3), torch.arange(3))[2] is None  # weights only on request
    with pytest.raises(ValueError, match="d_model 30 is not divisible by n_heads 4"):
        MultiHeadAttention(30, 4)


# What FlexAttention serves (a bias of positions alone, FoX's gates, a combination of such); the
# rest keep SDPA under kernel="flex" (content biases, value terms, no bias at all).
FLEX_SERVED = {("alibi", ()), ("t5", ()), ("kerple", ()), ("fire", ()), ("fox", ()), ("rope+t5", ()),
               ("randomized", ("model.positional.randomized.base=t5",))}


@pytest.mark.parametrize("name,extra", CASES, ids=IDS)
def test_flexattention_forward_matches_the_reference_where_it_serves(name, extra, monkeypatch):
    """kernel="flex" on the CPU (forward only): encoder with padding, decoder whole, step by step and
    two queries after a prefix, cross-attention with padding, each against the reference; FlexAttention
    runs exactly for the schemes it serves."""
    import models.attention_kernels

    calls = []
    real = models.attention_kernels.flex_attention
    monkeypatch.setattr(models.attention_kernels, "flex_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    cfg, pe, att = setup(name, extra, "encoder", kernel="flex")
    x, pad, pos = torch.randn(B, 7, D), padded([7, 5, 2], 7), list(range(7))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "encoder", pos, pos), x, None, pos, pos, pad,
                                  causal=False)
    with torch.no_grad():
        out, _, _ = att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad)
    torch.testing.assert_close(out.double(), want, **TOLERANCE)
    assert bool(calls) == ((name, extra) in FLEX_SERVED)

    cfg, pe, att = setup(name, extra, "decoder", kernel="flex")
    x, pad, pos = torch.randn(B, 6, D), padded([6, 4, 2], 6), list(range(6))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "decoder", pos, pos), x, None, pos, pos, None,
                                  causal=True)
    padded_want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "decoder", pos, pos), x, None, pos, pos,
                                         pad, causal=True)
    with torch.no_grad():
        torch.testing.assert_close(att(x, pe, torch.arange(6), torch.arange(6), causal=True)[0].double(), want,
                                   **TOLERANCE)
        torch.testing.assert_close(att(x, pe, torch.arange(6), torch.arange(6), causal=True,
                                       key_padding_mask=pad)[0].double(), padded_want, **TOLERANCE)
        past = None
        for t in range(6):
            step, past, _ = att(x[:, t:t + 1], pe, torch.tensor([t]), torch.arange(t + 1), causal=True, past=past)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], **TOLERANCE)
        _, prefix, _ = att(x[:, :3], pe, torch.arange(3), torch.arange(3), causal=True)
        two, _, _ = att(x[:, 3:5], pe, torch.arange(3, 5), torch.arange(5), causal=True, past=prefix)
        torch.testing.assert_close(two.double(), want[:, 3:5], **TOLERANCE)

    cfg, pe, att = setup(name, extra, "cross", kernel="flex")
    x, memory, pad = torch.randn(B, 5, D), torch.randn(B, 7, D), padded([7, 4, 6], 7)
    q_pos, k_pos = list(range(5)), list(range(7))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "cross", q_pos, k_pos), x, memory, q_pos, k_pos,
                                  pad, causal=False)
    with torch.no_grad():
        out, _, _ = att(x, pe, torch.arange(5), torch.arange(7), memory=memory, key_padding_mask=pad)
    torch.testing.assert_close(out.double(), want, **TOLERANCE)
    # beam search's form: two query rows per memory row, queries past position 0
    x, q_pos = torch.randn(B * 2, 4, D), list(range(2, 6))
    want, _ = reference_attention(att, scheme_terms(name, pe, cfg, "cross", q_pos, k_pos), x,
                                  memory.repeat_interleave(2, 0), q_pos, k_pos, pad.repeat_interleave(2, 0), causal=False)
    with torch.no_grad():
        out, _, _ = att(x, pe, torch.tensor(q_pos), torch.arange(7), memory=memory, key_padding_mask=pad, group=2)
    torch.testing.assert_close(out.double(), want, **TOLERANCE)


def test_flexattention_serves_only_its_kernel_and_never_hides_weights_or_a_length_factor(monkeypatch):
    """FlexAttention runs under kernel="flex" alone; asked for the weights, or with a length factor
    (SSMax) on the logits, the attention keeps SDPA's explicit path: weights come back, and SSMax's
    factor is applied (as the reference says)."""
    import models.attention_kernels

    calls = []
    real = models.attention_kernels.flex_attention
    monkeypatch.setattr(models.attention_kernels, "flex_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    x, pad, pos = torch.randn(B, 7, D), padded([7, 5, 2], 7), list(range(7))
    cfg, pe, att = setup("alibi", (), "encoder", kernel="sdpa")
    with torch.no_grad():
        att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad)
    assert calls == []  # a bias scheme under SDPA's kernel
    cfg, pe, att = setup("alibi", (), "encoder", kernel="flex")
    want, probs = reference_attention(att, scheme_terms("alibi", pe, cfg, "encoder", pos, pos), x, None, pos, pos, pad,
                                      causal=False)
    with torch.no_grad():
        out, _, weights = att(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad, need_weights=True)
    assert calls == [] and weights is not None
    torch.testing.assert_close(weights.double(), probs, **TOLERANCE)
    ssmax = MultiHeadAttention(D, H, kernel="flex", softmax="ssmax").eval()
    ssmax.load_state_dict({**att.state_dict(), "ssmax": torch.linspace(0.3, 0.6, H)}, strict=True)
    want, _ = reference_attention(ssmax, scheme_terms("alibi", pe, cfg, "encoder", pos, pos), x, None, pos, pos, pad,
                                  causal=False, ssmax=torch.linspace(0.3, 0.6, H).double().tolist())
    with torch.no_grad():
        out, _, _ = ssmax(x, pe, torch.arange(7), torch.arange(7), key_padding_mask=pad)
    assert calls == []
    torch.testing.assert_close(out.double(), want, **TOLERANCE)


def test_an_ssmax_checkpoint_from_before_the_scaling_module_loads_and_scales_the_same():
    """SSMax's s lives in the attention's scaling module (``scaling.s``); a checkpoint written when it was
    the attention's own parameter ``ssmax`` loads strictly into it, and the log-n and plain attention
    have no such parameter at all."""
    att = MultiHeadAttention(D, H, softmax="ssmax").eval()
    old = {("ssmax" if key == "scaling.s" else key): value for key, value in att.state_dict().items()}
    old["ssmax"] = torch.linspace(0.2, 0.7, H)
    again = MultiHeadAttention(D, H, softmax="ssmax").eval()
    again.load_state_dict(old, strict=True)
    assert torch.equal(again.scaling.s.detach(), torch.linspace(0.2, 0.7, H))
    assert "scaling.s" in again.state_dict() and "ssmax" not in again.state_dict()
    for plain in (MultiHeadAttention(D, H), MultiHeadAttention(D, H, logn_train=12)):
        assert not any("scaling" in key for key in plain.state_dict())
