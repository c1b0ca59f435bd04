"""SentencePiece (Kudo & Richardson 2018) unigram or BPE models trained on the training split.

Ids are fixed: pad=0, unk=1, bos=2, eos=3. ``joint``: one model trained on both languages;
otherwise one model per language. Normalisation is ``identity`` so that decode(encode(s)) == s
for ordinary single-spaced text (accents, apostrophes, « », digits kept as they are).
"""
from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from tokenizer.base import Tokenizer, write_meta
from tokenizer.config import TokenizerConfig
from utils.errors import DataError
from utils.memory import release_free_heap

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def _sample(sides: list[Sequence[str]], size: int, seed: int) -> list[str]:
    """The sentences SentencePiece trains on: with lists, the non-empty ones, then a seeded
    sample of ``size`` of them (0: all); with lazy sides (a corpus larger than memory), a seeded
    sample of positions over all sides is read instead, and its empty sentences dropped."""
    if all(isinstance(side, list) for side in sides):
        sentences = [s for side in sides for s in side if s.strip()]
        if size and len(sentences) > size:
            sentences = random.Random(seed).sample(sentences, size)
        return sentences
    total = sum(len(side) for side in sides)
    positions = range(total) if not size or total <= size else sorted(random.Random(seed).sample(range(total), size))
    sentences, offset = [], 0
    for side in sides:
        mine = [p - offset for p in positions if offset <= p < offset + len(side)]
        sentences += [s for s in side.take(mine) if s.strip()] if hasattr(side, "take") else \
            [side[i] for i in mine if side[i].strip()]
        offset += len(side)
    return sentences


def train_model(sides: list[Sequence[str]], cfg: TokenizerConfig, seed: int) -> bytes:
    """Train one SentencePiece model in memory on the sentences of ``sides``; returns the
    serialized model."""
    sentences = _sample(sides, cfg.input_sentence_size, seed)
    if not sentences:
        raise DataError("cannot train a SentencePiece model: the training split has no text")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, minloglevel=2,
        vocab_size=cfg.vocab_size, model_type=cfg.model_type,
        character_coverage=cfg.character_coverage, hard_vocab_limit=False,
        pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
        pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
        normalization_rule_name="identity", input_sentence_size=0, byte_fallback=False,
        num_threads=max(1, os.cpu_count() or 1), max_sentence_length=16384)
    del sentences
    release_free_heap()  # the trainer's freed structures would otherwise stay resident
    return model.getvalue()


class SentencePieceTokenizer(Tokenizer):
    """One (joint) or two (source, target) SentencePiece processors."""

    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS

    def __init__(self, src_model: bytes, tgt_model: bytes | None, settings: dict):
        self.src_model, self.tgt_model = src_model, tgt_model
        self.joint = tgt_model is None
        self.settings = settings
        self.src_sp = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt_sp = self.src_sp if self.joint else spm.SentencePieceProcessor(model_proto=tgt_model)
        self.threads = max(1, os.cpu_count() or 1)

    @classmethod
    def train(cls, src: list[str], tgt: list[str], cfg: TokenizerConfig, seed: int = 1) -> SentencePieceTokenizer:
        settings = {"model_type": cfg.model_type, "vocab_size": cfg.vocab_size, "joint": cfg.joint,
                    "character_coverage": cfg.character_coverage, "input_sentence_size": cfg.input_sentence_size}
        if cfg.joint:
            return cls(train_model([src, tgt], cfg, seed), None, settings)
        return cls(train_model([src], cfg, seed), train_model([tgt], cfg, seed + 1), settings)

    @classmethod
    def load(cls, directory: Path, meta: dict) -> SentencePieceTokenizer:
        src = (directory / "src.model").read_bytes() if not meta["joint"] else (directory / "joint.model").read_bytes()
        tgt = None if meta["joint"] else (directory / "tgt.model").read_bytes()
        return cls(src, tgt, meta["settings"])

    @property
    def src_vocab_size(self) -> int:
        return self.src_sp.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt_sp.get_piece_size()

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        return self.src_sp.encode(texts, out_type=int, num_threads=self.threads)

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        return self.tgt_sp.encode(texts, out_type=int, num_threads=self.threads)

    def decode_src(self, ids: list[int]) -> str:
        specials = self._specials()
        return self.src_sp.decode([i for i in ids if i not in specials])

    def decode_tgt(self, ids: list[int]) -> str:
        specials = self._specials()
        return self.tgt_sp.decode([i for i in ids if i not in specials])

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.src_sp.id_to_piece(i) for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tgt_sp.id_to_piece(i) for i in ids]

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.joint:
            (directory / "joint.model").write_bytes(self.src_model)
        else:
            (directory / "src.model").write_bytes(self.src_model)
            (directory / "tgt.model").write_bytes(self.tgt_model)
        write_meta(directory, {"type": "sentencepiece", "joint": self.joint, "settings": self.settings,
                               "pad_id": PAD, "unk_id": UNK, "bos_id": BOS, "eos_id": EOS})

    def fingerprint(self) -> str:
        h = hashlib.sha256(self.src_model)
        if self.tgt_model:
            h.update(self.tgt_model)
        return h.hexdigest()[:16]


def copy_tree_atomic(src: Path, dst: Path) -> None:
    """Move a finished folder into place; if another process won the race, keep theirs."""
    try:
        os.replace(src, dst)
    except OSError:
        shutil.rmtree(src, ignore_errors=True)
