"""Training-step throughput (forward + backward + Adam step) per positional scheme, and for a
torch.nn.Transformer model of the same size with sinusoidal encodings, on the same batches.

Batches: ``BATCHES`` x 64 sentence pairs with source/target lengths drawn from 10..30 tokens
(seeded), padded per batch. Throughput counts real target tokens. All models live in one
process and take their steps round-robin on the same batches (so drifts of the machine's speed
hit every model alike); each model's figure is the median over its measured steps. Peak memory
is measured separately, one fresh process per model (``peak_memory``).
"""
from __future__ import annotations

import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from bench.common import BOS, EOS, PAD, VOCAB, bench_model_config, device, peak_memory_mb, synchronize
from data.batching import Batch
from models.positional.sinusoidal import sinusoidal_table
from models.transformer import Transformer
from training.engine import train_loss

SENTENCES = 64
BATCHES = 8
WARMUP = 2
ROUNDS = 10


def make_batches(seed: int = 0, n: int = BATCHES, sentences: int = SENTENCES, min_len: int = 10,
                 max_len: int = 30, vocab: int = VOCAB) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``n`` batches of ``sentences`` random pairs, source and target lengths drawn from
    min_len..max_len tokens (seeded): (src, tgt_in, tgt_out), padded to the batch's longest."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        src_len = torch.randint(min_len, max_len + 1, (sentences,), generator=g)
        tgt_len = torch.randint(min_len, max_len + 1, (sentences,), generator=g)
        src = torch.full((sentences, int(src_len.max()) + 1), PAD)
        tgt = torch.full((sentences, int(tgt_len.max()) + 1), PAD)
        for i in range(sentences):
            src[i, :src_len[i]] = torch.randint(4, vocab, (int(src_len[i]),), generator=g)
            src[i, src_len[i]] = EOS
            tgt[i, :tgt_len[i]] = torch.randint(4, vocab, (int(tgt_len[i]),), generator=g)
            tgt[i, tgt_len[i]] = EOS
        tgt_in = torch.cat([torch.full((sentences, 1), BOS), tgt[:, :-1]], 1).masked_fill(
            torch.cat([torch.zeros(sentences, 1, dtype=torch.bool), tgt[:, :-1].eq(PAD)], 1), PAD)
        batches.append((src, tgt_in, tgt))
    return batches


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal encodings and a tied output layer."""

    def __init__(self, cfg, vocab: int = VOCAB):
        super().__init__()
        self.embed = nn.Embedding(vocab, cfg.d_model, padding_idx=PAD)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers,
                                   cfg.d_ff, cfg.dropout, batch_first=True)
        self.out = nn.Linear(cfg.d_model, vocab, bias=False)
        self.out.weight = self.embed.weight
        self.register_buffer("pe", sinusoidal_table(1024, cfg.d_model), persistent=False)
        self.scale = math.sqrt(cfg.d_model)

    def forward(self, src, tgt_in):
        s = self.embed(src) * self.scale + self.pe[: src.size(1)]
        t = self.embed(tgt_in) * self.scale + self.pe[: tgt_in.size(1)]
        t_len = tgt_in.size(1)
        causal = torch.ones(t_len, t_len, dtype=torch.bool, device=src.device).triu(1)  # True = hidden
        h = self.core(s, t, tgt_mask=causal, src_key_padding_mask=src.eq(PAD),
                      tgt_key_padding_mask=tgt_in.eq(PAD), memory_key_padding_mask=src.eq(PAD),
                      tgt_is_causal=True)
        return self.out(h)


def build(scheme: str, dev: torch.device):
    torch.manual_seed(0)
    cfg = bench_model_config("sinusoidal" if scheme == "torch_nn_transformer" else scheme)
    model = TorchTransformer(cfg) if scheme == "torch_nn_transformer" else \
        Transformer(cfg, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True)
    model = model.to(dev).train()
    return model, torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)


def step(model, opt, batch, amp) -> float:
    """One forward + backward + Adam step; returns its seconds. The project's models compute their
    loss as the trainer does (``training.engine.train_loss``); torch.nn.Transformer the way its
    users write it (logits of every position, ``F.cross_entropy`` with label smoothing)."""
    src, tgt_in, tgt_out = batch
    synchronize()
    start = time.perf_counter()
    if isinstance(model, Transformer):
        loss, ntokens = train_loss(model, Batch(src, tgt_in, tgt_out, None), PAD, 0.1, amp)
        loss = loss / max(ntokens, 1)
    else:
        with torch.autocast(src.device.type, dtype=amp, enabled=amp is not None):
            logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(), ignore_index=PAD,
                               label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    synchronize()
    return time.perf_counter() - start


def measure_all(schemes: list[str], rounds: int = ROUNDS) -> dict[str, dict]:
    """{scheme: {tokens_per_s, step_ms}}, models stepped round-robin on the same batches."""
    dev = device()
    amp = torch.bfloat16 if dev.type == "cuda" else None
    batches = [tuple(t.to(dev) for t in b) for b in make_batches()]
    models = {s: build(s, dev) for s in schemes}
    for model, opt in models.values():
        for batch in batches[:WARMUP]:
            step(model, opt, batch, amp)
    rates: dict[str, list[float]] = {s: [] for s in schemes}
    times: dict[str, list[float]] = {s: [] for s in schemes}
    for r in range(rounds):
        batch = batches[r % len(batches)]
        tokens = int(batch[2].ne(PAD).sum())
        for s, (model, opt) in models.items():
            seconds = step(model, opt, batch, amp)
            rates[s].append(tokens / seconds)
            times[s].append(seconds)
    return {s: {"tokens_per_s": statistics.median(rates[s]), "step_ms": 1000 * statistics.median(times[s])}
            for s in schemes}


def peak_memory(scheme: str) -> float:
    """Peak memory (MB) of a fresh process training ``scheme`` for a few steps."""
    dev = device()
    model, opt = build(scheme, dev)
    for batch in make_batches()[:3]:
        step(model, opt, tuple(t.to(dev) for t in batch), torch.bfloat16 if dev.type == "cuda" else None)
    return peak_memory_mb()
