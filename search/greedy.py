"""Greedy search: the most probable next token at each step, batched, with the key/value cache.

A sentence that is finished (end-of-sentence, or its length limit ``a * source_length + b``) leaves
the batch, so no model work is spent on it. Outputs are token-id lists without bos/eos.
"""
from __future__ import annotations

import torch

from models.transformer import DecoderCache, EncoderOutput, Transformer


def max_lengths(src_lengths: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """(B,) output length limits a * source_length + b (at least 1)."""
    return (src_lengths.float() * a + b).long().clamp(min=1)


def next_logits(model: Transformer, prefix: torch.Tensor, memory: EncoderOutput, cache: DecoderCache,
                use_cache: bool) -> tuple[torch.Tensor, DecoderCache]:
    """(B, V) logits of the next token after ``prefix`` (B, t) and the cache to use next: with the
    cache only the last token is fed; without it the whole prefix again over ``memory``."""
    if use_cache:
        out = model.decode(prefix[:, -1:], cache)
        return out.logits[:, -1], out.cache
    return model.decode(prefix, model.start_decoding(memory)).logits[:, -1], cache


@torch.no_grad()
def greedy_search(model: Transformer, src: torch.Tensor, bos_id: int, eos_id: int,
                  max_len_a: float = 1.5, max_len_b: int = 10, use_cache: bool = True,
                  banned_ids: tuple[int, ...] = (), exact_lengths: torch.Tensor | None = None) -> list[list[int]]:
    """src: (B, S) padded source ids (with eos) -> B token-id lists (no bos/eos).

    ``banned_ids`` (pad, bos) are never generated. ``use_cache=False`` recomputes the whole
    prefix at each step (for tests and benchmarks). ``exact_lengths`` (B,): each output has exactly
    that many tokens (at least 1; eos never chosen, the length limit closes it): the oracle length.
    """
    memory = model.encode(src)
    limits = max_lengths(memory.lengths, max_len_a, max_len_b)
    if exact_lengths is not None:
        limits, banned_ids = exact_lengths.to(limits.device).clamp(min=1), (*banned_ids, eos_id)
    outputs: list[list[int]] = [[] for _ in range(src.size(0))]
    active = torch.arange(src.size(0), device=src.device)  # original row of each live sentence
    prefix = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    cache = model.start_decoding(memory)
    banned = torch.tensor(banned_ids, dtype=torch.long, device=src.device)
    for step in range(int(limits.max())):
        step_logits, cache = next_logits(model, prefix, memory, cache, use_cache)
        if banned_ids:  # in place: the step's logits are not used again
            step_logits.index_fill_(-1, banned, float("-inf"))
        next_tokens = step_logits.max(-1).indices  # max's indices: several times faster than argmax on CPU
        finished = next_tokens.eq(eos_id) | (step + 1 >= limits[active])
        for row, token in zip(active.tolist(), next_tokens.tolist()):
            if token != eos_id:
                outputs[row].append(token)
        prefix = torch.cat([prefix, next_tokens[:, None]], 1)
        if finished.any():
            keep = (~finished).nonzero().squeeze(1)
            if len(keep) == 0:
                break
            active, prefix = active[keep], prefix[keep]
            if use_cache:
                cache = cache.reorder(keep)
            else:
                memory = memory.select(keep)
    return outputs


