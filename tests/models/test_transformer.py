"""The Transformer with every positional scheme: cache parity, masking, gradients, dtypes, learning."""
from __future__ import annotations

import pytest
import torch

from experiment.config import load_config
from models.positional import SCHEMES
from models.transformer import Transformer
from tests.conftest import ROOT

ALL = list(SCHEMES) + ["learnable+t5", "sinusoidal+rope"]
PAD = 0


def tiny(name: str, *extra: str, vocab: int = 40, seed: int = 0) -> Transformer:
    cfg = load_config(None, [f"model.positional.name={name}", "model.d_model=32", "model.n_heads=4",
                             "model.d_ff=64", "model.n_encoder_layers=2", "model.n_decoder_layers=2",
                             "model.positional.max_positions=64", *extra]).model
    torch.manual_seed(seed)
    model = Transformer(cfg, vocab, vocab, pad_id=PAD, joint_vocab=True)
    with torch.no_grad():  # non-trivial values for zero-initialised PE parameters (XL's u, v)
        for n, p in model.named_parameters():
            if "_pe." in n:
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def batch(seed=1, b=3, s=7, t=6, vocab=40):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (b, s), generator=g)
    src[1, 5:] = PAD
    src[2, 3:] = PAD
    return src, torch.randint(4, vocab, (b, t), generator=g)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_forward(name, norm_first):
    assert_cached_decoding_equals_full_forward(tiny(name, f"model.norm_first={str(norm_first).lower()}"))


def assert_cached_decoding_equals_full_forward(model: Transformer) -> None:
    """Step by step from the cache, and two tokens at once after a prefix, the logits of the whole forward."""
    src, tgt = batch()
    with torch.no_grad():
        full = model(src, tgt)
        memory = model.encode(src)
        cache, steps = model.start_decoding(memory), []
        for t in range(tgt.size(1)):
            out = model.decode(tgt[:, t:t + 1], cache)
            cache = out.cache
            steps.append(out.logits)
        # two tokens at once after a prefix also agrees
        prefix = model.decode(tgt[:, :2], model.start_decoding(memory)).cache
        rest = model.decode(tgt[:, 2:4], prefix).logits
    assert cache.length == tgt.size(1)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
    assert torch.allclose(rest, full[:, 2:4], atol=1e-5)


# the options of 2025-26 that act inside attention: hybrid NoPE layers (a state-carrying scheme too),
# Scalable-Softmax (n grows with each decoding step), learned rotary frequencies
OPTIONS_2026 = [("rope", "model.positional.nope_every=2"), ("fox", "model.positional.nope_every=2"),
                ("rope", "model.softmax=ssmax"), ("alibi", "model.softmax=ssmax"),
                ("rope", "model.positional.rope.learn_frequencies=true")]


@pytest.mark.parametrize("name,option", OPTIONS_2026)
def test_cached_decoding_equals_full_forward_with_the_2026_options(name, option):
    model = tiny(name, option)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "ssmax" in n:  # each head its own s
                p.add_(torch.randn_like(p) * 0.1)
    assert_cached_decoding_equals_full_forward(model)


def test_cache_reorder_selects_rows():
    model = tiny("rope")
    src, tgt = batch()
    with torch.no_grad():
        cache = model.decode(tgt[:, :3], model.start_decoding(model.encode(src))).cache
        assert cache.memory.states is None  # released once the cross-attention K/V are cached
        index = torch.tensor([2, 2, 0])
        step = model.decode(tgt[index, 3:4], cache.reorder(index)).logits
        full = model(src[index], tgt[index, :4])
    assert torch.allclose(step[:, 0], full[:, 3], atol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_padding_never_changes_real_tokens(name):
    model = tiny(name)
    src, tgt = batch()
    padded_src = torch.cat([src, torch.full((3, 4), PAD)], 1)
    padded_tgt = torch.cat([tgt, torch.full((3, 3), PAD)], 1)
    with torch.no_grad():
        base = model(src, tgt)
        more = model(padded_src, padded_tgt)
        mem_a = model.encode(src).states
        mem_b = model.encode(padded_src).states
    real = src != PAD
    assert torch.allclose(mem_a[real], mem_b[:, :7][real], atol=1e-5)
    assert torch.allclose(base, more[:, :6], atol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_decoder_is_causal(name):
    model = tiny(name)
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4:] = 5
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("name", ALL)
def test_gradients_reach_every_positional_parameter(name):
    model = tiny(name).train()
    src, tgt = batch()
    model(src, tgt).logsumexp(-1).mean().backward()
    pe_params = {n: p for n, p in model.named_parameters() if "_pe." in n}
    if name in ("none", "sinusoidal", "alibi", "nezha", "rope", "xpos", "sinusoidal+rope", "shape", "cape",
                "randomized", "p_rope"):  # randomized: over sinusoidal by default
        assert not pe_params
    else:
        assert pe_params
    for n, p in pe_params.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, n


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_forward_in_float32_and_bfloat16(name, dtype):
    model = tiny(name).to(dtype)
    src, tgt = batch()
    with torch.no_grad():
        out = model(src, tgt)
    assert out.dtype == dtype and out.shape == (3, 6, 40) and torch.isfinite(out).all()


def test_none_encoder_is_permutation_equivariant_and_others_are_not():
    src, _ = batch()
    src = src[:1, :5]
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        none, sin = tiny("none"), tiny("sinusoidal")
        assert torch.allclose(none.encode(src[:, perm]).states, none.encode(src).states[:, perm], atol=1e-5)
        assert not torch.allclose(sin.encode(src[:, perm]).states, sin.encode(src).states[:, perm], atol=1e-3)


def test_attention_weights_on_request():
    model = tiny("t5")
    src, tgt = batch()
    with torch.no_grad():
        encoded = model.encode(src, need_weights=True)
        decoded = model.decode(tgt, model.start_decoding(encoded), need_weights=True)
        enc_w, dec_w, logits = encoded.weights, decoded.weights, decoded.logits
    assert model.encode(src).weights is None and model.decode(tgt, model.start_decoding(encoded)).weights is None
    assert len(enc_w) == 2 and enc_w[0].shape == (3, 4, 7, 7)
    assert dec_w["cross"][1].shape == (3, 4, 6, 7) and dec_w["decoder"][0].shape == (3, 4, 6, 6)
    assert torch.allclose(enc_w[0].sum(-1), torch.ones(3, 4, 7), atol=1e-5)
    assert dec_w["cross"][0][1, :, :, 5:].abs().max() == 0  # source padding gets no weight
    assert dec_w["decoder"][0][:, :, 0, 1:].abs().max() == 0  # no look-ahead
    assert torch.allclose(logits, model(src, tgt), atol=1e-5)


def test_embeddings_are_tied_with_a_joint_vocabulary():
    model = tiny("sinusoidal")
    assert model.src_embed.weight is model.tgt_embed.weight is model.output.weight
    cfg = load_config(None, ["model.tie_embeddings=false", "model.d_model=16", "model.n_heads=2"]).model
    untied = Transformer(cfg, 30, 20)
    assert untied.output.weight is not untied.tgt_embed.weight and untied.output.out_features == 20
    assert untied.src_embed.weight[PAD].abs().sum() == 0


ORDER_LENGTH, ORDER_VOCAB, MARK = 6, 20, 4  # tokens 5..19, distinct within a sequence


def order_batch(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy a sequence of distinct tokens: source [MARK, x_1..x_6], target x_1..x_6 -> (src, tgt).

    Without positions the encoder is permutation-equivariant (its states are a function of the
    token and the bag of tokens), so nothing tells the decoder which source token comes next:
    with teacher forcing its best is to guess among the tokens not yet copied, a token accuracy
    of at most (1/6 + 1/5 + ... + 1/1) / 6 = 0.408. Any scheme that encodes order can do 1.0;
    the mark gives symmetric relative schemes (ALiBi, KERPLE: |j - i| cannot tell left from
    right) the sequence's start.
    """
    tokens = torch.stack([torch.randperm(ORDER_VOCAB - MARK - 1, generator=g)[:ORDER_LENGTH] + MARK + 1
                          for _ in range(n)])
    return torch.cat([torch.full((n, 1), MARK), tokens], 1), tokens


def teacher_forced(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    return model(src, torch.cat([torch.full((tgt.size(0), 1), 2), tgt[:, :-1]], 1))


@pytest.mark.parametrize("name", list(SCHEMES))
def test_word_order_is_learned_with_positions_and_not_without(name):
    """800 updates on the copy task, then token accuracy on 256 held-out sequences. Measured under
    ATEN_CPU_CAPABILITY=default and AVX-512: every positional scheme 0.90-1.00 (SHAPE 0.935,
    randomized 0.924 and RoPE 0.905 on the default kernels), ``none`` 0.41-0.42, at its bound of 0.408 up to
    sampling. The thresholds sit far from both."""
    # randomized: L sized to the toy's 7 positions (the default 128 spaces them ~20 apart, too
    # sparse for a 32-wide model to learn in so few updates).
    extra = ("model.positional.randomized.max_length=16",) if name == "randomized" else ()
    model = tiny(name, "model.dropout=0.0", *extra, vocab=ORDER_VOCAB).train()
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(800):
        src, tgt = order_batch(g, 32)
        loss = torch.nn.functional.cross_entropy(teacher_forced(model, src, tgt).flatten(0, 1), tgt.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    src, tgt = order_batch(torch.Generator().manual_seed(123), 256)
    with torch.no_grad():
        accuracy = (teacher_forced(model.eval(), src, tgt).argmax(-1) == tgt).float().mean().item()
    if name == "none":
        assert accuracy < 0.55, accuracy
    else:
        assert accuracy > 0.75, accuracy


CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_config_builds_a_model(path):
    cfg = load_config(path)
    model = Transformer(cfg.model, 500, 500, joint_vocab=True)
    assert sum(p.numel() for p in model.parameters()) > 0
    assert len(model.encoder_layers) == cfg.model.n_encoder_layers
