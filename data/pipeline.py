"""From a config to ready batches: corpus -> tokenizer -> encoded (cached) splits -> loaders.

``python -m data.pipeline --config FILE [key=value ...]`` runs this stage alone and prints
split sizes, vocabulary sizes, batch counts and throughput.
"""
from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from data.batching import Collator, EncodedSplit, PairDataset, TokenBatchSampler, load_or_encode
from data.corpus import ParallelSplit, load_corpus
from tokenizer import build_tokenizer
from utils.config import Config, TrainConfig, load_config

log = logging.getLogger(__name__)


@dataclass
class PreparedData:
    """Everything downstream of the config that training and evaluation need."""

    corpus: dict[str, ParallelSplit]
    tokenizer: object  # tokenizer.base.Tokenizer
    encoded: dict[str, EncodedSplit]


def prepare_data(cfg: Config, splits: list[str] | None = None) -> PreparedData:
    """Load the corpus, build (or reuse from cache) the tokenizer on the training split, and
    tokenize every split (cached). Only the training split is filtered by ``data.max_len``."""
    corpus = load_corpus(cfg.data, cfg.seed, splits)
    cache_dir = Path(cfg.data.cache_dir) if cfg.data.cache_dir else None
    train = corpus.get(cfg.data.train_split)
    if train is None:
        train = load_corpus(cfg.data, cfg.seed, [cfg.data.train_split])[cfg.data.train_split]
    tok = build_tokenizer(cfg.tokenizer, train.src, train.tgt, cache_dir, seed=cfg.seed)
    encoded = {
        name: load_or_encode(split, tok, cfg.data.max_len if name == cfg.data.train_split else None,
                             cache_dir)
        for name, split in corpus.items()
    }
    return PreparedData(corpus, tok, encoded)


def make_loader(split: EncodedSplit, tokenizer, train_cfg: TrainConfig, shuffle: bool, seed: int,
                num_replicas: int = 1, rank: int = 0) -> torch.utils.data.DataLoader:
    """DataLoader of padded ``Batch``es under the config's token budget (or sentence count)."""
    sampler = TokenBatchSampler(split.src_lengths, split.tgt_lengths, train_cfg.max_tokens,
                                train_cfg.batch_size, shuffle=shuffle, seed=seed,
                                num_replicas=num_replicas, rank=rank)
    # An own generator: creating an iterator then never draws from the global RNG, so a resumed
    # run sees the same global random stream (dropout) as an uninterrupted one.
    return torch.utils.data.DataLoader(
        PairDataset(split), batch_sampler=sampler, num_workers=train_cfg.num_workers,
        collate_fn=Collator(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id),
        generator=torch.Generator().manual_seed(seed))


def main() -> None:
    from utils.cli import setup_logging

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="section.key=value")
    args = parser.parse_args()
    setup_logging()
    cfg = load_config(args.config, args.overrides)
    t0 = time.perf_counter()
    data = prepare_data(cfg)
    seconds = time.perf_counter() - t0
    n_pairs = sum(len(s) for s in data.corpus.values())
    tok = data.tokenizer
    print(f"vocabulary: source {tok.src_vocab_size}, target {tok.tgt_vocab_size}"
          f" ({'joint' if tok.joint else 'separate'})")
    for name, enc in data.encoded.items():
        loader = make_loader(enc, tok, cfg.train, shuffle=True, seed=cfg.seed)
        print(f"split {name}: {len(data.corpus[name])} pairs, {len(enc)} kept, "
              f"{int(enc.src_lengths.sum())} source / {int(enc.tgt_lengths.sum())} target tokens, "
              f"{len(loader)} batches")
    print(f"prepared {n_pairs} pairs in {seconds:.1f} s ({n_pairs / seconds:,.0f} pairs/s)")


if __name__ == "__main__":
    from utils.cli import run_main

    run_main(main)
