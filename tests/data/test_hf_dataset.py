"""Corpora through Hugging Face ``datasets`` (data.source: hf, and IWSLT2017 from the hub), on
local stand-ins the tests write in the hub's parquet layout and with ``save_to_disk``."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data import hf_dataset, iwslt2017
from data.config import HFDatasetSpec
from data.corpus import load_corpus
from experiment.config import load_config
from tests.conftest import ROOT
from utils.errors import DataError

SIZES = {"train": 7, "validation": 3, "test": 4}


def pair(split: str, i: int) -> dict[str, str]:
    return {"fr": f"{split} phrase {i} .", "en": f"{split} sentence {i} ."}


def hub_layout(root, config: str = "iwslt2017-fr-en", struct_fields=("en", "fr"), value=None):
    """``<root>/<config>/<split>/0000.parquet`` with a ``translation`` column of structs, as the
    hub's refs/convert/parquet revision stores IWSLT2017 (train split in two files)."""
    struct = pa.struct([(name, pa.string()) for name in struct_fields])
    for split, n in SIZES.items():
        folder = root / config / split
        folder.mkdir(parents=True)
        rows = [{k: v for k, v in pair(split, i).items() if k in struct_fields} for i in range(n)]
        if value is not None:
            rows[1]["fr"] = value
        halves = [rows[: n // 2], rows[n // 2:]] if split == "train" else [rows]
        for j, part in enumerate(halves):
            pq.write_table(pa.table({"translation": pa.array(part, type=struct)}), folder / f"{j:04d}.parquet")
    return root


def corpus(overrides, splits=("train", "validation", "test")):
    cfg = load_config(None, overrides).data
    return load_corpus(cfg, list(splits))


def test_hub_parquet_layout_loads_every_split_in_order(tmp_path):
    root = hub_layout(tmp_path / "hub")
    got = corpus(["data.source=hf", f"data.hf.name={root}", "data.hf.config=iwslt2017-fr-en",
                  f"data.cache_dir={tmp_path / 'cache'}"])
    for split, n in SIZES.items():
        assert got[split].src[:] == [pair(split, i)["fr"] for i in range(n)]  # both files, in order
        assert got[split].tgt[:] == [pair(split, i)["en"] for i in range(n)]
        assert got[split].src[1] == pair(split, 1)["fr"] and got[split].tgt[-1] == pair(split, n - 1)["en"]


def test_save_to_disk_folder_with_two_text_columns_and_a_split_map(tmp_path):
    import datasets

    datasets.DatasetDict({
        "training": datasets.Dataset.from_dict({"source": ["le chat", "un chien"], "target": ["the cat", "a dog"]}),
        "dev": datasets.Dataset.from_dict({"source": ["oui"], "target": ["yes"]}),
    }).save_to_disk(str(tmp_path / "saved"))
    got = corpus(["data.source=hf", f"data.hf.name={tmp_path / 'saved'}", "data.hf.src_column=source",
                  "data.hf.tgt_column=target", "data.hf.split_map.train=training", "data.hf.split_map.validation=dev",
                  f"data.cache_dir={tmp_path / 'cache'}"], splits=("train", "validation"))
    assert (got["train"].src[:], got["train"].tgt[:]) == (["le chat", "un chien"], ["the cat", "a dog"])
    assert (got["validation"].src, got["validation"].tgt) == (["oui"], ["yes"])


def test_iwslt2017_without_a_release_goes_through_datasets(tmp_path, monkeypatch):
    """data.source: iwslt2017 with no data.dir loads the hub dataset's converted-parquet revision
    through the same loader; here the hub id is swapped for a local folder in its layout."""
    root = hub_layout(tmp_path / "hub")
    asked = []

    def local_spec(src_lang, tgt_lang):
        spec = HFDatasetSpec(name=str(root), config=f"iwslt2017-{src_lang}-{tgt_lang}")
        asked.append(iwslt2017.hub_dataset_spec.__wrapped__(src_lang, tgt_lang))
        return spec

    local_spec.__wrapped__ = iwslt2017.hub_dataset_spec
    monkeypatch.setattr(iwslt2017, "hub_dataset_spec", local_spec)
    got = corpus(["data.source=iwslt2017", f"data.cache_dir={tmp_path / 'cache'}"])
    assert [len(got[s]) for s in SIZES] == list(SIZES.values())
    assert asked[0] == HFDatasetSpec(name="IWSLT/iwslt2017", config="iwslt2017-fr-en",
                                     revision="refs/convert/parquet")


@pytest.mark.parametrize("case, message", [
    ("no_lang", "'translation' has no 'fr' key (keys: en, de)"),
    ("null", "translation.fr is empty (null) in row 1"),
    ("numbers", "source holds int64 values, not text"),
    ("no_split", "no split 'validation'"),
    ("no_column", "has no column 'translation' (columns: source, target)"),
])
def test_bad_layouts_are_one_line_errors(tmp_path, case, message):
    import datasets

    overrides = ["data.source=hf", f"data.cache_dir={tmp_path / 'cache'}"]
    if case == "no_lang":
        root = hub_layout(tmp_path / "hub", struct_fields=("en", "de"))
        overrides += [f"data.hf.name={root}", "data.hf.config=iwslt2017-fr-en"]
    elif case == "null":
        root = hub_layout(tmp_path / "hub", value=None)
        table = pq.read_table(root / "iwslt2017-fr-en" / "validation" / "0000.parquet").to_pylist()
        table[1]["translation"]["fr"] = None
        pq.write_table(pa.Table.from_pylist(table), root / "iwslt2017-fr-en" / "validation" / "0000.parquet")
        overrides += [f"data.hf.name={root}", "data.hf.config=iwslt2017-fr-en"]
    else:
        source = [1, 2] if case == "numbers" else ["a", "b"]
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"source": source, "target": ["x", "y"]})}) \
            .save_to_disk(str(tmp_path / "saved"))
        overrides += [f"data.hf.name={tmp_path / 'saved'}"]
        if case != "no_column":
            overrides += ["data.hf.src_column=source", "data.hf.tgt_column=target"]
    with pytest.raises(DataError) as err:
        corpus(overrides, splits=("train", "validation") if case in ("no_split", "null") else ("train",))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_offline_hub_corpus_not_in_the_cache_is_a_fast_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_dataset, "hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(DataError, match=r"is not in the local cache .* cannot be reached; provide the corpus "
                                        r"as a local folder .* an unpacked WIT3 release \(data.dir\)"):
        corpus(["data.source=iwslt2017", f"data.cache_dir={tmp_path / 'cache'}"], splits=("validation",))


def test_train_data_only_on_a_local_dataset_folder(tmp_path):
    root = hub_layout(tmp_path / "hub", config="fr-en")
    done = subprocess.run([sys.executable, "train.py", "--config", "configs/synthetic/base.yaml", "--data-only",
                           "--run-dir", str(tmp_path / "run"), "data.source=hf", f"data.hf.name={root}",
                           "data.hf.config=fr-en", "data.test_splits=[test]", f"data.cache_dir={tmp_path / 'cache'}",
                           "tokenizer.vocab_size=40"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "split train: 7 pairs, 7 kept" in done.stdout
    assert "split validation: 3 pairs" in done.stdout and "split test: 4 pairs" in done.stdout


def test_the_training_split_stays_lazy_and_is_filtered_without_copying(tmp_path):
    """The training side is a view over the Arrow column (ArrowTexts), filtered by index: empty
    pairs go, slicing and single items read only what is asked for; evaluation splits are lists."""
    import datasets

    src = ["un", "", "deux mots", "trois", "   ", "quatre"]
    tgt = ["one", "x", "two words", "", "y", "four"]
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"translation": [{"fr": s, "en": t}
                                                                               for s, t in zip(src, tgt)]}),
                          "test": datasets.Dataset.from_dict({"translation": [{"fr": "a", "en": "b"}]})}) \
        .save_to_disk(str(tmp_path / "saved"))
    got = corpus(["data.source=hf", f"data.hf.name={tmp_path / 'saved'}", "data.valid_split=test",
                  "data.test_splits=[test]", f"data.cache_dir={tmp_path / 'cache'}"], splits=("train", "test"))
    train = got["train"]
    assert isinstance(train.src, hf_dataset.ArrowTexts) and isinstance(got["test"].src, list)
    assert train.src[:] == ["un", "deux mots", "quatre"] and train.tgt[:] == ["one", "two words", "four"]
    assert (train.src[1], train.src[-1], train.src[1:3]) == ("deux mots", "quatre", ["deux mots", "quatre"])
    assert train.src.take([2, 0])[:] == ["quatre", "un"]
    # the content hash equals the one of the same sentences held in lists
    from data.corpus import ParallelSplit

    assert train.fingerprint() == ParallelSplit("train", train.src[:], train.tgt[:]).fingerprint()
