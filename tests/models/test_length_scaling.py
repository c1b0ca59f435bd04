"""Test-time length settings (``model.length_scaling``). Log-n scaling: every attention's logits
times max(1, ln n / ln n_train), checked on the attention weights against that formula written
here (softmax is shift-invariant, so the scaled weights are softmax(s · log w) of the plain ones),
in encoder self-attention with padding, decoder self-attention (n grows with the position) and
cross-attention, with and without a positional bias; inputs within the training lengths decode
as trained."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.attention import MultiHeadAttention
from models.positional import build_positional
from models.transformer import Transformer
from utils.errors import ConfigError


def scaled_by_formula(plain: torch.Tensor, n: torch.Tensor, n_train: int) -> torch.Tensor:
    """softmax(s · log w) with s = max(1, ln n / ln n_train); zero weights (masked keys) stay zero."""
    s = torch.clamp(torch.log(n) / math.log(n_train), min=1.0)
    return torch.softmax(s * torch.log(plain), dim=-1)


def pair(scheme: str, kind: str, cross: bool = False, n_train: int = 3):
    """The scheme's module for ``kind`` and two attentions with the same weights, the second with
    log-n scaling at ``n_train``."""
    cfg = load_config(None, [f"model.positional.name={scheme}", "model.d_model=16", "model.n_heads=2"]).model
    pe = build_positional(cfg, kind)
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 2, cross=cross).eval()
    scaled = MultiHeadAttention(16, 2, cross=cross, logn_train=n_train).eval()
    scaled.load_state_dict(plain.state_dict())
    return pe, plain, scaled


@pytest.mark.parametrize("scheme", ["sinusoidal", "alibi", "rope"])
def test_encoder_self_attention_scales_each_row_by_its_real_length(scheme):
    pe, plain, scaled = pair(scheme, "encoder")
    x = torch.randn(2, 7, 16)
    pos = torch.arange(7)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 5:] = True  # row 1 has 5 real tokens
    with torch.no_grad():
        _, _, w_plain = plain(x, pe, pos, pos, key_padding_mask=padding, need_weights=True)
        out, _, w = scaled(x, pe, pos, pos, key_padding_mask=padding, need_weights=True)
        fused, _, _ = scaled(x, pe, pos, pos, key_padding_mask=padding)  # the SDPA path
    n = torch.tensor([7.0, 5.0])[:, None, None, None]
    assert torch.allclose(w, scaled_by_formula(w_plain, n, 3), atol=1e-5)
    assert torch.allclose(fused[0], out[0], atol=1e-5) and torch.allclose(fused[1, :5], out[1, :5], atol=1e-5)
    assert not torch.allclose(w, w_plain, atol=1e-3)  # 7 and 5 keys are past n_train = 3: it changed something


def test_decoder_self_attention_scales_each_query_by_its_position():
    pe, plain, scaled = pair("rope", "decoder")
    x = torch.randn(1, 6, 16)
    pos = torch.arange(6)
    with torch.no_grad():
        _, _, w_plain = plain(x, pe, pos, pos, causal=True, need_weights=True)
        _, kv, w = scaled(x, pe, pos, pos, causal=True, need_weights=True)
        # one cached step at position 5 sees 6 keys: the same scale as the full pass's last query
        _, _, w_step = scaled(x[:, 5:], pe, pos[5:], pos, causal=True, past=tuple(t[:, :, :5] for t in kv),
                              need_weights=True)
    n = (pos.float() + 1)[None, None, :, None]
    assert torch.allclose(w, scaled_by_formula(w_plain, n, 3), atol=1e-5)
    assert torch.allclose(w[:, :, :3], w_plain[:, :, :3], atol=1e-6)  # n <= 3: as trained
    assert torch.allclose(w_step[:, :, 0], w[:, :, 5], atol=1e-5)


def test_cross_attention_scales_by_the_source_length_grouped_or_not():
    pe, plain, scaled = pair("sinusoidal", "cross", cross=True)
    memory, x = torch.randn(2, 8, 16), torch.randn(2 * 3, 2, 16)  # 3 hypotheses a sentence
    padding = torch.zeros(2, 8, dtype=torch.bool)
    padding[0, 4:] = True
    q_pos, k_pos = torch.arange(2), torch.arange(8)
    with torch.no_grad():
        _, _, w_plain = plain(x, pe, q_pos, k_pos, memory=memory, key_padding_mask=padding, need_weights=True, group=3)
        _, _, w = scaled(x, pe, q_pos, k_pos, memory=memory, key_padding_mask=padding, need_weights=True, group=3)
    n = torch.tensor([4.0, 8.0]).repeat_interleave(3)[:, None, None, None]
    assert torch.allclose(w, scaled_by_formula(w_plain, n, 3), atol=1e-5)


def test_a_model_decodes_inputs_within_the_training_lengths_as_trained():
    overrides = ["model.d_model=32", "model.n_heads=4", "model.d_ff=64", "model.n_encoder_layers=1",
                 "model.n_decoder_layers=1", "model.positional.name=alibi"]
    plain_cfg = load_config(None, overrides).model
    scaled_cfg = load_config(None, [*overrides, "model.length_scaling.logn=true",
                                    "model.length_scaling.train_source_tokens=6",
                                    "model.length_scaling.train_target_tokens=5"]).model
    torch.manual_seed(1)
    plain = Transformer(plain_cfg, 20, 20, pad_id=0, joint_vocab=True).eval()
    scaled = Transformer(scaled_cfg, 20, 20, pad_id=0, joint_vocab=True).eval()
    scaled.load_state_dict(plain.state_dict())
    short_src, short_tgt = torch.randint(4, 20, (2, 6)), torch.randint(4, 20, (2, 5))
    long_src, long_tgt = torch.randint(4, 20, (2, 12)), torch.randint(4, 20, (2, 9))
    with torch.no_grad():
        assert torch.equal(plain(short_src, short_tgt), scaled(short_src, short_tgt))
        assert not torch.allclose(plain(long_src, long_tgt), scaled(long_src, long_tgt), atol=1e-4)
    layer = scaled.decoder_layers[0]
    assert layer.self_attn.scaling.base == pytest.approx(math.log(5))
    assert layer.cross_attn.scaling.base == pytest.approx(math.log(6))
    assert scaled.encoder_layers[0].self_attn.scaling.base == pytest.approx(math.log(6))


def test_logn_without_the_runs_training_lengths_is_refused_in_one_line():
    cfg = load_config(None, ["model.length_scaling.logn=true", "model.length_scaling.train_source_tokens=9"]).model
    with pytest.raises(ConfigError, match=r"needs the run's training lengths \(model.length_scaling.train_target_tokens "
                                          r"is 0\)"):
        Transformer(cfg, 20, 20, pad_id=0, joint_vocab=True)
