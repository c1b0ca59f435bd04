"""Decoding: batched greedy search with the key/value cache.

Every search works on a batch of sentences at once; a sentence that has produced end-of-sentence
(or reached its length limit ``a * source_length + b``) leaves the batch, so no model work is
spent on it. Outputs are token-id lists without bos/eos.
"""
from __future__ import annotations

import torch

from models.transformer import Transformer


def max_lengths(src_lengths: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """(B,) output length limits a * source_length + b (at least 1)."""
    return (src_lengths.float() * a + b).long().clamp(min=1)


@torch.no_grad()
def greedy_search(model: Transformer, src: torch.Tensor, bos_id: int, eos_id: int,
                  max_len_a: float = 1.5, max_len_b: int = 10, use_cache: bool = True) -> list[list[int]]:
    """src: (B, S) padded source ids (with eos) -> B token-id lists (no bos/eos).

    ``use_cache=False`` recomputes the whole prefix at each step (for tests and benchmarks).
    """
    memory, memory_mask = model.encode(src)
    limits = max_lengths((~memory_mask).sum(1), max_len_a, max_len_b)
    outputs: list[list[int]] = [[] for _ in range(src.size(0))]
    active = torch.arange(src.size(0), device=src.device)  # original row of each live sentence
    prefix = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    cache = None
    for step in range(int(limits.max())):
        if use_cache:
            logits, cache = model.decode(prefix[:, -1:], memory, memory_mask, cache)
        else:
            logits, _ = model.decode(prefix, memory, memory_mask)
        next_tokens = logits[:, -1].argmax(-1)
        finished = next_tokens.eq(eos_id) | (step + 1 >= limits[active])
        for row, token in zip(active.tolist(), next_tokens.tolist()):
            if token != eos_id:
                outputs[row].append(token)
        prefix = torch.cat([prefix, next_tokens[:, None]], 1)
        if finished.any():
            keep = (~finished).nonzero().squeeze(1)
            if len(keep) == 0:
                break
            active, memory, memory_mask, prefix = active[keep], memory[keep], memory_mask[keep], prefix[keep]
            if cache is not None:
                cache = cache.reorder(keep)
    return outputs


def translate_ids(model: Transformer, sources: list, tokenizer, decode_cfg, device: torch.device,
                  beam: int | None = None) -> list[str]:
    """Translate tokenized sources (id sequences without eos) into detokenized strings, in order.

    Sentences are sorted by length and decoded ``decode_cfg.batch_size`` at a time.
    """
    from data.batching import pad_sequences

    beam = decode_cfg.beam if beam is None else beam
    if beam != 1:
        raise NotImplementedError("beam search arrives with the decoding issue; use beam=1")
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    hyps: list[str] = [""] * len(sources)
    for start in range(0, len(order), decode_cfg.batch_size):
        rows = order[start:start + decode_cfg.batch_size]
        src = pad_sequences([sources[i] for i in rows], tokenizer.pad_id, suffix=tokenizer.eos_id).to(device)
        for i, ids in zip(rows, greedy_search(model, src, tokenizer.bos_id, tokenizer.eos_id,
                                              decode_cfg.max_len_a, decode_cfg.max_len_b)):
            hyps[i] = tokenizer.decode_tgt(ids)
    return hyps
