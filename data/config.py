"""The ``data`` section of the config: where the (French, English) pairs come from and which splits
play which role; read by ``data.corpus`` (the sources) and ``data.pipeline`` (cache, filters)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from data.corpus import SOURCES
from utils.config import require


@dataclass
class HFDatasetSpec:
    """``data.hf``: a translation corpus read with Hugging Face ``datasets`` (``data.source: hf``).

    ``name``: a hub dataset id (``wmt/wmt14``) or a local folder — one written by
    ``Dataset(Dict).save_to_disk``, or parquet / JSON Lines files, either directly in
    ``<folder>/<split>/`` or in the hub's converted layout ``<folder>/<config>/<split>/``.
    Each row holds either a ``translation`` dict keyed by language code (``translation_field``, as
    IWSLT, WMT and OPUS on the hub) or two text columns (``src_column``, ``tgt_column``).
    """

    name: str = ""  # hub dataset id (wmt/wmt14) or a local folder (see above)
    config: str = ""  # the dataset's configuration (hub: e.g. fr-en), if it has several
    revision: str = ""  # hub branch, tag or commit ("" = main)
    split_map: dict[str, str] = field(default_factory=dict)  # our split name -> the dataset's
    translation_field: str = "translation"  # the column holding {language code: text}
    src_column: str = ""  # both set: two text columns instead of the translation dict
    tgt_column: str = ""  # the target text column (with src_column)

    def __post_init__(self) -> None:
        require(bool(self.src_column) == bool(self.tgt_column), "src_column",
                "set together with tgt_column (or neither)", self.src_column)


@dataclass
class SplitSpec:
    """One split of the synthetic corpus: its size and its French length range (words)."""

    size: int = 1000  # sentence pairs
    min_words: int = 3  # shortest French sentence (words)
    max_words: int = 12  # longest French sentence (words)

    def __post_init__(self) -> None:
        require(self.size >= 1, "size", "at least 1", self.size)
        require(self.min_words >= 1, "min_words", "at least 1", self.min_words)
        require(self.max_words >= self.min_words, "max_words", f"at least min_words ({self.min_words})",
                self.max_words)


def _default_synthetic_splits() -> dict[str, SplitSpec]:
    return {
        "train": SplitSpec(size=20000, min_words=3, max_words=12),
        "validation": SplitSpec(size=500, min_words=3, max_words=12),
        "test": SplitSpec(size=500, min_words=3, max_words=12),
        "test_long": SplitSpec(size=500, min_words=16, max_words=30),
    }


@dataclass
class DataConfig:
    """Where the (French, English) pairs come from and which splits play which role."""

    # where the pairs come from: the built-in grammar, line-aligned text files, IWSLT2017, HF datasets (the
    # names of data.corpus.SOURCES)
    source: Literal[tuple(SOURCES)] = "synthetic"
    # Seeds the data itself (the synthetic grammar's sentences), not the run: runs that differ in
    # their ``seed`` (training randomness) share their data and test sets.
    seed: int = 1
    # parallel_text: folder holding <split>.<src_lang>[.gz] / <split>.<tgt_lang>[.gz];
    # iwslt2017: an unpacked raw WIT3 release (empty: download from the Hugging Face hub).
    dir: str = ""
    src_lang: str = "fr"  # source language code (file suffix, translation dict key)
    tgt_lang: str = "en"  # target language code
    train_split: str = "train"  # the split trained on
    valid_split: str = "validation"  # the split validated on (best.pt, early stopping)
    test_splits: list[str] = field(default_factory=lambda: ["test"])  # the splits test.py scores
    # Training pairs with more tokens than this (either side) are dropped, as are empty pairs.
    max_len: int = 256
    # Length-extrapolation studies: training and validation pairs whose source has more than this
    # many words (whitespace-separated) are dropped; test splits never. 0: no limit.
    max_src_words: int = 0
    # ... and pairs whose target has more than this many words (a model that never saw a long target
    # must not learn long outputs from the other side's cap). 0: no limit.
    max_tgt_words: int = 0
    # source synthetic: each split's size and sentence lengths
    synthetic: dict[str, SplitSpec] = field(default_factory=_default_synthetic_splits)
    hf: HFDatasetSpec = field(default_factory=HFDatasetSpec)  # data.source: hf
    # Where tokenized splits and trained tokenizers are cached across runs (keyed by fingerprint).
    cache_dir: str = "runs/cache"

    def __post_init__(self) -> None:
        require(self.max_len >= 1, "max_len", "at least 1", self.max_len)
        require(self.max_src_words >= 0, "max_src_words", "0 (no limit) or more", self.max_src_words)
        require(self.max_tgt_words >= 0, "max_tgt_words", "0 (no limit) or more", self.max_tgt_words)
        require(len(self.test_splits) >= 1, "test_splits", "a list of at least one split name", self.test_splits)
