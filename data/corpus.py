"""Data sources: each turns a ``DataConfig`` into named splits of (French, English) sentence pairs.

Sources (``data.source``):
- ``synthetic``: the built-in French->English grammar (``data/synthetic.py``), no files; each
  split of ``data.synthetic`` has its own size and length range.
- ``parallel_text``: ``<data.dir>/<split>.<lang>`` or ``<split>.<lang>.gz`` per split (Multi30k:
  train, val, test_2016_flickr, test_2017_flickr). ``data.dir`` may name environment variables
  (``$MULTI30K_DIR``).
- ``iwslt2017``: IWSLT 2017 fr-en from an unpacked WIT3 release in ``data.dir``, or from the
  Hugging Face hub when ``data.dir`` is empty: through ``datasets`` (converted parquet) for train,
  validation and test, from the WIT3 archive when a single tst20xx set is asked for.
- ``hf``: any translation corpus ``datasets`` can read, from the hub or a local folder
  (``data.hf``; ``data/hf_dataset.py``).

Training splits lose empty pairs here (counted in the log); evaluation splits are kept whole.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from data.fetch import DATA_FOLDERS
from utils.config import shown
from utils.errors import ConfigError, DataError
from utils.hashing import HASH_CHUNK, hash_sides

if TYPE_CHECKING:  # data.config's `source` is read off SOURCES: the config imports this module
    from data.config import DataConfig

log = logging.getLogger(__name__)


@dataclass
class ParallelSplit:
    """Aligned sentences: ``tgt[i]`` translates ``src[i]``. Each side is a list, or for large
    corpora a lazy sequence over a memory-mapped Arrow column (``data.hf_dataset.ArrowTexts``):
    anything with ``len``, integer indexing and slicing to a list."""

    name: str
    src: Sequence[str]
    tgt: Sequence[str]

    def __len__(self) -> int:
        return len(self.src)

    def fingerprint(self) -> str:
        """Content hash of both sides (a few hundred ms for IWSLT2017-sized splits)."""
        h = hashlib.sha256()
        hash_sides(h, self.src, self.tgt)
        return h.hexdigest()[:16]


def resolve_dir(cfg: DataConfig) -> Path:
    """``data.dir`` with environment variables and ``~`` expanded; must be an existing folder. A
    corpus's variable that is not set, or empty (``$MULTI30K_DIR``), falls back to the folder that
    ``make data`` fills (``data.fetch.DATA_FOLDERS``, from the checkout's root)."""
    raw = cfg.dir
    if not raw:
        raise ConfigError(f"data.dir is empty but data.source '{cfg.source}' needs a folder")
    unset = [name for name in re.findall(r"\$\{?(\w+)\}?", raw) if not os.environ.get(name)]
    for name in unset:
        if name not in DATA_FOLDERS:
            raise ConfigError(f"data.dir '{raw}' names the environment variable {name}, which is not set: export it "
                              f"(the folder holding the corpus's files)")
        fallback = DATA_FOLDERS[name]
        if not fallback.is_dir():
            raise ConfigError(f"data.dir '{raw}': {name} is not set and {shown(fallback)} (where `make data` puts the "
                              f"files) is not there: run `make data`, or export {name}=DIR, the folder holding them "
                              f"(docs/data.md)")
        raw = re.sub(r"\$\{?" + name + r"\b\}?", str(fallback).replace("\\", "\\\\"), raw)
    expanded = os.path.expanduser(os.path.expandvars(raw))
    path = Path(expanded)
    if not path.is_dir():
        raise ConfigError(f"data.dir '{raw}' is not a folder ({path})")
    return path


def _split_seed(seed: int, split: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(split.encode("utf-8"))) % (2**31)


def _synthetic(cfg: DataConfig, splits: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    from data.synthetic import generate_pairs

    out = {}
    for name in splits:
        spec = cfg.synthetic.get(name)
        if spec is None:
            raise ConfigError(
                f"split '{name}' is not defined under data.synthetic "
                f"(defined: {', '.join(cfg.synthetic)})")
        out[name] = generate_pairs(spec.size, spec.min_words, spec.max_words, _split_seed(cfg.seed, name))
    return out


def _find_file(folder: Path, split: str, lang: str) -> Path:
    for candidate in (folder / f"{split}.{lang}", folder / f"{split}.{lang}.gz"):
        if candidate.is_file():
            return candidate
    raise DataError(f"missing file for split '{split}': {folder}/{split}.{lang}[.gz]")


def _parallel_text(cfg: DataConfig, splits: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    from data.parallel_text import read_parallel_files

    folder = resolve_dir(cfg)
    return {
        name: read_parallel_files(_find_file(folder, name, cfg.src_lang),
                                  _find_file(folder, name, cfg.tgt_lang))
        for name in splits
    }


def _hf(cfg: DataConfig, splits: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    from data.hf_dataset import load_hf_splits

    return load_hf_splits(cfg.hf, cfg.src_lang, cfg.tgt_lang, splits, os.path.join(cfg.cache_dir, "datasets"))


def _iwslt2017(cfg: DataConfig, splits: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    from data import iwslt2017
    from data.hf_dataset import load_hf_splits

    if cfg.dir:
        available = iwslt2017.read_wit3_dir(resolve_dir(cfg), cfg.src_lang, cfg.tgt_lang)
    elif set(splits) <= set(iwslt2017.HUB_PARQUET_SPLITS):
        # through datasets: the hub's converted parquet (train, validation, test), cached as Arrow
        return load_hf_splits(iwslt2017.hub_dataset_spec(cfg.src_lang, cfg.tgt_lang), cfg.src_lang, cfg.tgt_lang,
                              splits, os.path.join(cfg.cache_dir, "datasets"))
    else:  # a tst20xx set on its own exists only in the WIT3 archive
        available = iwslt2017.load_iwslt2017_hub(
            cache_dir=os.path.join(cfg.cache_dir, "hub"), src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang)
    missing = [s for s in splits if s not in available]
    if missing:
        raise ConfigError(
            f"IWSLT2017 has no split {', '.join(repr(m) for m in missing)} "
            f"(available: {', '.join(available)})")
    return {name: available[name] for name in splits}


# the registry of sources: `data.source` is one of its names (data.config's Literal is made from them)
SOURCES: dict[str, Callable[[DataConfig, list[str]], dict[str, tuple[list[str], list[str]]]]] = {
    "synthetic": _synthetic,
    "parallel_text": _parallel_text,
    "iwslt2017": _iwslt2017,
    "hf": _hf,
}


def check_data_files(cfg: DataConfig) -> None:
    """The one-line error loading would give for a split of a local folder (``parallel_text``) that is
    missing, without reading a file; the other sources make or fetch their data, nothing to check."""
    if cfg.source == "parallel_text":
        folder = resolve_dir(cfg)
        for name in split_names(cfg):
            for lang in (cfg.src_lang, cfg.tgt_lang):
                _find_file(folder, name, lang)


def _indices_where(src: Sequence[str], tgt: Sequence[str], test) -> np.ndarray:
    """(k,) int64 indices of the pairs for which ``test(src, tgt)`` holds, read in chunks (an
    array, not a list: 8 bytes a pair at any corpus size)."""
    parts = []
    for start in range(0, len(src), HASH_CHUNK):
        pairs = zip(src[start:start + HASH_CHUNK], tgt[start:start + HASH_CHUNK])
        parts.append(start + np.flatnonzero(np.fromiter((test(s, t) for s, t in pairs), dtype=bool)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _take(side: Sequence[str], keep: np.ndarray) -> Sequence[str]:
    """The sentences ``keep`` of a side: a list stays a list, a lazy side stays lazy."""
    return side.take(keep) if hasattr(side, "take") else [side[i] for i in keep.tolist()]


def split_names(cfg: DataConfig) -> list[str]:
    """Train, validation and test split names of the config, each once, in that order."""
    names = [cfg.train_split, cfg.valid_split, *cfg.test_splits]
    return list(dict.fromkeys(names))


def load_corpus(cfg: DataConfig, splits: list[str] | None = None) -> dict[str, ParallelSplit]:
    """Load the requested splits (default: train, validation and test splits of the config).

    The training split loses pairs with an empty side (their count is logged); with
    ``data.max_src_words`` (``max_tgt_words``) the training and validation splits lose pairs with
    longer sources (targets). Test splits are returned whole so that references stay complete.
    """
    names = splits if splits is not None else split_names(cfg)
    raw = SOURCES[cfg.source](cfg, names)
    corpus = {}
    for name in names:
        src, tgt = raw[name]
        if len(src) != len(tgt):
            raise DataError(f"split '{name}': {len(src)} source but {len(tgt)} target sentences")
        if name == cfg.train_split:
            keep = _indices_where(src, tgt, lambda s, t: bool(s.strip() and t.strip()))
            if len(keep) < len(src):
                log.info("split %s: dropped %d empty pairs of %d", name, len(src) - len(keep), len(src))
                src, tgt = _take(src, keep), _take(tgt, keep)
        if cfg.max_src_words > 0 and name in (cfg.train_split, cfg.valid_split):
            keep = _indices_where(src, tgt, lambda s, t: len(s.split()) <= cfg.max_src_words)
            log.info("split %s: kept %d of %d pairs with at most %d source words (data.max_src_words)",
                     name, len(keep), len(src), cfg.max_src_words)
            src, tgt = _take(src, keep), _take(tgt, keep)
        if cfg.max_tgt_words > 0 and name in (cfg.train_split, cfg.valid_split):
            keep = _indices_where(src, tgt, lambda s, t: len(t.split()) <= cfg.max_tgt_words)
            log.info("split %s: kept %d of %d pairs with at most %d target words (data.max_tgt_words)",
                     name, len(keep), len(src), cfg.max_tgt_words)
            src, tgt = _take(src, keep), _take(tgt, keep)
        if name != cfg.train_split and not isinstance(src, list):  # evaluation splits are small: plain lists
            src, tgt = src[:], tgt[:]
        corpus[name] = ParallelSplit(name, src, tgt)
    return corpus
