"""The interface every tokenizer follows.

Source and target sides are encoded separately (they may have separate vocabularies); ids come
without bos/eos, which batching adds. ``joint`` means both sides share one vocabulary with the
same ids (then source/target embeddings and the output projection can be tied).
"""
from __future__ import annotations

import abc
import json
from pathlib import Path

META_FILE = "meta.json"


class Tokenizer(abc.ABC):
    pad_id: int
    unk_id: int
    bos_id: int  # the decoder's start symbol
    eos_id: int
    joint: bool

    @property
    def unknown_src_ids(self) -> frozenset[int]:
        """Source ids that stand for text the vocabulary lacks: ``unk_id`` (a tokenizer with byte
        fallback adds its byte pieces)."""
        return frozenset({self.unk_id})

    @property
    @abc.abstractmethod
    def src_vocab_size(self) -> int: ...

    @property
    @abc.abstractmethod
    def tgt_vocab_size(self) -> int: ...

    @abc.abstractmethod
    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each source sentence (no bos/eos)."""

    @abc.abstractmethod
    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each target sentence (no bos/eos)."""

    @abc.abstractmethod
    def decode_tgt(self, ids: list[int]) -> str:
        """Detokenized target text; pad/bos/eos ids are skipped."""

    @abc.abstractmethod
    def decode_src(self, ids: list[int]) -> str:
        """Detokenized source text; pad/bos/eos ids are skipped."""

    @abc.abstractmethod
    def src_pieces(self, ids: list[int]) -> list[str]:
        """Subword strings of source ids (axis labels of attention maps)."""

    @abc.abstractmethod
    def tgt_pieces(self, ids: list[int]) -> list[str]:
        """Subword strings of target ids."""

    @abc.abstractmethod
    def save(self, directory: Path) -> None:
        """Write everything needed to reload offline, including ``meta.json``."""

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """Stable identifier of the vocabulary and settings (keys caches of encoded data)."""

    def _specials(self) -> set[int]:
        return {self.pad_id, self.bos_id, self.eos_id}


def write_meta(directory: Path, meta: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def read_meta(directory: Path) -> dict:
    path = Path(directory) / META_FILE
    if not path.is_file():
        from utils.errors import UserError

        raise UserError(f"no tokenizer in {directory} (missing {META_FILE})")
    return json.loads(path.read_text(encoding="utf-8"))
