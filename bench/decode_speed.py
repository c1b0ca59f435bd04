"""Decoding throughput: greedy and beam 5, with the key/value cache and without, at a fixed
output length (end-of-sentence is banned, so every hypothesis runs exactly ``OUTPUT_TOKENS``)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

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
def compare_ctranslate2(repeats: int = 3, threads: int | None = None) -> dict:
    """Our cached greedy and beam-5 search against CTranslate2 (float32 and int8) on the same
    weights (exported by ``search.ctranslate2``), both forced to exactly ``OUTPUT_TOKENS`` tokens
    and given the same number of threads (``threads``, default this process's). The cases
    alternate, ``repeats`` rounds, best round each: on a shared machine a paired, interleaved
    measurement keeps the ratios honest."""
    import tempfile

    if threads is not None:
        torch.set_num_threads(threads)

    import ctranslate2

    from bench.common import BenchTokens
    from search.ctranslate2 import save_model

    torch.manual_seed(0)
    model = Transformer(bench_model_config(), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    src = sources()
    pieces = [BenchTokens.src_pieces(row[row.ne(PAD)].tolist()) for row in src]
    banned = (PAD, BOS, EOS)
    translators = {}
    with tempfile.TemporaryDirectory() as folder:
        save_model(model, BenchTokens, Path(folder) / "model")
        for compute in ("float32", "int8"):
            translators[compute] = ctranslate2.Translator(str(Path(folder) / "model"), device="cpu",
                                                          compute_type=compute, intra_threads=torch.get_num_threads())

    def ours(beam: int) -> list[int]:
        if beam == 1:
            return [len(o) for o in greedy_search(model, src, BOS, EOS, 0.0, OUTPUT_TOKENS, banned_ids=banned)]
        out = beam_search(model, src, BOS, EOS, beam=beam, max_len_a=0.0, max_len_b=OUTPUT_TOKENS, banned_ids=banned)
        return [len(h[0].tokens) for h in out]

    def theirs(compute: str, beam: int) -> list[int]:
        results = translators[compute].translate_batch(
            pieces, beam_size=beam, min_decoding_length=OUTPUT_TOKENS, max_decoding_length=OUTPUT_TOKENS,
            max_batch_size=SENTENCES)
        return [len(r.hypotheses[0]) for r in results]

    cases = {f"{engine}_{search}": (lambda e=engine, b=beam: ours(b) if e == "torch" else theirs(e, b))
             for engine in ("torch", "float32", "int8") for search, beam in (("greedy", 1), ("beam5", 5))}
    best = {name: float("inf") for name in cases}
    for fn in cases.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            lengths = fn()
            best[name] = min(best[name], time.perf_counter() - start)
            assert set(lengths) == {OUTPUT_TOKENS}, (name, lengths)
    return {f"{name}_sent_per_s": SENTENCES / seconds for name, seconds in best.items()}


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench decode-speed",
                                     description="The CTranslate2 comparison alone (make bench runs it with the rest).")
    parser.add_argument("threads", nargs="?", type=int, default=None,
                        help="intra-op threads for both engines (default: torch's own)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{torch.get_num_threads()} thread(s):",
          ", ".join(f"{key} {value:.1f}" for key, value in compare_ctranslate2().items()))
