"""Tokenizers: SentencePiece round trips, fixed ids, save/load, cache; pretrained HF offline."""
from __future__ import annotations

import gzip
import random

import pytest

import tokenizer.sentencepiece_tokenizer as sp_module
from tokenizer import build_tokenizer, load_tokenizer
from tokenizer.config import TokenizerConfig
from utils.errors import ConfigError

FR_WORDS = ("l'homme d'aujourd'hui mange à côté où ça été très élève garçon fenêtre forêt noël "
            "qu'il n'est pas ôter cœur « bonjour » 10 h 30 , . ? ! ; : déjà voilà crème brûlée").split()
EN_WORDS = ("the man's cat isn't here today , . ? ! ; : it's 10 o'clock don't we're "
            "children \"quoted\" words café naïve").split()


def corpus(words, n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(n)]


SRC, TGT = corpus(FR_WORDS, 3000, 0), corpus(EN_WORDS, 3000, 1)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("joint", [True, False])
def test_sentencepiece_round_trip_and_fixed_ids(model_type, joint):
    cfg = TokenizerConfig(model_type=model_type, vocab_size=200, joint=joint)
    tok = build_tokenizer(cfg, SRC, TGT, cache_dir=None)
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    unseen_src, unseen_tgt = corpus(FR_WORDS, 100, 5), corpus(EN_WORDS, 100, 6)
    for texts, enc, dec in ((unseen_src, tok.encode_src, tok.decode_src), (unseen_tgt, tok.encode_tgt, tok.decode_tgt)):
        ids = enc(texts)
        assert [dec(i) for i in ids] == texts
        assert not {0, 2, 3} & {i for seq in ids for i in seq}
    assert tok.joint is joint
    if joint:
        assert tok.encode_src(["la fenêtre"]) == tok.encode_tgt(["la fenêtre"])
        assert tok.src_vocab_size == tok.tgt_vocab_size
    assert tok.tgt_pieces(tok.encode_tgt(["the cat"])[0])[0].startswith("▁")


def test_save_and_load_give_identical_encodings(tmp_path):
    tok = build_tokenizer(TokenizerConfig(vocab_size=150, joint=False), SRC, TGT, cache_dir=None)
    tok.save(tmp_path / "tok")
    again = load_tokenizer(tmp_path / "tok")
    assert again.encode_src(SRC[:50]) == tok.encode_src(SRC[:50])
    assert again.encode_tgt(TGT[:50]) == tok.encode_tgt(TGT[:50])
    assert again.fingerprint() == tok.fingerprint() and again.joint is False


def test_cache_hit_and_miss(tmp_path, monkeypatch):
    cfg = TokenizerConfig(vocab_size=150)
    first = build_tokenizer(cfg, SRC, TGT, cache_dir=tmp_path)
    entries = list((tmp_path / "tokenizers").iterdir())
    assert len(entries) == 1 and not [p for p in entries if p.name.startswith(".tmp")]

    def no_training(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(sp_module, "train_model", no_training)
    again = build_tokenizer(cfg, SRC, TGT, cache_dir=tmp_path)
    assert again.fingerprint() == first.fingerprint()
    with pytest.raises(AssertionError, match="cache"):
        build_tokenizer(TokenizerConfig(vocab_size=151), SRC, TGT, cache_dir=tmp_path)
    with pytest.raises(AssertionError, match="cache"):
        build_tokenizer(cfg, SRC[:-1], TGT[:-1], cache_dir=tmp_path)


def make_hf_tokenizer(folder):
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for line in SRC[:200] + TGT[:200] for w in line.split()})
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    raw = RawTokenizer(WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(folder))
    return vocab


@pytest.mark.parametrize("damage", ["zeroed model", "missing model", "bad meta"])
def test_a_damaged_cached_tokenizer_is_trained_again(tmp_path, caplog, damage):
    cfg = TokenizerConfig(vocab_size=150)
    first = build_tokenizer(cfg, SRC, TGT, cache_dir=tmp_path)
    (folder,) = (tmp_path / "tokenizers").iterdir()
    model = folder / "joint.model"
    if damage == "zeroed model":
        model.write_bytes(bytes(model.stat().st_size))
    elif damage == "missing model":
        model.unlink()
    else:
        (folder / "meta.json").write_text("{", encoding="utf-8")
    with caplog.at_level("WARNING"):
        again = build_tokenizer(cfg, SRC, TGT, cache_dir=tmp_path)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"][0].startswith(
        f"cached tokenizer {folder} is damaged (")
    assert again.encode_src(SRC) == first.encode_src(SRC) and again.encode_tgt(TGT) == first.encode_tgt(TGT)
    assert load_tokenizer(folder).encode_src(SRC) == first.encode_src(SRC)  # the cache entry is whole again


def test_pretrained_tokenizer_from_a_local_folder(tmp_path):
    vocab = make_hf_tokenizer(tmp_path / "hf")
    tok = build_tokenizer(TokenizerConfig(type="pretrained", name=str(tmp_path / "hf")), [], [], cache_dir=None)
    assert (tok.pad_id, tok.eos_id, tok.bos_id) == (0, 1, 0)  # no bos: decoding starts from pad
    assert tok.src_vocab_size == len(vocab) and tok.joint
    ids = tok.encode_src(["garçon mange"])[0]
    assert ids == [vocab["garçon"], vocab["mange"]]
    assert tok.decode_tgt(ids + [1, 0]) == "garçon mange"
    tok.save(tmp_path / "run_tok")
    assert load_tokenizer(tmp_path / "run_tok").encode_tgt(["the cat"]) == tok.encode_tgt(["the cat"])


def test_a_pretrained_tokenizer_with_byte_fallback_names_its_byte_pieces_unknown(tmp_path):
    """SentencePiece-style byte fallback (Llama's): a character outside the vocabulary becomes its
    UTF-8 bytes <0xNN>, never <unk>; those pieces are what the translate command counts as unknown."""
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = ["a", "à"]  # one-character words: no merges needed
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)},
             **{w: 259 + i for i, w in enumerate(words)}}
    raw = RawTokenizer(BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    raw.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(str(tmp_path / "hf"))
    tok = build_tokenizer(TokenizerConfig(type="pretrained", name=str(tmp_path / "hf")), [], [], cache_dir=None)
    assert tok.unknown_src_ids == frozenset({2, *range(3, 259)})
    ids = tok.encode_src(["à 猫"])[0]
    assert ids == [260, *(3 + b for b in "猫".encode())]  # the character's three bytes, no <unk>
    # a tokenizer without byte fallback: <unk> alone
    make_hf_tokenizer(tmp_path / "plain")
    plain = build_tokenizer(TokenizerConfig(type="pretrained", name=str(tmp_path / "plain")), [], [], cache_dir=None)
    assert plain.unknown_src_ids == frozenset({2})


def test_unreachable_pretrained_name_is_a_config_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="no-such-org/no-such-tokenizer"):
        build_tokenizer(TokenizerConfig(type="pretrained", name="no-such-org/no-such-tokenizer"), [], [], None)


def test_multi30k_joint_unigram_round_trip(multi30k_dir):
    def read(name):
        with gzip.open(multi30k_dir / name, "rt", encoding="utf-8") as f:
            return f.read().splitlines()

    tok = build_tokenizer(TokenizerConfig(vocab_size=8000), read("train.fr.gz"), read("train.en.gz"), None)
    val = read("val.fr.gz")[:200] + read("val.en.gz")[:200]
    exact = sum(tok.decode_src(ids) == s for ids, s in zip(tok.encode_src(val), val))
    assert exact >= 0.99 * len(val)
