"""A scheme is one file and one registry line: a toy scheme defined here, registered with one line,
trains, decodes, is drawn, is refused by the CTranslate2 export with one line and is listed by the
studies through the ordinary functions, with no other change anywhere."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from analysis.pe import pe_pictures
from experiment.config import load_config
from experiment.decode_config import DecodeConfig
from experiment.trained import load_run
from models.positional import SCHEMES, distance_profile
from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from search.ctranslate2 import check_exportable, exportable_schemes
from search.translate import translate
from studies.catalog import load_studies
from tests.conftest import ROOT, TINY
from training.loop import train
from utils.errors import UserError


class ToyPositional(PositionalEncoding):
    """bias[h, i, j] = -softplus(w_h) |j - i|: ALiBi with a learned slope per head."""

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.w = nn.Parameter(torch.zeros(cfg.n_heads))

    def score_bias(self, q, k, q_pos, k_pos):
        distance = relative_positions(q_pos, k_pos).abs().to(q.dtype)
        return (-F.softplus(self.w)[:, None, None] * distance)[None]


def test_a_registered_toy_scheme_trains_decodes_and_is_drawn(tmp_path, monkeypatch):
    monkeypatch.setitem(SCHEMES, "toy", ToyPositional)  # the one registry line
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(root=ROOT, cache=tmp_path / "cache"), encoding="utf-8")
    cfg = load_config(config, ["model.positional.name=toy", "train.max_steps=30", "train.eval_every=30"])
    result = train(cfg, tmp_path / "run")
    assert result.steps == 30

    run = load_run(tmp_path / "run")
    assert isinstance(run.model.encoder_pe, ToyPositional) and isinstance(run.model.decoder_pe, ToyPositional)
    # the slopes were trained (they start at zero) and were saved with the model
    assert run.model.encoder_pe.w.abs().sum() > 0
    ids = run.tokenizer.encode_src(["Le chat regarde la femme.", "Je danse."])
    hyps = translate(run.model, ids, run.tokenizer, DecodeConfig(beam=2, nbest=2, batch_size=2))
    assert [len(h) for h in hyps] == [2, 2] and all(h[0].score >= h[1].score for h in hyps)

    written = pe_pictures(["toy"], tmp_path / "pictures", run_dir=tmp_path / "run")
    assert {p.name for p in written} == {"pe_toy_encoder_by_distance.png", "pe_toy_decoder_by_distance.png"}
    profile = distance_profile(run.model.encoder_pe, max_distance=4)
    slopes = F.softplus(run.model.encoder_pe.w.detach())
    expected = -slopes[:, None] * torch.arange(-4, 5).abs().float()[None]
    assert torch.allclose(profile.values, expected) and profile.label == "additive logit bias per head"

    # no CTranslate2 form declared: the export refuses it in one line naming the scheme
    with pytest.raises(UserError) as err:
        check_exportable(run.cfg.model)
    assert str(err.value).startswith("scheme 'toy' cannot be exported to CTranslate2") and "\n" not in str(err.value)
    # declaring one is all it takes to be offered (the registry is read when asked, not at import)
    monkeypatch.setattr(ToyPositional, "card", SchemeCard(export_form="relative_attention_bias"))
    assert "toy" in exportable_schemes()
    check_exportable(run.cfg.model)  # no longer refused
    # every study declared with `schemes: all` lists it, last (registry order)
    studies = load_studies()
    assert studies["multi30k"].schemes[-1] == studies["multi30k-best-all"].schemes[-1] == "toy"
