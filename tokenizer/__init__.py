"""Tokenizers: SentencePiece trained on the training split (cached), or a pretrained HF one.

``build_tokenizer`` trains or loads; ``load_tokenizer`` reloads what ``Tokenizer.save`` wrote
into a run directory.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path

from tokenizer.base import Tokenizer, read_meta
from tokenizer.config import TokenizerConfig
from tokenizer.pretrained import PretrainedTokenizer
from tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer, copy_tree_atomic
from utils.config import to_dict
from utils.errors import DataError
from utils.hashing import hash_sides
from utils.io import umask_bits

log = logging.getLogger(__name__)


def training_fingerprint(cfg: TokenizerConfig, src: list[str], tgt: list[str], seed: int) -> str:
    """Hash of every training sentence and the settings that shape the model."""
    h = hashlib.sha256(json.dumps([to_dict(cfg), seed], sort_keys=True).encode("utf-8"))
    hash_sides(h, src, tgt)
    return h.hexdigest()[:16]


def build_tokenizer(cfg: TokenizerConfig, train_src: list[str], train_tgt: list[str],
                    cache_dir: Path | None, seed: int = 1) -> Tokenizer:
    """Train a SentencePiece model on the training split (reused from
    ``cache_dir/tokenizers/<fingerprint>`` when present) or load a pretrained tokenizer."""
    if cfg.type == "pretrained":
        return PretrainedTokenizer(cfg.name)
    if cache_dir is None:
        return SentencePieceTokenizer.train(train_src, train_tgt, cfg, seed)
    folder = Path(cache_dir) / "tokenizers" / training_fingerprint(cfg, train_src, train_tgt, seed)
    if folder.exists():
        try:
            tok = load_tokenizer(folder)
            log.info("reusing %s", folder)
            return tok
        except Exception as err:  # noqa: BLE001 (a damaged file fails inside SentencePiece or json)
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            log.warning("cached tokenizer %s is damaged (%s): training it again", folder, reason)
            shutil.rmtree(folder, ignore_errors=True)
    tok = SentencePieceTokenizer.train(train_src, train_tgt, cfg, seed)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    except OSError as err:
        raise DataError(f"cannot write cache folder {folder.parent}: {err.strerror or err}; set data.cache_dir "
                        f"to a folder you may write to") from None
    staging.chmod(0o777 & ~umask_bits())  # mkdtemp's 0700 would make the shared cache private
    tok.save(staging)
    copy_tree_atomic(staging, folder)
    log.info("trained %s (%d source / %d target pieces) -> %s", cfg.model_type,
             tok.src_vocab_size, tok.tgt_vocab_size, folder)
    return tok


def load_tokenizer(directory: Path) -> Tokenizer:
    """Reload a tokenizer saved with ``Tokenizer.save`` (reads meta.json to pick the class)."""
    directory = Path(directory)
    meta = read_meta(directory)
    if meta["type"] == "pretrained":
        return PretrainedTokenizer(str(directory / "hf"))
    return SentencePieceTokenizer.load(directory, meta)


__all__ = ["Tokenizer", "build_tokenizer", "load_tokenizer", "SentencePieceTokenizer", "PretrainedTokenizer"]
