"""Data pipeline at IWSLT2017 scale: 232,825 synthetic pairs, tokenized and cached."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import peak_rss_mb
from data.corpus import ParallelSplit
from data.encoded import load_or_encode
from data.synthetic import generate_pairs
from tokenizer import build_tokenizer
from tokenizer.config import TokenizerConfig

PAIRS = 232_825


def measure() -> dict:
    start = time.perf_counter()
    src, tgt = generate_pairs(PAIRS, 3, 40, seed=0)
    generated = time.perf_counter()
    split = ParallelSplit("train", src, tgt)
    with tempfile.TemporaryDirectory() as cache:
        tok = build_tokenizer(TokenizerConfig(vocab_size=8000), src, tgt, Path(cache))
        trained = time.perf_counter()
        encoded = load_or_encode(split, tok, 256, Path(cache))
        cached = time.perf_counter()
        load_or_encode(split, tok, 256, Path(cache))
        reloaded = time.perf_counter()
    return {"pairs": PAIRS, "pairs_per_s": PAIRS / (cached - trained), "tokenize_cache_s": cached - trained,
            "generate_s": generated - start, "tokenizer_train_s": trained - generated,
            "cache_reload_s": reloaded - cached, "tokens": int(encoded.src_lengths.sum() + encoded.tgt_lengths.sum()),
            "peak_rss_mb": peak_rss_mb()}
