"""From the config's data and tokenizer sections to ready batches: corpus -> tokenizer ->
encoded (cached) splits -> loaders.

``python train.py --config FILE --data-only`` runs this stage alone and prints ``describe``'s
figures (split sizes, vocabulary sizes, batch counts).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from data.batching import Collator, PairDataset, TokenBatchSampler
from data.config import DataConfig
from data.corpus import ParallelSplit, load_corpus
from data.encoded import EncodedSplit, load_or_encode
from tokenizer import build_tokenizer
from tokenizer.config import TokenizerConfig

log = logging.getLogger(__name__)


@dataclass
class PreparedData:
    """Everything downstream of the config that training and evaluation need."""

    corpus: dict[str, ParallelSplit]
    tokenizer: object  # tokenizer.base.Tokenizer
    encoded: dict[str, EncodedSplit]


def prepare_data(data_cfg: DataConfig, tokenizer_cfg: TokenizerConfig, seed: int,
                 splits: list[str] | None = None) -> PreparedData:
    """Load the corpus, build (or reuse from cache) the tokenizer on the training split, and
    tokenize every split (cached). Only the training split is filtered by ``data.max_len``.
    ``seed`` is the run's (SentencePiece's sentence sampling); the data itself follows ``data.seed``."""
    corpus = load_corpus(data_cfg, splits)
    cache_dir = Path(data_cfg.cache_dir) if data_cfg.cache_dir else None
    train = corpus.get(data_cfg.train_split)
    if train is None:
        train = load_corpus(data_cfg, [data_cfg.train_split])[data_cfg.train_split]
    tok = build_tokenizer(tokenizer_cfg, train.src, train.tgt, cache_dir, seed=seed)
    encoded = {
        name: load_or_encode(split, tok, data_cfg.max_len if name == data_cfg.train_split else None,
                             cache_dir)
        for name, split in corpus.items()
    }
    return PreparedData(corpus, tok, encoded)


class Batching(Protocol):
    """What batching reads of the ``train`` section (``experiment.train_config.TrainConfig`` has it)."""

    max_tokens: int  # token budget per batch (padded source or target tokens)
    batch_size: int  # sentences per batch; 0 uses max_tokens
    num_workers: int  # DataLoader worker processes
    static_shapes: bool  # batches padded to a few fixed shapes (data.batching.make_static_batches)


def make_loader(split: EncodedSplit, tokenizer, train_cfg: Batching, shuffle: bool, seed: int,
                num_replicas: int = 1, rank: int = 0, pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """DataLoader of padded ``Batch``es under the config's token budget (or sentence count), of a
    few fixed shapes with ``static_shapes``; ``pin_memory`` (for a CUDA device) hands out
    page-locked batches."""
    static = getattr(train_cfg, "static_shapes", False)
    sampler = TokenBatchSampler(split.src_lengths, split.tgt_lengths, train_cfg.max_tokens,
                                train_cfg.batch_size, shuffle=shuffle, seed=seed,
                                num_replicas=num_replicas, rank=rank, static_shapes=static)
    static_tokens = train_cfg.max_tokens if static else None
    # An own generator: creating an iterator then never draws from the global RNG, so a resumed
    # run sees the same global random stream (dropout) as an uninterrupted one.
    return torch.utils.data.DataLoader(
        PairDataset(split), batch_sampler=sampler, num_workers=train_cfg.num_workers,
        collate_fn=Collator(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, static_tokens),
        pin_memory=pin_memory,
        generator=torch.Generator().manual_seed(seed))


def describe(data: PreparedData, train_cfg: Batching, seed: int) -> list[str]:
    """Lines of figures: vocabulary sizes, then per split its pairs, kept pairs, tokens, batches."""
    tok = data.tokenizer
    lines = [f"vocabulary: source {tok.src_vocab_size}, target {tok.tgt_vocab_size}"
             f" ({'joint' if tok.joint else 'separate'})"]
    for name, enc in data.encoded.items():
        loader = make_loader(enc, tok, train_cfg, shuffle=True, seed=seed)
        lines.append(f"split {name}: {len(data.corpus[name])} pairs, {len(enc)} kept, "
                     f"{int(enc.src_offsets[-1])} source / {int(enc.tgt_offsets[-1])} target tokens, "
                     f"{len(loader)} batches")
    return lines
