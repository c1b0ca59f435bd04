"""Data sources wired through the config: synthetic, parallel_text (Multi30k), iwslt2017 (WIT3)."""
from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest

from data.corpus import load_corpus, split_names
from experiment.config import load_config
from tests.conftest import ROOT
from utils.errors import ConfigError, DataError


def synthetic_cfg(**sizes):
    overrides = ["data.source=synthetic", "data.test_splits=[test, test_long]"]
    for split, (n, lo, hi) in sizes.items():
        overrides.append(f"data.synthetic.{split}={{size: {n}, min_words: {lo}, max_words: {hi}}}")
    return load_config(None, overrides)


def test_synthetic_splits_have_their_own_sizes_and_lengths():
    cfg = synthetic_cfg(train=(200, 3, 8), validation=(20, 3, 8), test=(30, 3, 8), test_long=(25, 20, 30))
    corpus = load_corpus(cfg.data)
    assert list(corpus) == split_names(cfg.data) == ["train", "validation", "test", "test_long"]
    assert [len(s) for s in corpus.values()] == [200, 20, 30, 25]
    assert all(3 <= len(s.split()) <= 8 for s in corpus["train"].src)
    assert all(20 <= len(s.split()) <= 30 for s in corpus["test_long"].src)
    # splits differ from each other and are reproducible by data.seed
    assert set(corpus["train"].src[:20]) != set(corpus["test"].src[:20])
    again = load_corpus(cfg.data)
    assert again["test"].src == corpus["test"].src
    other = load_corpus(replace(cfg.data, seed=cfg.data.seed + 1))
    assert other["test"].src != corpus["test"].src


def test_unknown_synthetic_split_is_a_config_error():
    cfg = load_config(None, ["data.source=synthetic", "data.test_splits=[nope]"])
    with pytest.raises(ConfigError, match="nope"):
        load_corpus(cfg.data)


def write_gz(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def test_parallel_text_drops_empty_pairs_from_training_only(tmp_path, monkeypatch):
    write_gz(tmp_path / "train.fr.gz", ["un chat", "", "deux chiens"])
    write_gz(tmp_path / "train.en.gz", ["a cat", "nothing", "two dogs"])
    (tmp_path / "val.fr").write_text("bonjour\n\n", encoding="utf-8")
    (tmp_path / "val.en").write_text("hello\n\n", encoding="utf-8")
    monkeypatch.setenv("MY_DATA", str(tmp_path))
    cfg = load_config(None, ["data.source=parallel_text", "data.dir=$MY_DATA", "data.valid_split=val",
                             "data.test_splits=[val]"])
    corpus = load_corpus(cfg.data)
    assert corpus["train"].src == ["un chat", "deux chiens"]
    assert corpus["train"].tgt == ["a cat", "two dogs"]
    assert corpus["val"].src == ["bonjour", ""]  # references stay whole


def test_parallel_text_errors_name_the_problem(tmp_path, monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    cfg = load_config(None, ["data.source=parallel_text", "data.dir=$NOT_SET_ANYWHERE"])
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
        load_corpus(cfg.data)
    write_gz(tmp_path / "train.fr.gz", ["a", "b"])
    write_gz(tmp_path / "train.en.gz", ["a"])
    cfg = load_config(None, ["data.source=parallel_text", f"data.dir={tmp_path}"])
    with pytest.raises(DataError, match="train.fr.gz"):
        load_corpus(cfg.data, ["train"])
    with pytest.raises(DataError, match="validation"):
        load_corpus(cfg.data, ["validation"])


def test_an_unset_corpus_variable_falls_back_to_the_folder_make_data_fills(tmp_path, monkeypatch):
    """The order a Multi30k config's data.dir ($MULTI30K_DIR) is found in: the variable's folder, else
    datasets/multi30k-fr-en where the command runs (the checkout's root, where `make data` puts it);
    neither: one line naming both and the command that fixes it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MULTI30K_DIR", "")  # empty counts as not set
    cfg = load_config(ROOT / "configs" / "multi30k" / "base.yaml")
    with pytest.raises(ConfigError) as err:
        load_corpus(cfg.data, ["train"])
    message = str(err.value)
    assert "\n" not in message and "MULTI30K_DIR is not set" in message and "multi30k-fr-en" in message
    assert "run `make data`" in message and "export MULTI30K_DIR=DIR" in message
    fallback = tmp_path / "datasets" / "multi30k-fr-en"
    fallback.mkdir(parents=True)
    write_gz(fallback / "train.fr.gz", ["un chat"])
    write_gz(fallback / "train.en.gz", ["a cat"])
    assert load_corpus(cfg.data, ["train"])["train"].src == ["un chat"]
    named = tmp_path / "elsewhere"
    named.mkdir()
    write_gz(named / "train.fr.gz", ["deux chiens"])
    write_gz(named / "train.en.gz", ["two dogs"])
    monkeypatch.setenv("MULTI30K_DIR", str(named))  # the variable, where set, comes first
    assert load_corpus(cfg.data, ["train"])["train"].src == ["deux chiens"]


def test_multi30k_config_reads_every_split(multi30k_dir, monkeypatch):
    monkeypatch.setenv("MULTI30K_DIR", str(multi30k_dir))
    cfg = load_config(ROOT / "configs" / "multi30k" / "base.yaml")
    corpus = load_corpus(cfg.data)
    sizes = {name: len(split) for name, split in corpus.items()}
    assert sizes == {"train": 29000, "val": 1014, "test_2016_flickr": 1000, "test_2017_flickr": 1000}
    assert corpus["val"].src[0] and corpus["val"].tgt[0]


def test_iwslt2017_reads_a_wit3_folder(tmp_path):
    root = tmp_path / "fr-en"
    root.mkdir()
    (root / "train.tags.fr-en.fr").write_text(
        "<url>http://x</url>\n<talkid>1</talkid>\nBonjour.\nMerci.\n", encoding="utf-8")
    (root / "train.tags.fr-en.en").write_text(
        "<url>http://x</url>\n<talkid>1</talkid>\nHello.\nThanks.\n", encoding="utf-8")
    for name, (fr, en) in {"dev2010": ("Oui.", "Yes."), "tst2010": ("Non.", "No."),
                           "tst2011": ("Peut-être.", "Maybe.")}.items():
        for lang, text in (("fr", fr), ("en", en)):
            (root / f"IWSLT17.TED.{name}.fr-en.{lang}.xml").write_text(
                f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<srcset setid="x" srclang="fr">\n'
                f'<doc docid="1" genre="lectures">\n<seg id="1"> {text} </seg>\n</doc>\n</srcset>\n</mteval>\n',
                encoding="utf-8")
    cfg = load_config(None, ["data.source=iwslt2017", f"data.dir={tmp_path}",
                             "data.test_splits=[tst2010, test]"])
    corpus = load_corpus(cfg.data)
    assert corpus["train"].src == ["Bonjour.", "Merci."] and corpus["train"].tgt == ["Hello.", "Thanks."]
    assert corpus["validation"].tgt == ["Yes."]
    assert corpus["test"].src == ["Non.", "Peut-être."]
    cfg = load_config(None, ["data.source=iwslt2017", f"data.dir={tmp_path}", "data.test_splits=[tst2014]"])
    with pytest.raises(ConfigError, match="tst2014"):
        load_corpus(cfg.data)


@pytest.mark.parametrize("cap, side", [("max_src_words", 0), ("max_tgt_words", 1)])
def test_a_word_cap_filters_training_and_validation_by_its_side_but_never_test(cap, side):
    cfg = synthetic_cfg(train=(300, 3, 12), validation=(40, 3, 12), test=(50, 3, 12), test_long=(10, 16, 20))
    whole = load_corpus(cfg.data)
    setattr(cfg.data, cap, 7)
    cut = load_corpus(cfg.data)
    for split in ("train", "validation"):
        kept = [pair for pair in zip(whole[split].src, whole[split].tgt) if len(pair[side].split()) <= 7]
        assert list(zip(cut[split].src, cut[split].tgt)) == kept and 0 < len(kept) < len(whole[split])
    for split in ("test", "test_long"):
        assert (cut[split].src, cut[split].tgt) == (whole[split].src, whole[split].tgt)


def test_both_word_caps_hold_together():
    cfg = synthetic_cfg(train=(300, 3, 12), validation=(40, 3, 12), test=(50, 3, 12), test_long=(10, 16, 20))
    cfg.data.max_tgt_words = 7
    cut = load_corpus(cfg.data)
    cfg.data.max_src_words = 6  # both caps: a pair must pass each
    both = load_corpus(cfg.data)
    assert all(len(s.split()) <= 6 and len(t.split()) <= 7 for s, t in zip(both["train"].src, both["train"].tgt))
    assert len(both["train"].src) < len(cut["train"].src)


def test_a_source_registered_in_SOURCES_is_what_data_source_accepts(monkeypatch):
    """``data.source`` takes exactly the names of ``data.corpus.SOURCES`` (the config's choices are read off
    the registry, not written a second time): a loader added there is selected by its name and loads,
    and a name not there is refused in one line that lists the registered ones."""
    from data import corpus

    def reversed_words(cfg, splits):
        return {name: (["a b c", "d e"], ["c b a", "e d"]) for name in splits}

    with pytest.raises(ConfigError, match="data.source.*one of 'synthetic', 'parallel_text', 'iwslt2017', 'hf'"):
        load_config(None, ["data.source=reversed_words"])
    monkeypatch.setitem(corpus.SOURCES, "reversed_words", reversed_words)
    cfg = load_config(None, ["data.source=reversed_words", "data.test_splits=[test]"])
    assert cfg.data.source == "reversed_words"
    assert list(load_corpus(cfg.data, ["test"])["test"].src) == ["a b c", "d e"]
