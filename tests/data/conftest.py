"""What the data tests share: a word-level tokenizer double."""
from __future__ import annotations


class WordTokenizer:
    """A tiny test double: one id per character-count bucket of each word (ids >= 4)."""

    pad_id, unk_id, bos_id, eos_id = 0, 1, 2, 3
    calls = 0

    def _encode(self, texts):
        WordTokenizer.calls += 1
        return [[4 + len(w) for w in t.split()] for t in texts]

    encode_src = encode_tgt = _encode

    def fingerprint(self) -> str:
        return "word-v1"
