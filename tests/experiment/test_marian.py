"""A `transformers` Marian folder scored as a row: a tiny MarianMTModel that `transformers` creates
and saves here, with Marian's conventions (eos 0, unk 1, pad last and decoding started from it,
swish), decoded by ``nmt test`` with the suite's search gives the hypotheses `transformers`' own
``generate`` gives with the same settings."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from data.synthetic import generate_pairs
from tests.conftest import ROOT


def make_marian(folder: Path, texts: list[str], activation: str = "swish", **config) -> Path:
    """MarianTokenizer files (one SentencePiece model for both sides, Marian's ids in vocab.json)
    and a MarianMTModel of random weights, saved by `transformers` into ``folder``."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, vocab_size=120,
                                   character_coverage=1.0, bos_id=-1, eos_id=-1, unk_id=0)
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(model.getvalue())
    pieces = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(1, pieces.get_piece_size()):
        vocab[pieces.id_to_piece(i)] = len(vocab)
    pad = vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    MarianTokenizer(source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
                    vocab=str(folder / "vocab.json")).save_pretrained(folder)
    settings = dict(vocab_size=pad + 1, decoder_vocab_size=pad + 1, d_model=32, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                    activation_function=activation, max_position_embeddings=128, pad_token_id=pad, eos_token_id=0,
                    decoder_start_token_id=pad, forced_eos_token_id=None, scale_embedding=True,
                    share_encoder_decoder_embeddings=True)
    torch.manual_seed(0)
    marian = MarianMTModel(MarianConfig(**{**settings, **config}))
    with torch.no_grad():
        for name, parameter in marian.named_parameters():
            if "embed_positions" not in name:
                parameter.normal_(0.0, 0.3)  # outputs that follow the input (random, not a near-uniform start)
    marian.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[str]]:
    return generate_pairs(300, 3, 9, seed=0)


def generated(folder: Path, sources: list[str], limits: list[int], beam: int) -> list[str]:
    """`transformers`' own decoding: ``generate`` per sentence, at most ``limits[i]`` tokens, pad never
    generated, length penalty 0 with the suite's first_k rule (early_stopping=True)."""
    from transformers import MarianMTModel, MarianTokenizer

    tok, model = MarianTokenizer.from_pretrained(folder), MarianMTModel.from_pretrained(folder).eval()
    out = []
    for source, limit in zip(sources, limits):
        ids = model.generate(**tok([source], return_tensors="pt"), num_beams=beam, do_sample=False,
                             early_stopping=beam > 1, length_penalty=0.0, max_new_tokens=limit,
                             bad_words_ids=[[tok.pad_token_id]])
        out.append(tok.decode(ids[0], skip_special_tokens=True))
    return out


def test_nmt_test_scores_a_marian_folder_with_the_hypotheses_transformers_generates(corpus, tmp_path):
    from experiment.trained import load_run
    from search.greedy import max_lengths

    folder = make_marian(tmp_path / "opus-mt-tiny", corpus[0] + corpus[1])
    sources, references = corpus[0][:40], corpus[1][:40]
    (tmp_path / "src.fr").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    for beam in (1, 3):
        done = subprocess.run([sys.executable, "-m", "nmt", "test", "--run", str(folder), "--src",
                               str(tmp_path / "src.fr"), "--ref", str(tmp_path / "ref.en"), "--name", f"beam{beam}",
                               "--beam", str(beam), "--stopping", "first_k", "--len-penalty", "0", "--engine", "torch"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        record = json.loads((folder / "eval" / f"beam{beam}" / "results.json").read_text(encoding="utf-8"))
        assert record["n_sentences"] == 40 and record["decode"]["beam"] == beam
        assert record["decode"]["len_penalty"] == 0.0 and record["decode"]["stopping"] == "first_k"
        ours = (folder / "eval" / f"beam{beam}" / "hyps.txt").read_text(encoding="utf-8").splitlines()
        run = load_run(folder, "best", "cpu")
        ids = run.tokenizer.encode_src(sources)
        limits = max_lengths(torch.tensor([len(s) + 1 for s in ids]), run.cfg.decode.max_len_a,
                             run.cfg.decode.max_len_b).tolist()
        theirs = generated(folder, sources, limits, beam)
        assert len(set(ours)) >= 20  # outputs that depend on the input
        assert ours == theirs, beam


def test_the_marian_model_loads_as_a_run_with_its_logits(corpus, tmp_path):
    from transformers import MarianMTModel

    from experiment.trained import load_run

    folder = make_marian(tmp_path / "m", corpus[0] + corpus[1])
    run = load_run(folder, "best", "cpu")
    tok = run.tokenizer
    assert (run.cfg.model.activation, run.cfg.model.norm_first, run.cfg.tokenizer.type) == ("silu", False, "pretrained")
    assert tok.bos_id == tok.pad_id == tok.src_vocab_size - 1 and tok.eos_id == 0  # Marian's conventions, kept
    ids = tok.encode_src(corpus[0][:6])
    width = max(len(s) for s in ids) + 1
    src = torch.tensor([s + [tok.eos_id] + [tok.pad_id] * (width - len(s) - 1) for s in ids])
    tgt = torch.tensor([[tok.bos_id] + t[:5] + [tok.pad_id] * (5 - len(t[:5])) for t in tok.encode_tgt(corpus[1][:6])])
    theirs = MarianMTModel.from_pretrained(folder).eval()
    with torch.no_grad():
        ours = run.model(src, tgt)
        expected = theirs(input_ids=src, attention_mask=src.ne(tok.pad_id), decoder_input_ids=tgt).logits
    assert ours.abs().max() > 1.0 and (ours - expected).abs().max().item() <= 1e-5


@pytest.mark.parametrize("change, words", [({"scale_embedding": False}, "scale_embedding=false"),
                                            ({"decoder_ffn_dim": 32}, "encoder_ffn_dim != decoder_ffn_dim"),
                                            ({"activation_function": "tanh"}, "activation_function=tanh")])
def test_a_marian_model_the_suite_cannot_compute_is_refused_in_one_line(corpus, tmp_path, change, words):
    folder = make_marian(tmp_path / "m", corpus[0] + corpus[1], **change)
    done = subprocess.run([sys.executable, "-m", "nmt", "translate", "--run", str(folder), "le chat"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {folder}: a Marian model with {words} (")
    assert lines[0].endswith("has no form in the suite's Transformer")


def test_a_marian_folder_is_a_row_of_a_comparison_beside_the_suites_runs(runs, corpus, tmp_path):
    import shutil

    from experiment.trained import load_run

    folder = make_marian(tmp_path / "opus-mt-tiny", corpus[0] + corpus[1])
    run_dir = tmp_path / "sin1"
    shutil.copytree(runs["sin1"], run_dir)
    sources, references = corpus[0][:30], corpus[1][:30]
    (tmp_path / "src.fr").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    decoding = load_run(run_dir, "best", "cpu").cfg.decode  # the Marian row decoded as the suite's run is
    for row in (run_dir, folder):
        done = subprocess.run([sys.executable, "-m", "nmt", "test", "--run", str(row), "--src", str(tmp_path / "src.fr"),
                               "--ref", str(tmp_path / "ref.en"), "--name", "grammar", "--beam", "2", "--set",
                               f"decode.max_len_a={decoding.max_len_a}", f"decode.max_len_b={decoding.max_len_b}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    compared = subprocess.run([sys.executable, "-m", "nmt", "test", "--compare", str(run_dir), str(folder), "--testset",
                               "grammar", "--allow-mixed-arithmetic"], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert compared.returncode == 0, compared.stderr
    rows = {line.split("|")[1].strip(): line for line in compared.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"sinusoidal", "marian:opus-mt-tiny"}
    assert rows["sinusoidal"].rstrip(" |").endswith("—")  # the suite's run is the baseline, the Marian row tested
    record = json.loads((folder / "eval" / "grammar" / "results.json").read_text(encoding="utf-8"))
    assert f"| {record['bleu']:.2f} |" in rows["marian:opus-mt-tiny"]
