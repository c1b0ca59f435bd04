"""Greedy and beam search: equivalences, exhaustive optimum, log-probability scores, ties, EOS."""
from __future__ import annotations

import itertools

import pytest
import torch

from models.transformer import Transformer
from experiment.config import load_config
from search.beam import beam_search, length_penalty, select_candidates
from search.greedy import greedy_search

PAD, UNK, BOS, EOS = 0, 1, 2, 3
BANNED = (PAD, BOS)


def model(vocab=8, scheme="rope", seed=0, tie=True):
    cfg = load_config(None, [f"model.positional.name={scheme}", "model.d_model=32", "model.n_heads=4",
                             "model.d_ff=64", "model.n_encoder_layers=1", "model.n_decoder_layers=2",
                             f"model.tie_embeddings={str(tie).lower()}"]).model
    torch.manual_seed(seed)
    m = Transformer(cfg, vocab, vocab, pad_id=PAD, joint_vocab=True).eval()
    with torch.no_grad():  # sharpen the output distribution a little so that searches differ
        m.output.weight.mul_(3.0)
    return m


def sources(vocab=8, seed=1, b=4, s=6):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (b, s), generator=g)
    src[:, -1] = EOS
    src[1, 3:] = PAD
    src[1, 2] = EOS
    return src


@torch.no_grad()
def sequence_log_prob(m, src_row, tokens):
    """Teacher-forced sum of log-probabilities of `tokens` (which may end with EOS)."""
    src = src_row[None]
    tgt_in = torch.tensor([[BOS] + tokens[:-1]])
    logp = torch.log_softmax(m(src, tgt_in)[0].float(), -1)
    return sum(logp[t, tok].item() for t, tok in enumerate(tokens))


@pytest.mark.parametrize("scheme", ["rope", "t5", "sinusoidal"])
def test_beam_of_one_is_greedy_and_cache_changes_nothing(scheme):
    m, src = model(scheme=scheme), sources()
    greedy = greedy_search(m, src, BOS, EOS, 1.0, 4, banned_ids=BANNED)
    assert greedy == greedy_search(m, src, BOS, EOS, 1.0, 4, use_cache=False, banned_ids=BANNED)
    beam1 = beam_search(m, src, BOS, EOS, beam=1, max_len_a=1.0, max_len_b=4, banned_ids=BANNED)
    assert [h[0].tokens for h in beam1] == greedy
    cached = beam_search(m, src, BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=4, banned_ids=BANNED)
    uncached = beam_search(m, src, BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=4, use_cache=False,
                           banned_ids=BANNED)
    assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]


def exhaustive_best(m, src_row, max_len, vocab, alpha):
    """Best score over every output the search can produce within max_len tokens."""
    allowed = [t for t in range(vocab) if t not in BANNED]
    best = None
    for length in range(1, max_len + 1):
        for seq in itertools.product(allowed, repeat=length):
            if EOS in seq[:-1] or (length < max_len and seq[-1] != EOS):
                continue  # eos only at the end; shorter outputs must end with eos
            score = sequence_log_prob(m, src_row, list(seq)) / length_penalty(length, alpha)
            if best is None or score > best[0]:
                best = (score, [t for t in seq if t != EOS])
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("max_len, beam", [(2, 6), (3, 16)])
def test_wide_beam_finds_the_exhaustive_optimum(alpha, max_len, beam):
    vocab = 6  # four generable tokens: unk, eos, 4, 5
    m = model(vocab=vocab, seed=3)
    src = sources(vocab=vocab, b=3)
    results = beam_search(m, src, BOS, EOS, beam=beam, nbest=1, len_penalty=alpha, max_len_a=0.0,
                          max_len_b=max_len, banned_ids=BANNED)
    for i in range(3):
        score, tokens = exhaustive_best(m, src[i], max_len, vocab, alpha)
        assert results[i][0].tokens == tokens
        assert results[i][0].score == pytest.approx(score, abs=1e-4)


def test_scores_are_sums_of_log_probabilities_best_first():
    m, src = model(), sources()
    results = beam_search(m, src, BOS, EOS, beam=5, nbest=5, len_penalty=0.0, max_len_a=1.0,
                          max_len_b=3, banned_ids=BANNED)
    for i, hyps in enumerate(results):
        assert len(hyps) == 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            ended = len(h.tokens) < int(src[i].ne(PAD).sum()) + 3
            tokens = h.tokens + ([EOS] if ended else [])
            assert h.log_prob == pytest.approx(sequence_log_prob(m, src[i], tokens), abs=1e-4)
            assert h.log_prob <= 0  # a probability sum would be positive
            assert EOS not in h.tokens and BOS not in h.tokens


def test_length_penalty_divides_the_log_probability():
    m, src = model(), sources()
    limit = int(src[0].ne(PAD).sum()) + 3  # max_len_a 1.0, max_len_b 3
    for alpha in (0.6, 1.0):
        for h in beam_search(m, src, BOS, EOS, beam=3, nbest=3, len_penalty=alpha, max_len_a=1.0,
                             max_len_b=3, banned_ids=BANNED)[0]:
            length = len(h.tokens) + (len(h.tokens) < limit)  # eos counts when the hypothesis ended
            assert h.score == pytest.approx(h.log_prob / length_penalty(length, alpha))


def test_tied_scores_do_not_crash():
    m = model(tie=False)
    with torch.no_grad():
        m.output.weight.zero_()  # uniform distribution: every candidate ties
    results = beam_search(m, sources(), BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=2, banned_ids=BANNED)
    assert all(len(hyps) == 4 for hyps in results)
    assert results == beam_search(m, sources(), BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=2,
                                  banned_ids=BANNED)  # deterministic tie-breaking


def test_candidates_never_extend_a_closed_slot():
    scores = torch.tensor([[0.0, float("-inf")]])
    log_probs = torch.log_softmax(torch.randn(1, 2, 5), -1)
    cand_scores, beams, tokens = select_candidates(scores, log_probs, beam=2)
    finite = cand_scores[0] > float("-inf")
    assert (beams[0][finite] == 0).all() and int(finite.sum()) == 4  # 2K candidates, all from slot 0
    assert torch.all(cand_scores[0, :-1] >= cand_scores[0, 1:])


def test_finished_sentences_cost_no_more_model_work():
    m = model()
    src = sources()
    src[0, 1:] = PAD
    src[0, 1] = EOS  # a one-word source: its limit is reached first
    sizes = []
    real = m.decode

    def counting(tgt, cache, **kw):
        sizes.append(tgt.size(0))
        return real(tgt, cache, **kw)

    m.decode = counting
    beam_search(m, src, BOS, EOS, beam=3, max_len_a=1.0, max_len_b=1, banned_ids=BANNED)
    assert sizes[0] == 4 * 3 and sizes[-1] < sizes[0]
    assert sizes == sorted(sizes, reverse=True)
    sizes.clear()
    greedy_search(m, src, BOS, EOS, 1.0, 1, banned_ids=BANNED)
    assert sizes[0] == 4 and sizes[-1] < 4
