"""Beam search in log-probabilities, batched, with the key/value cache.

Each step is tensor operations over all live sentences at once (``BeamStep``: no Python loop over
sentences or candidates); the loop in ``beam_search`` only calls the model, drops the sentences
that are done and reorders the cache. Outputs are ``Hypothesis`` lists (token ids without bos/eos).

Terms: a *live* hypothesis can still be extended; a *finished* one ended with eos or at the
sentence's length limit. Scores are sums of log-probabilities divided by the GNMT length penalty
lp(L) = ((5 + L) / 6) ** alpha of the hypothesis length L (eos counted; alpha >= 0), or with
``decode.len_penalty_form=power`` by L ** alpha, `transformers`' and CTranslate2's form.

Stopping rules (``decode.stopping``):

- ``exact`` (default): a sentence stops only when none of its live hypotheses can still beat the
  worst of its K finished ones. A live hypothesis with cumulative log-probability s after t
  tokens ends at some length L <= limit with a log-probability <= s (every further token adds a
  log-probability <= 0), so its score is at most s / lp(L) <= s / lp(limit) (s <= 0 and lp grows
  with L for alpha >= 0). When the best live s / lp(limit) is <= the worst finished score, no
  continuation can enter the K best, and stopping returns what running to the length limit would.
  Every live hypothesis's eos extension is a candidate for the finished list, which keeps the K
  best scores seen.
- ``first_k``: fairseq's rule, for comparability: a sentence stops as soon as K hypotheses have
  finished; an eos extension finishes only when it ranks among the K best candidates of its step
  (by log-probability), and only into free slots. With beam 1 this is greedy search.

Exactly tied scores are ordered as ``torch.topk`` returns them (deterministic for the same input
on the same device, but by no stated key: ``topk`` is not stable).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from experiment.decode_config import STOPPING_RULES
from models.transformer import Transformer
from search.greedy import max_lengths, next_logits

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """A finished translation: token ids (no bos/eos), summed log-probability (eos included) and
    the length-normalised score used for ranking."""

    tokens: list[int]
    log_prob: float
    score: float


def length_penalty(length: int | torch.Tensor, alpha: float, form: str = "gnmt") -> float | torch.Tensor:
    """GNMT (Wu et al. 2016): ((5 + length) / 6) ** alpha, or ``form`` ``power``: length ** alpha
    (`transformers`' and CTranslate2's); alpha 0 disables normalisation. Both grow with the length
    for alpha >= 0, which the exact stopping rule needs."""
    return (length * 1.0) ** alpha if form == "power" else ((5.0 + length) / 6.0) ** alpha


@dataclass
class Finished:
    """The K best finished hypotheses of every sentence (slots with score -inf are empty).

    score, log_prob: (N, K); tokens: (N, K, L) token ids, the first ``n_tokens`` of each row valid;
    n_tokens: (N, K).
    """

    score: torch.Tensor
    log_prob: torch.Tensor
    tokens: torch.Tensor
    n_tokens: torch.Tensor

    @classmethod
    def empty(cls, n: int, k: int, max_tokens: int, device: torch.device) -> Finished:
        return cls(torch.full((n, k), NEG_INF, device=device), torch.full((n, k), NEG_INF, device=device),
                   torch.zeros(n, k, max_tokens, dtype=torch.long, device=device),
                   torch.zeros(n, k, dtype=torch.long, device=device))

    def count(self, rows: torch.Tensor) -> torch.Tensor:
        """(b,) number of filled slots of the sentences ``rows``."""
        return self.score[rows].gt(NEG_INF).sum(1)

    def merge(self, rows: torch.Tensor, score: torch.Tensor, log_prob: torch.Tensor, tokens: torch.Tensor,
              n_tokens: torch.Tensor) -> None:
        """Keep, for each sentence in ``rows`` (b,), the K best of its finished hypotheses and the
        new ones (b, M) (-inf: not a candidate); tokens (b, M, L)."""
        k = self.score.size(1)
        all_score = torch.cat([self.score[rows], score], 1)
        best = all_score.topk(k, dim=1).indices  # (b, K)

        def pick(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
            both = torch.cat([old[rows], new], 1)
            index = best if both.dim() == 2 else best[:, :, None].expand(-1, -1, both.size(2))
            return both.gather(1, index)

        self.score[rows] = all_score.gather(1, best)
        self.log_prob[rows] = pick(self.log_prob, log_prob)
        self.tokens[rows] = pick(self.tokens, tokens)
        self.n_tokens[rows] = pick(self.n_tokens, n_tokens)

    def hypotheses(self, nbest: int) -> list[list[Hypothesis]]:
        """Per sentence, its ``nbest`` best finished hypotheses, best first."""
        order = self.score.argsort(dim=1, descending=True, stable=True)[:, :nbest]
        score = self.score.gather(1, order).tolist()
        log_prob = self.log_prob.gather(1, order).tolist()
        n_tokens = self.n_tokens.gather(1, order).tolist()
        tokens = self.tokens.gather(1, order[:, :, None].expand(-1, -1, self.tokens.size(2))).tolist()
        return [[Hypothesis(tokens[i][j][:n_tokens[i][j]], log_prob[i][j], score[i][j])
                 for j in range(len(order[i])) if score[i][j] > NEG_INF] for i in range(len(score))]


def select_live(scores: torch.Tensor, logits: torch.Tensor, eos_id: int, beam: int,
                banned: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's candidates (a pure function).

    scores: (b, K) cumulative log-probabilities of the live hypotheses (-inf: empty slot);
    logits: (b, K, V) next-token logits; ``banned`` token ids are never extended. Returns (eos:
    (b, K) the cumulative log-probability of each live hypothesis closed by eos, live: (b, K) the
    K best extensions by another token, best first, their source beams (b, K) and tokens (b, K)).

    Candidates are eos and each hypothesis's K best other tokens, the only extensions that can be
    among its sentence's K best (a hypothesis's score is the same for all its extensions): the
    scores are added to those, not to the whole (b, K, V) table.
    """
    b, k, v = logits.shape
    log_probs = torch.log_softmax(logits, dim=-1)  # over every token: banned ones are not renormalised away
    if banned is not None and len(banned):
        log_probs.index_fill_(-1, banned, NEG_INF)
    eos = scores + log_probs[:, :, eos_id]
    log_probs[:, :, eos_id] = NEG_INF
    top, ids = log_probs.topk(min(beam, v), dim=-1)  # (b, K, K')
    total = scores[:, :, None] + top
    live, flat = total.view(b, -1).topk(beam, dim=1)
    width = top.size(-1)
    return eos, live, flat // width, ids.view(b, -1).gather(1, flat)


def first_k_closing(eos: torch.Tensor, live: torch.Tensor, at_limit: torch.Tensor,
                    free: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fairseq's rule: only candidates among the K best of the step close, into the sentence's
    ``free`` (b,) slots, best first. eos, live: (b, K) as ``select_live`` returns them; at_limit (b,)
    -> the eos closings and the at-limit closings (b, K) each, -inf where a candidate stays open."""
    k = eos.size(1)
    kth = torch.cat([eos, live], 1).topk(k, dim=1).values[:, -1:]
    eos = eos.masked_fill(eos < kth, NEG_INF)
    closing = torch.where(at_limit[:, None], live.masked_fill(live < kth, NEG_INF), NEG_INF)
    both = torch.cat([eos, closing], 1)
    rank = both.argsort(dim=1, descending=True, stable=True).argsort(dim=1)
    both = both.masked_fill(rank >= free[:, None], NEG_INF)
    return both[:, :k], both[:, k:]


def closed_tokens(history: torch.Tensor, beams: torch.Tensor, next_tokens: torch.Tensor,
                  max_steps: int) -> torch.Tensor:
    """The tokens of a step's finished candidates (b, 2K, max_steps): each live slot closed by eos
    (its ``history`` (b, K, step) as it is), then the K live extensions closed at the length limit
    as they are (their source ``beams`` (b, K)'s history and their ``next_tokens`` (b, K) kept)."""
    b, k, step = history.shape
    closed = torch.zeros(b, 2 * k, max_steps, dtype=torch.long, device=history.device)
    closed[:, :k, :step] = history
    closed[:, k:, :step] = history.gather(1, beams[:, :, None].expand(-1, -1, step))
    closed[:, k:, step] = next_tokens
    return closed


def close_step(finished: Finished, sentences: torch.Tensor, history: torch.Tensor,
               candidates: tuple[torch.Tensor, ...], limits: torch.Tensor, stopping: str, len_penalty: float,
               max_steps: int, penalty_form: str = "gnmt") -> torch.Tensor:
    """One step's closings merged into ``finished`` and which live sentences are done (b,) bool.

    history: (b, K, step) the live hypotheses' tokens; candidates: eos, live, beams, next_tokens as
    ``select_live`` returns them; limits: (b,) each live sentence's length limit. Closed are each
    live slot by eos and, at the limit, the K live extensions as they are (their token kept); a
    sentence is done by its stopping rule, at its limit, or with no live hypothesis left."""
    eos, live, beams, next_tokens = candidates
    k, step = eos.size(1), history.size(2)
    length = step + 1  # of every hypothesis closed now (eos or the limit's last token)
    at_limit = limits <= length
    if stopping == "first_k":
        eos, closing = first_k_closing(eos, live, at_limit, k - finished.count(sentences))
    else:
        closing = torch.where(at_limit[:, None], live, NEG_INF)
    closed_log_prob = torch.cat([eos, closing], 1)
    finished.merge(sentences, closed_log_prob / length_penalty(length, len_penalty, penalty_form), closed_log_prob,
                   closed_tokens(history, beams, next_tokens, max_steps),
                   torch.cat([torch.full_like(eos, step, dtype=torch.long),
                              torch.full_like(closing, length, dtype=torch.long)], 1))
    done = live[:, 0].eq(NEG_INF) | at_limit
    full = finished.count(sentences) >= k
    if stopping == "first_k":
        return done | full
    worst = finished.score[sentences].min(1).values  # -inf unless K have finished
    return done | (full & (live[:, 0] / length_penalty(limits.float(), len_penalty, penalty_form) <= worst))


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, bos_id: int, eos_id: int, beam: int = 5,
                nbest: int = 1, len_penalty: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10,
                use_cache: bool = True, banned_ids: tuple[int, ...] = (), stopping: str = "exact",
                exact_lengths: torch.Tensor | None = None, penalty_form: str = "gnmt") -> list[list[Hypothesis]]:
    """Batched beam search: src (B, S) -> for each sentence its ``nbest`` best hypotheses, best first.

    Layout: the live hypotheses of all unfinished sentences sit in one flat (b·K) batch (row
    i·K + j: hypothesis j of live sentence i); each step reorders the cache with one index. A
    sentence is done by its stopping rule (module docstring), at its length limit (its live
    hypotheses are then closed as they are, without eos), or when it has no live hypothesis;
    done sentences leave the batch. ``banned_ids`` are never generated. ``exact_lengths`` (N,): the
    oracle length, each hypothesis exactly that many tokens (at least 1): eos is never a candidate and
    the length limit closes the live hypotheses, ranked by their log-probability at that length.
    """
    if nbest > beam:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
    if stopping not in STOPPING_RULES:
        raise ValueError(f"unknown stopping rule {stopping!r}; choose one of {', '.join(STOPPING_RULES)}")
    device, n_sent, k = src.device, src.size(0), beam
    encoded = model.encode(src)
    limits = max_lengths(encoded.lengths, max_len_a, max_len_b)  # (N,)
    if exact_lengths is not None:
        limits, banned_ids = exact_lengths.to(device).clamp(min=1), (*banned_ids, eos_id)
    max_steps = int(limits.max())
    finished = Finished.empty(n_sent, k, max_steps, device)
    # with the cache, the K hypotheses of a sentence share its memory row (DecoderCache.group);
    # without it, each hypothesis gets a copy of its sentence's row
    memory = encoded if use_cache else encoded.select(torch.arange(n_sent, device=device).repeat_interleave(k))
    sentences = torch.arange(n_sent, device=device)  # original index of each live sentence
    scores = torch.full((n_sent, k), NEG_INF, device=device)
    scores[:, 0] = 0.0  # all K slots start as the same bos prefix: keep one
    tokens = torch.zeros(n_sent * k, 0, dtype=torch.long, device=device)  # generated so far (no bos)
    last = torch.full((n_sent * k, 1), bos_id, dtype=torch.long, device=device)
    banned = torch.tensor(banned_ids, dtype=torch.long, device=device)
    cache = model.start_decoding(memory, group=k) if use_cache else None
    for step in range(max_steps):
        prefix = last if use_cache else torch.cat([torch.full_like(last, bos_id), tokens], 1)
        logits, cache = next_logits(model, prefix, memory, cache, use_cache)
        b = len(sentences)
        eos, live, beams, next_tokens = select_live(scores, logits.float().view(b, k, -1), eos_id, k, banned)
        done = close_step(finished, sentences, tokens.view(b, k, step), (eos, live, beams, next_tokens),
                          limits[sentences], stopping, len_penalty, max_steps, penalty_form)
        keep = (~done).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        rows = (keep[:, None] * k + beams[keep]).view(-1)  # rows of the old flat batch
        last = next_tokens[keep].view(-1, 1)
        tokens = torch.cat([tokens[rows], last], 1)
        scores = live[keep]
        same_sentences = len(keep) == b
        sentences = sentences[keep]
        if use_cache:
            cache = cache.reorder(rows, memory_index=None if same_sentences else keep)
        else:
            memory = memory.select(rows)
    return finished.hypotheses(nbest)
