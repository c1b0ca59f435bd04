"""Beam search in log-probabilities, batched, with the key/value cache.

``select_candidates`` is one step as a pure function over log-probabilities; ``beam_search`` is the
loop that calls the model. Outputs are ``Hypothesis`` lists (token ids without bos/eos).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.transformer import Transformer
from search.greedy import max_lengths, next_logits


@dataclass
class Hypothesis:
    """A finished translation: token ids (no bos/eos), summed log-probability (eos included) and
    the length-normalised score used for ranking."""

    tokens: list[int]
    log_prob: float
    score: float


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al. 2016): ((5 + length) / 6) ** alpha; alpha 0 disables normalisation."""
    return ((5.0 + length) / 6.0) ** alpha


def select_candidates(scores: torch.Tensor, log_probs: torch.Tensor, beam: int
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One beam-search step over log-probabilities (a pure function).

    scores: (B, K) cumulative log-probabilities of the live hypotheses (-inf for empty slots);
    log_probs: (B, K, V) next-token log-probabilities. Returns the best 2K extensions per
    sentence, best first: (cumulative scores (B, 2K), source beam (B, 2K), token (B, 2K)).
    2K candidates leave K that do not end the sentence even if K of them pick eos. Ties are
    broken by the lower flat index (stable), never by comparing hypotheses themselves.
    """
    b, k, v = log_probs.shape
    total = (scores[:, :, None] + log_probs).view(b, k * v)
    n = min(2 * beam, k * v)
    top_scores, flat = total.topk(n, dim=1, sorted=True)
    return top_scores, flat // v, flat % v


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, bos_id: int, eos_id: int, beam: int = 5,
                nbest: int = 1, len_penalty: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10,
                use_cache: bool = True, banned_ids: tuple[int, ...] = ()) -> list[list[Hypothesis]]:
    """Batched beam search: src (B, S) -> for each sentence its ``nbest`` best hypotheses, best first.

    Layout: the live hypotheses of all unfinished sentences sit in one flat (B'·K) batch; each
    step reorders the cache with one index. A sentence is done when it holds K finished
    hypotheses or reaches its length limit (its live hypotheses are then closed as they are);
    done sentences leave the batch. Scores are sums of log-probabilities divided by the GNMT
    length penalty of the hypothesis length (eos counted). ``banned_ids`` are never generated.
    """
    if nbest > beam:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
    device = src.device
    n_sent = src.size(0)
    encoded = model.encode(src)
    limits = max_lengths(encoded.lengths, max_len_a, max_len_b)
    k = beam
    # Flat layout: row i*K + j is hypothesis j of the i-th live sentence.
    memory = encoded.select(torch.arange(n_sent, device=device).repeat_interleave(k))
    sentences = torch.arange(n_sent, device=device)  # original index of each live sentence
    scores = torch.full((n_sent, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all K slots start as the same bos prefix: keep one
    prefix = torch.full((n_sent * k, 1), bos_id, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(n_sent)]
    cache = model.start_decoding(memory)
    for step in range(int(limits.max())):
        logits, cache = next_logits(model, prefix, memory, cache, use_cache)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        if banned_ids:
            log_probs = log_probs.index_fill(-1, torch.tensor(banned_ids, device=device), float("-inf"))
        b, v = len(sentences), log_probs.size(-1)
        cand_scores, cand_beams, cand_tokens = select_candidates(scores, log_probs.view(b, k, v), k)
        last_step = (step + 1 >= limits[sentences]).tolist()
        cand_scores_l, cand_beams_l, cand_tokens_l = cand_scores.tolist(), cand_beams.tolist(), cand_tokens.tolist()
        new_scores = [[float("-inf")] * k for _ in range(b)]
        new_rows = [[i * k] * k for i in range(b)]  # empty slots point at the sentence's first row
        new_tokens = [[eos_id] * k for _ in range(b)]
        done = []
        prefix_list = None
        for i in range(b):
            sent = int(sentences[i])
            live = 0
            for rank, (score, src_beam, token) in enumerate(zip(cand_scores_l[i], cand_beams_l[i], cand_tokens_l[i])):
                if score == float("-inf"):
                    break
                row = i * k + src_beam
                if token == eos_id or last_step[i]:
                    # only the top K candidates may close a hypothesis (a lower-ranked eos would
                    # finish a sentence with a worse hypothesis than a live one)
                    if rank < k and len(finished[sent]) < k:
                        if prefix_list is None:
                            prefix_list = prefix[:, 1:].tolist()
                        tokens = prefix_list[row] + ([] if token == eos_id else [token])
                        length = step + 1
                        finished[sent].append(Hypothesis(tokens, score, score / length_penalty(length, len_penalty)))
                    continue
                if live < k:
                    new_scores[i][live], new_rows[i][live], new_tokens[i][live] = score, row, token
                    live += 1
            done.append(len(finished[sent]) >= k or last_step[i] or live == 0)
        done_t = torch.tensor(done, device=device)
        if done_t.all():
            break
        keep = (~done_t).nonzero().squeeze(1)  # live sentences
        kept = keep.tolist()
        rows = torch.tensor([new_rows[i] for i in kept], device=device).view(-1)  # rows of the old flat batch
        tokens_t = torch.tensor([new_tokens[i] for i in kept], device=device).view(-1, 1)
        prefix = torch.cat([prefix[rows], tokens_t], dim=1)
        scores = torch.tensor([new_scores[i] for i in kept], device=device)
        same_sentences = len(kept) == b
        sentences = sentences[keep]
        if use_cache:
            cache = cache.reorder(rows, reorder_cross=not same_sentences)
        else:
            memory = memory.select(rows)
    return [sorted(h, key=lambda x: x.score, reverse=True)[:nbest] for h in finished]


