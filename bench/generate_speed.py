"""``transformers``' ``generate`` on a run exported in the suite's classes (``export.suite_model``), with
the suite's key/value cache and without, against the suite's own search on the same weights (the
reference): greedy and beam 5, every output exactly ``OUTPUT_TOKENS`` tokens (end-of-sentence banned
in both), the cases alternating, the best of ``repeats`` rounds each."""
from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import torch

from bench.common import BOS, EOS, PAD, VOCAB, bench_model_config
from bench.decode_speed import OUTPUT_TOKENS, SENTENCES, sources
from experiment.config import load_config, own_tree
from search.beam import beam_search
from search.greedy import greedy_search

SEARCHES = {"greedy": 1, "beam5": 5}


def suite_model_of(model_config):
    """The suite's `transformers` model (``NmtSuiteModel``) of a fresh Transformer with ``model_config``."""
    from export.suite_model import NmtSuiteConfig, NmtSuiteModel

    cfg = dataclasses.replace(load_config(None, []), model=model_config)
    config = NmtSuiteConfig(suite=own_tree(cfg), src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, joint_vocab=True,
                            pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS)
    return NmtSuiteModel(config).eval()


@torch.no_grad()
def measure(repeats: int = 3, threads: int | None = None, tokens: int = OUTPUT_TOKENS, model_config=None) -> dict:
    """Sentences/s of each case (``suite_*``, ``generate_cached_*``, ``generate_uncached_*``) and each
    ``generate`` case's ratio to the suite's search (``*_ratio``); raises if an output is not ``tokens`` long."""
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    hf = suite_model_of(model_config or bench_model_config())
    src = sources()
    banned = (PAD, BOS, EOS)

    def suite(beam: int) -> list[int]:
        if beam == 1:
            return [len(o) for o in greedy_search(hf.model, src, BOS, EOS, 0.0, tokens, banned_ids=banned)]
        out = beam_search(hf.model, src, BOS, EOS, beam=beam, max_len_a=0.0, max_len_b=tokens, banned_ids=banned)
        return [len(h[0].tokens) for h in out]

    def generate(beam: int, cached: bool) -> list[int]:
        out = hf.generate(input_ids=src, attention_mask=src.ne(PAD), num_beams=beam, do_sample=False,
                          max_new_tokens=tokens, suppress_tokens=list(banned), use_cache=cached,
                          early_stopping=beam > 1)
        return [len(row) - 1 for row in out.tolist()]  # after the start token

    cases: dict[str, Callable[[], list[int]]] = {}
    for search, beam in SEARCHES.items():
        cases[f"suite_{search}"] = lambda b=beam: suite(b)
        cases[f"generate_cached_{search}"] = lambda b=beam: generate(b, True)
        cases[f"generate_uncached_{search}"] = lambda b=beam: generate(b, False)
    best = {name: float("inf") for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            start = time.perf_counter()
            lengths = case()
            best[name] = min(best[name], time.perf_counter() - start)
            if set(lengths) != {tokens}:
                raise AssertionError(f"{name}: outputs of {sorted(set(lengths))} tokens, not {tokens}")
    rates = {name: SENTENCES / seconds for name, seconds in best.items()}
    ratios = {f"{name}_ratio": rates[name] / rates[f"suite_{name.rsplit('_', 1)[1]}"]
              for name in rates if name.startswith("generate_")}
    return {**rates, **ratios}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench generate-speed",
                                     description="transformers' generate on the suite's exported classes, cached and "
                                     "uncached, against the suite's own search (greedy and beam 5).")
    parser.add_argument("threads", nargs="?", type=int, default=1, help="intra-op threads (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the best of each case is kept (default 3)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    m = measure(args.repeats, args.threads)
    print(f"{torch.get_num_threads()} thread(s), {SENTENCES} sentences of {OUTPUT_TOKENS} tokens, sentences/s:")
    for search in SEARCHES:
        print(f"  {search}: suite {m[f'suite_{search}']:.1f} (reference); generate cached "
              f"{m[f'generate_cached_{search}']:.1f} ({m[f'generate_cached_{search}_ratio']:.2f}×), uncached "
              f"{m[f'generate_uncached_{search}']:.1f} ({m[f'generate_uncached_{search}_ratio']:.2f}×)")
