"""Shared set-up of the benchmarks: the benchmark model, its batches, device, peak memory."""
from __future__ import annotations

import multiprocessing as mp
import resource
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from data.batching import Batch
from data.encoded import EncodedSplit
from data.pipeline import make_loader
from experiment.config import load_config
from models.config import ModelConfig
from models.dropout import Dropout
from models.transformer import Transformer
from training.engine import train_loss
from training.loss import token_loss
from utils.device import device_name as _device_name

VOCAB = 8000
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def bench_model_config(scheme: str = "sinusoidal") -> ModelConfig:
    """The benchmark model: d_model 256, 4 heads, 3+3 layers, ffn 1024, joint vocabulary 8000."""
    return load_config(None, ["model.d_model=256", "model.n_heads=4", "model.n_encoder_layers=3",
                              "model.n_decoder_layers=3", "model.d_ff=1024", "model.dropout=0.1",
                              f"model.positional.name={scheme}"]).model


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name() -> str:
    return _device_name(device())


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_mb() -> float:
    """Peak GPU memory on CUDA, else the process's peak resident memory."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return peak_rss_mb()


def in_subprocess(fn: Callable[..., Any], *args) -> Any:
    """Run fn(*args) in a fresh process (its own peak memory), return its result."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def multi30k_shaped_split(pairs: int = 29_000, seed: int = 0) -> EncodedSplit:
    """Random token ids with Multi30k's shape after the 8k SentencePiece model: 29,000 pairs,
    source lengths around 16.6 tokens (sd 5), targets about 0.87 of their source (Multi30k's
    train split: 482,842 source and 418,116 target tokens)."""
    rng = np.random.default_rng(seed)
    src_len = np.clip(np.rint(rng.normal(16.6, 5.0, pairs)), 4, 60).astype(np.int64)
    tgt_len = np.clip(np.rint(src_len * 0.87 + rng.normal(0, 2.0, pairs)), 3, 60).astype(np.int64)

    def flat(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return rng.integers(4, VOCAB, int(offsets[-1])).astype(np.int32), offsets

    (src, src_off), (tgt, tgt_off) = flat(src_len), flat(tgt_len)
    return EncodedSplit("train", src, src_off, tgt, tgt_off, np.arange(pairs))


class BenchTokens:
    """The special ids a loader needs, and token names for an exported model (the benchmarks have
    no trained tokenizer)."""

    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS
    src_vocab_size = tgt_vocab_size = VOCAB
    SPECIALS = {PAD: "<pad>", UNK: "<unk>", BOS: "<s>", EOS: "</s>"}

    @classmethod
    def src_pieces(cls, ids: list[int]) -> list[str]:
        return [cls.SPECIALS.get(i, f"w{i}") for i in ids]

    tgt_pieces = src_pieces


def multi30k_batches(n: int, seed: int = 1) -> list[Batch]:
    """The first ``n`` training batches of ``multi30k_shaped_split`` under the Multi30k recipe's
    4,096-token budget (the project's sampler and collator, shuffled with ``seed``)."""
    train_cfg = load_config(None, ["train.max_tokens=4096"]).train
    loader = make_loader(multi30k_shaped_split(), BenchTokens, train_cfg, shuffle=True, seed=seed)
    return [batch for batch, _ in zip(loader, range(n))]


def training_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch,
                    smoothing: float = 0.1) -> int:
    """The project's bare update, as the trainer computes it (``training.engine.train_loss``:
    fused output projection + label-smoothed loss over real tokens, full precision), then
    backward and the optimizer step. Returns the batch's real target tokens."""
    loss, ntokens = train_loss(model, batch, PAD, smoothing, None)
    optimizer.zero_grad(set_to_none=True)
    (loss / max(ntokens, 1)).backward()
    optimizer.step()
    return ntokens


def as_reference(model: torch.nn.Module) -> torch.nn.Module:
    """The model with ``nn.Dropout`` modules (PyTorch's CPU mask) in place of ``models.dropout``'s:
    with ``reference_update`` it trains the textbook way (the reference of the speed benchmarks)."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Dropout):
                setattr(module, name, torch.nn.Dropout(child.p))
    return model


def reference_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch,
                     smoothing: float = 0.1) -> int:
    """``training_update`` as it was before the fused loss: logits of every position, then
    ``F.cross_entropy`` with label smoothing (``training.loss.token_loss``)."""
    loss, ntokens = token_loss(model(batch.src, batch.tgt_in), batch.tgt_out, PAD, smoothing)
    optimizer.zero_grad(set_to_none=True)
    (loss / max(ntokens, 1)).backward()
    optimizer.step()
    return ntokens


def warmed_up(updates: int, scheme: str = "sinusoidal", reference: bool = False):
    """The benchmark model of ``scheme`` (seed 0), its Adam optimizer and its update (``training_update``,
    or with ``reference`` the textbook one, ``reference_update``) after two warm-up updates, and the
    ``updates`` Multi30k-shaped batches to measure on: (model, optimizer, update, batches)."""
    torch.manual_seed(0)
    model = Transformer(bench_model_config(scheme), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).train()
    update = reference_update if reference else training_update
    if reference:
        as_reference(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = multi30k_batches(updates + 2)
    for batch in batches[:2]:
        update(model, optimizer, batch)
    return model, optimizer, update, batches[2:]
