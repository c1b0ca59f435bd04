"""Every test-time length setting leaves a sentence within the training lengths as it was trained, with
the model computing its own factor (issue "length generalisation", a held-out check's finding).

PI, NTK and YaRN rescale a sentence's rotary frequencies by s = max(1, source tokens / n_train), log-n
multiplies its logits by max(1, ln n / ln n_train): both are 1 for a sentence no longer than the longest
training one, so it must decode exactly as without the setting. The other tests of these settings hand the
factor in; here the model derives it from the padded batch itself — whole pass and cached beam search, the
short sentence beside a long one (which the setting does change, so each case shows the setting is on). A
model that took the batch's longest source, counted padding, or forgot the clamp would fail here.
"""
from __future__ import annotations

import pytest
import torch

from experiment.config import load_config
from models.positional import SCHEMES
from models.transformer import Transformer
from search.beam import beam_search

PAD, BOS, EOS, VOCAB = 0, 1, 2, 24
N_SOURCE = 8  # the longest training source in tokens (n_train of the encoder and cross-attention)
N_TARGET = 24  # the longest training target: above any output beam search may write for the short sentence
SHORT, LONG = 7, 17  # real source tokens of the two sentences (the short one within N_SOURCE, the long one twice it)
BEAM, MAX_LEN_A, MAX_LEN_B = 3, 1.5, 6  # the short sentence's outputs stay within 1.5 * 7 + 6 < N_TARGET tokens

ROTARY = [name for name, scheme in SCHEMES.items() if scheme.card.scales_frequencies]
HOPE = ("p_rope", ("model.positional.p_rope.train_length=64",))  # HoPE: 2 of the 4 pairs of a head turn
CASES = ([(method, scheme, ()) for method in ("pi", "ntk", "yarn") for scheme in ROTARY]
         + [(method, *HOPE) for method in ("pi", "ntk", "yarn")]
         + [("logn", scheme, ()) for scheme in SCHEMES] + [("logn", *HOPE)])


def pair_of_models(setting: str, scheme: str, extra: tuple[str, ...]) -> tuple[Transformer, Transformer]:
    """The same weights built plain and with ``setting`` on (the run's training lengths given)."""
    overrides = ["model.d_model=32", "model.n_heads=4", "model.d_ff=64", "model.n_encoder_layers=2",
                 "model.n_decoder_layers=2", "model.dropout=0.0", f"model.positional.name={scheme}", *extra]
    on = ["model.length_scaling.logn=true"] if setting == "logn" else [f"model.length_scaling.rotary={setting}"]
    scaled_cfg = load_config(None, [*overrides, *on, f"model.length_scaling.train_source_tokens={N_SOURCE}",
                                    f"model.length_scaling.train_target_tokens={N_TARGET}"]).model
    torch.manual_seed(11)
    plain = Transformer(load_config(None, overrides).model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    scaled = Transformer(scaled_cfg, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    scaled.load_state_dict(plain.state_dict())
    return plain, scaled


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Sources (2, LONG): row 0 long, row 1 short and padded; targets (2, 12) starting with BOS."""
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, VOCAB, (2, LONG), generator=g)
    src[:, -1] = EOS
    src[1, SHORT - 1], src[1, SHORT:] = EOS, PAD
    tgt = torch.randint(3, VOCAB, (2, 12), generator=g)
    tgt[:, 0] = BOS
    return src, tgt


@pytest.mark.parametrize(("setting", "scheme", "extra"), CASES,
                         ids=[f"{s}-{n}{'-hope' if e else ''}" for s, n, e in CASES])
def test_a_sentence_within_the_training_lengths_decodes_as_trained_beside_a_long_one(setting, scheme, extra):
    plain, scaled = pair_of_models(setting, scheme, extra)
    src, tgt = batch()
    with torch.no_grad():
        want, got = plain(src, tgt), scaled(src, tgt)
        torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)  # the short sentence: as trained
        assert not torch.allclose(got[0], want[0], atol=1e-4)  # the long one: the setting acts on it
        plain_beams = beam_search(plain, src, BOS, EOS, beam=BEAM, nbest=BEAM, max_len_a=MAX_LEN_A, max_len_b=MAX_LEN_B)
        scaled_beams = beam_search(scaled, src, BOS, EOS, beam=BEAM, nbest=BEAM, max_len_a=MAX_LEN_A,
                                   max_len_b=MAX_LEN_B)
        alone = beam_search(scaled, src[1:, :SHORT], BOS, EOS, beam=BEAM, nbest=BEAM, max_len_a=MAX_LEN_A,
                            max_len_b=MAX_LEN_B)
    for beams in (scaled_beams[1], alone[0]):  # cached, beam-grouped, in the batch and alone
        assert [h.tokens for h in beams] == [h.tokens for h in plain_beams[1]]
        assert [h.log_prob for h in beams] == pytest.approx([h.log_prob for h in plain_beams[1]], abs=1e-4)
    assert max(len(h.tokens) for h in plain_beams[1]) < N_TARGET  # the outputs stayed within the training targets


def test_the_cases_cover_every_setting_and_scheme_the_length_study_applies_them_to():
    """The length studies' rotary variants name rope, xpos, p_rope, polar and hope; log-n every row."""
    assert {"rope", "xpos", "p_rope", "polar"} <= set(ROTARY)
    assert {scheme for setting, scheme, _ in CASES if setting == "logn"} == set(SCHEMES)
