"""Every registered scheme, trained briefly and exported to `transformers`, is the same model there:
its logits equal the suite's to 1e-5 on a padded test batch, and ``generate`` gives the suite's
greedy output on every sentence of the test split, and its beam output where the two beam searches
are defined alike: the suite's ``first_k`` rule as ``early_stopping=True``, and its length penalty in
`transformers`' form (``decode.len_penalty_form=power``: log-probability / L^alpha, alpha 1 here)."""
from __future__ import annotations

import pytest
import torch

from data.corpus import load_corpus
from experiment.decode_config import DecodeConfig
from experiment.trained import load_run
from models.positional import SCHEMES
from nmt import train
from search.greedy import max_lengths
from search.translate import translate

LOGITS_TOLERANCE = 1e-5
STEPS = 150  # enough for outputs that follow the input (checked below), a few seconds a scheme


@pytest.fixture(scope="module")
def recipe(runs) -> str:
    return str(runs["sin1"].parent / "tiny.yaml")  # the shared runs' data and tokenizer, a smaller model


def trained(recipe: str, scheme: str, folder) -> object:
    run_dir = folder / scheme
    train.main(["--config", recipe, "--run-dir", str(run_dir), "--threads", "1", "seed=1",
                f"model.positional.name={scheme}", f"train.max_steps={STEPS}", f"train.eval_every={STEPS}",
                "model.d_model=32", "model.d_ff=64"])
    return load_run(run_dir, "best", "cpu")


def exported(run, folder):
    from transformers import AutoModelForSeq2SeqLM

    import export.suite_model  # noqa: F401  registers the suite's classes with the Auto classes
    from export.huggingface import export_hf

    return AutoModelForSeq2SeqLM.from_pretrained(export_hf(run, folder / "hf")).eval()


def padded(ids: list[list[int]], eos: int, pad: int) -> torch.Tensor:
    width = max(len(s) for s in ids) + 1
    return torch.tensor([s + [eos] + [pad] * (width - len(s) - 1) for s in ids])


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_the_exported_model_gives_our_logits_greedy_and_beam_outputs(recipe, scheme, tmp_path):
    run = trained(recipe, scheme, tmp_path)
    model, tok = exported(run, tmp_path), run.tokenizer
    ids = tok.encode_src(load_corpus(run.cfg.data, ["test"])["test"].src)
    src = padded(ids, tok.eos_id, tok.pad_id)
    tgt = torch.tensor([[tok.bos_id] + t[:6] + [tok.pad_id] * (6 - len(t[:6]))
                        for t in tok.encode_tgt(load_corpus(run.cfg.data, ["test"])["test"].tgt)])
    with torch.no_grad():
        ours = run.model(src, tgt)
        theirs = model(input_ids=src, attention_mask=src.ne(tok.pad_id), decoder_input_ids=tgt).logits
    assert torch.isfinite(ours).all() and ours.abs().max() > 1.0
    assert (ours - theirs).abs().max().item() <= LOGITS_TOLERANCE

    limits = max_lengths(torch.tensor([len(s) + 1 for s in ids]), run.cfg.decode.max_len_a,
                         run.cfg.decode.max_len_b).tolist()
    for beam in (1, 3):
        settings = DecodeConfig(beam=beam, len_penalty=1.0, len_penalty_form="power", stopping="first_k",
                                max_len_a=run.cfg.decode.max_len_a, max_len_b=run.cfg.decode.max_len_b)
        suite = [h[0].tokens for h in translate(run.model, ids, tok, settings)]
        assert len({tuple(h) for h in suite}) >= len(ids) // 3  # outputs that depend on the input
        for i, (sentence, limit) in enumerate(zip(ids, limits)):
            out = model.generate(input_ids=torch.tensor([sentence + [tok.eos_id]]), num_beams=beam, do_sample=False,
                                 length_penalty=1.0, early_stopping=beam > 1, max_new_tokens=limit)[0].tolist()
            # the suite's tokens, closed by eos where the suite's search closed by eos before its limit
            expected = [tok.bos_id, *suite[i], *([tok.eos_id] if len(suite[i]) < limit else [])]
            assert out == expected, (scheme, beam, i)
