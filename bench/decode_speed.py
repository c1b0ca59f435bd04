"""Decoding throughput: greedy and beam 5, with the key/value cache and without, at a fixed
output length (end-of-sentence is banned, so every hypothesis runs exactly ``OUTPUT_TOKENS``)."""
from __future__ import annotations

import time

import torch

from bench.common import BOS, EOS, PAD, VOCAB, bench_model_config, device, synchronize
from models.transformer import Transformer
from search.beam import beam_search
from search.greedy import greedy_search

SENTENCES = 64
OUTPUT_TOKENS = 30


def sources(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 31, (SENTENCES,), generator=g)
    src = torch.full((SENTENCES, int(lengths.max()) + 1), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        src[i, n] = EOS
    return src


@torch.no_grad()
def measure(case: str) -> dict:
    """case: greedy_cached, greedy_uncached, beam5_cached, beam5_uncached."""
    torch.manual_seed(0)
    dev = device()
    model = Transformer(bench_model_config(), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).to(dev).eval()
    src = sources().to(dev)
    cached = case.endswith("_cached")
    banned = (PAD, BOS, EOS)  # EOS too: every output is exactly OUTPUT_TOKENS long
    amp = torch.bfloat16 if dev.type == "cuda" else None

    def run():
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            if case.startswith("greedy"):
                out = greedy_search(model, src, BOS, EOS, 0.0, OUTPUT_TOKENS, use_cache=cached, banned_ids=banned)
                return [len(o) for o in out]
            out = beam_search(model, src, BOS, EOS, beam=5, max_len_a=0.0, max_len_b=OUTPUT_TOKENS,
                              use_cache=cached, banned_ids=banned)
            return [len(h[0].tokens) for h in out]

    run() if cached else None  # warm-up (the uncached runs are long enough on their own)
    synchronize()
    start = time.perf_counter()
    lengths = run()
    synchronize()
    seconds = time.perf_counter() - start
    assert set(lengths) == {OUTPUT_TOKENS}, lengths
    return {"sent_per_s": SENTENCES / seconds, "seconds": seconds}
