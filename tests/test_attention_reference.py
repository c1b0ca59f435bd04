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
from tests.reference import reference_attention, scheme_terms

# Small tables and thresholds so that every branch of every formula is reached by 7 positions:
# clipped distances (shaw, nezha, deberta), logarithmic buckets (t5), positions past FIRE's L.
OPTIONS = ["model.positional.shaw.max_distance=2", "model.positional.nezha.max_distance=2",
           "model.positional.deberta.max_distance=3", "model.positional.t5.num_buckets=8",
           "model.positional.t5.max_distance=6", "model.positional.fire.threshold_init=3.0",
           "model.positional.xpos.scale_base=4.0", "model.positional.rope.base=50.0"]
CASES = [(name, ()) for name in SCHEMES] + [
    ("randomized", ("model.positional.randomized.base=t5",)),
    ("randomized", ("model.positional.randomized.base=xpos",)),
    ("rope+t5", ()),
    ("shaw", ("model.positional.shaw.values=false",)),
]
IDS = [name + "".join(f"[{e.split('.')[-1]}]" for e in extra) for name, extra in CASES]
D, H, B = 32, 4, 3
TOLERANCE = dict(atol=2e-5, rtol=1e-4)  # float32 model against the float64 reference


def setup(name: str, extra: tuple[str, ...], kind: str, seed: int = 0):
    cross_attention = "randomized" not in name  # randomized refuses positions in cross-attention
    cfg = load_config(None, [f"model.positional.name={name}", f"model.d_model={D}", f"model.n_heads={H}",
                             f"model.positional.cross_attention={str(cross_attention).lower()}",
                             *OPTIONS, *extra]).model
    torch.manual_seed(seed)
    pe = build_positional(cfg, kind).eval()
    att = MultiHeadAttention(D, H, cross=kind == "cross").eval()
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
        for t in range(5):  # decoding: one query at a time over the cached memory keys/values
            step, _, _ = att(x[:, t:t + 1], pe, torch.tensor([t]), torch.arange(7), memory=memory,
                             key_padding_mask=pad, past=kv, need_weights=need_weights)
            torch.testing.assert_close(step.double(), want[:, t:t + 1], **TOLERANCE)


def test_every_registered_scheme_has_a_reference():
    """A new scheme cannot join the registry without a reference of its own here."""
    assert {name for name, _ in CASES} >= set(SCHEMES)
