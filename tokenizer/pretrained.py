"""Pretrained Hugging Face tokenizers (e.g. Helsinki-NLP/opus-mt-fr-en) through transformers.

Loaded by hub name or local folder (never with trust_remote_code). Target text goes through
``text_target=`` so that tokenizers with a separate target model (Marian) use it. Models without
a bos token start decoding from pad (the Marian convention).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from tokenizer.base import Tokenizer, write_meta
from utils.errors import ConfigError


def _load(name_or_path: str):
    from transformers import AutoTokenizer

    # Read the offline switch at call time (huggingface_hub reads it once, at import).
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=False, local_files_only=offline)
    except Exception as err:  # OSError, HF hub errors, ValueError on bad folders
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = "a local folder that cannot be read" if Path(name_or_path).exists() else \
            "not a local folder and the Hugging Face hub is unreachable or has no such tokenizer"
        raise ConfigError(f"cannot load pretrained tokenizer '{name_or_path}': {where} ({reason[:200]})") from None


BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte fallback (Llama, Mistral, Gemma)


class PretrainedTokenizer(Tokenizer):
    """Wraps a ``transformers`` tokenizer; one shared vocabulary (``joint``)."""

    joint = True

    def __init__(self, name_or_path: str):
        self.name = name_or_path
        self.tok = _load(name_or_path)
        if self.tok.pad_token_id is None or self.tok.eos_token_id is None:
            raise ConfigError(f"pretrained tokenizer '{name_or_path}' needs pad and eos tokens")
        self.pad_id = self.tok.pad_token_id
        self.eos_id = self.tok.eos_token_id
        self.unk_id = self.tok.unk_token_id if self.tok.unk_token_id is not None else self.pad_id
        self.bos_id = self.tok.bos_token_id if self.tok.bos_token_id is not None else self.pad_id

    @property
    def unknown_src_ids(self) -> frozenset[int]:
        """``unk_id`` and, with byte fallback, the byte pieces ``<0xNN>``: a character outside the
        vocabulary is spelled by its UTF-8 bytes there instead of ``<unk>``. (A byte-level BPE, GPT-2's,
        spells everything in bytes and has no such sign.)"""
        return frozenset({self.unk_id, *(i for piece, i in self.tok.get_vocab().items() if BYTE_PIECE.fullmatch(piece))})

    @property
    def src_vocab_size(self) -> int:
        return len(self.tok)

    @property
    def tgt_vocab_size(self) -> int:
        return len(self.tok)

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        return self.tok(list(texts), add_special_tokens=False)["input_ids"] if texts else []

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        return self.tok(text_target=list(texts), add_special_tokens=False)["input_ids"] if texts else []

    def decode_src(self, ids: list[int]) -> str:
        return self.tok.decode([i for i in ids if i not in self._specials()], skip_special_tokens=True)

    def decode_tgt(self, ids: list[int]) -> str:
        return self.tok.decode([i for i in ids if i not in self._specials()], skip_special_tokens=True)

    def src_pieces(self, ids: list[int]) -> list[str]:
        return self.tok.convert_ids_to_tokens(list(ids))

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return self.tok.convert_ids_to_tokens(list(ids))

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.tok.save_pretrained(str(directory / "hf"))
        write_meta(directory, {"type": "pretrained", "name": self.name, "joint": True})

    def fingerprint(self) -> str:
        vocab = json.dumps(sorted(self.tok.get_vocab().items()), ensure_ascii=False)
        return hashlib.sha256((type(self.tok).__name__ + vocab).encode("utf-8")).hexdigest()[:16]
