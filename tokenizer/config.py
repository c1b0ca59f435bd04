"""The ``tokenizer`` section of the config, read by ``tokenizer.build_tokenizer``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from utils.config import require


@dataclass
class TokenizerConfig:
    """Subword tokenizer: SentencePiece trained on the training split, or a pretrained HF one."""

    type: Literal["sentencepiece", "pretrained"] = "sentencepiece"  # trained here, or a pretrained HF one
    model_type: Literal["unigram", "bpe"] = "unigram"  # SentencePiece's algorithm
    vocab_size: int = 8000  # pieces per vocabulary (joint: the shared one)
    joint: bool = True  # one vocabulary for both languages (allows tied embeddings)
    character_coverage: float = 1.0  # share of characters SentencePiece must cover
    # Sentences sampled (per language) to train SentencePiece; 0 uses them all.
    input_sentence_size: int = 1000000
    # tokenizer.type=pretrained: a Hugging Face name or a local folder.
    name: str = "Helsinki-NLP/opus-mt-fr-en"

    def __post_init__(self) -> None:
        require(self.vocab_size >= 8, "vocab_size", "at least 8 (4 special pieces and some text)", self.vocab_size)
        require(0 < self.character_coverage <= 1, "character_coverage", "in (0, 1]", self.character_coverage)
        require(self.input_sentence_size >= 0, "input_sentence_size", "0 (all) or more", self.input_sentence_size)
