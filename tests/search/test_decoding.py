"""Greedy and beam search: equivalences, exhaustive optimum, log-probability scores, ties, EOS."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from experiment.config import load_config
from models.transformer import Transformer
from search.beam import beam_search, length_penalty, select_live
from search.greedy import greedy_search

PAD, UNK, BOS, EOS = 0, 1, 2, 3
BANNED = (PAD, BOS)


def model(vocab=8, scheme="rope", seed=0, tie=True, cross=False):
    cfg = load_config(None, [f"model.positional.name={scheme}", "model.d_model=32", "model.n_heads=4",
                             "model.d_ff=64", "model.n_encoder_layers=1", "model.n_decoder_layers=2",
                             f"model.tie_embeddings={str(tie).lower()}",
                             f"model.positional.cross_attention={str(cross).lower()}"]).model
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


# the schemes of 2024-2025 too: fox's cache holds a third tensor (its gates) that beam search reorders
@pytest.mark.parametrize("scheme", ["rope", "t5", "sinusoidal", "p_rope", "polar", "fox", "dape_alibi", "dape_kerple",
                                    "dape_fire", "cope"])
def test_beam_of_one_is_greedy_and_cache_changes_nothing(scheme):
    m, src = model(scheme=scheme), sources()
    greedy = greedy_search(m, src, BOS, EOS, 1.0, 4, banned_ids=BANNED)
    assert greedy == greedy_search(m, src, BOS, EOS, 1.0, 4, use_cache=False, banned_ids=BANNED)
    beam1 = beam_search(m, src, BOS, EOS, beam=1, max_len_a=1.0, max_len_b=4, banned_ids=BANNED, stopping="first_k")
    assert [h[0].tokens for h in beam1] == greedy
    for rule in ("exact", "first_k"):
        cached = beam_search(m, src, BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=4, banned_ids=BANNED,
                             stopping=rule)
        uncached = beam_search(m, src, BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=4, use_cache=False,
                               banned_ids=BANNED, stopping=rule)
        assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]


@pytest.mark.parametrize("scheme", ["rope", "t5", "shaw", "alibi"])
def test_hypotheses_sharing_their_sentences_memory_decode_as_with_a_copy_each(scheme):
    """With the cache, beam search attends from a sentence's K hypotheses to one memory row
    (DecoderCache.group); without it, each hypothesis has its own copy of the row. Schemes acting
    in cross-attention too (rotation, bias, Shaw's value term), sentences that finish at different
    steps (their memory rows leave): the same hypotheses and scores."""
    m = model(scheme=scheme, cross=True, seed=2)
    src = sources(b=5, s=7)
    src[3, 2:] = PAD
    src[3, 1] = EOS  # a short source: its sentence reaches its length limit first
    for rule in ("exact", "first_k"):
        kwargs = dict(beam=3, nbest=3, max_len_a=1.0, max_len_b=2, banned_ids=BANNED, stopping=rule)
        cached, uncached = beam_search(m, src, BOS, EOS, **kwargs), beam_search(m, src, BOS, EOS, use_cache=False,
                                                                               **kwargs)
        assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]
        for hs, gs in zip(cached, uncached):
            assert [h.score for h in hs] == pytest.approx([g.score for g in gs], abs=1e-5)
    assert len({len(hs[0].tokens) for hs in cached}) > 1  # sentences did leave the batch at different steps


@torch.no_grad()
def test_grouped_cross_attention_equals_attention_over_copied_memory():
    from models.attention import MultiHeadAttention

    m = model(scheme="t5", cross=True)
    pe = m.cross_pe
    torch.manual_seed(4)
    attention = MultiHeadAttention(32, 4, cross=True).eval()
    group, t = 3, 2
    memory, x = torch.randn(2, 5, 32), torch.randn(2 * group, t, 32)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    q_pos, k_pos = torch.tensor([4, 5]), torch.arange(5)
    copied = memory.repeat_interleave(group, 0), padding.repeat_interleave(group, 0)
    want, _, want_w = attention(x, pe, q_pos, k_pos, memory=copied[0], key_padding_mask=copied[1], need_weights=True)
    got, kv, got_w = attention(x, pe, q_pos, k_pos, memory=memory, key_padding_mask=padding, need_weights=True,
                               group=group)
    assert torch.allclose(got, want, atol=1e-6) and torch.allclose(got_w, want_w, atol=1e-6)
    assert kv[0].shape == (2, 4, 5, 8)  # the memory's keys once per sentence, not per hypothesis
    cached, _, _ = attention(x, pe, q_pos, k_pos, key_padding_mask=padding, past=kv, group=group)
    assert torch.allclose(cached, want, atol=1e-6)


class RandomLM:
    """A stand-in for the model whose next-token distribution is an arbitrary (seeded, random)
    function of the sentence and the whole prefix: the search sees it through the same calls
    (``encode``, ``start_decoding``, ``decode``) with ``use_cache=False``. Cheap enough to
    enumerate every output, and peaked enough that beams really prune."""

    def __init__(self, vocab: int, seed: int, sharpness: float = 2.5):
        self.vocab, self.seed, self.sharpness = vocab, seed, sharpness

    def log_probs(self, sentence: int, prefix: tuple[int, ...]) -> list[float]:
        g = torch.Generator().manual_seed(hash((self.seed, sentence, prefix)) % (2 ** 62))
        logits = torch.randn(self.vocab, generator=g, dtype=torch.float64) * self.sharpness
        logits[list(BANNED)] = float("-inf")
        return torch.log_softmax(logits, -1).tolist()

    class Memory:
        def __init__(self, sentence_ids: torch.Tensor):
            self.sentence_ids = sentence_ids
            self.lengths = torch.ones(len(sentence_ids), dtype=torch.long)

        def select(self, rows):
            return RandomLM.Memory(self.sentence_ids[rows])

    def encode(self, src):
        return self.Memory(torch.arange(src.size(0)))

    def start_decoding(self, memory):
        return memory

    def decode(self, prefix, memory):
        logits = torch.full((prefix.size(0), prefix.size(1), self.vocab), float("-inf"))
        for row, (sentence, ids) in enumerate(zip(memory.sentence_ids.tolist(), prefix.tolist())):
            logits[row, -1] = torch.tensor(self.log_probs(sentence, tuple(ids[1:])))
        return SimpleNamespace(logits=logits)


def lp(length: int, alpha: float, form: str = "gnmt") -> float:
    """The GNMT length penalty, written out: ((5 + length) / 6) ** alpha; or the power form
    (`transformers`', CTranslate2's): length ** alpha."""
    return length ** alpha if form == "power" else ((5 + length) / 6) ** alpha


def enumerate_outputs(lm: RandomLM, sentence: int, limit: int, alpha: float,
                      form: str = "gnmt") -> list[tuple[float, float, list[int]]]:
    """(score, log-probability, tokens) of every output the search can produce: n < limit real
    tokens then eos (length n + 1), or exactly ``limit`` real tokens cut at the limit."""
    real = [t for t in range(lm.vocab) if t not in BANNED and t != EOS]
    outputs = []
    for n in range(limit + 1):
        for seq in itertools.product(real, repeat=n):
            logp = sum(lm.log_probs(sentence, seq[:i])[t] for i, t in enumerate(seq))
            if n < limit:
                logp += lm.log_probs(sentence, seq)[EOS]
            length = n + 1 if n < limit else n
            outputs.append((logp / lp(length, alpha, form), logp, list(seq)))
    return sorted(outputs, key=lambda o: -o[0])


def reference_beam(lm: RandomLM, sentence: int, beam: int, limit: int, alpha: float, rule: str, form: str = "gnmt"):
    """Beam search as plainly as it can be written, one sentence, Python lists. ``exact`` runs to
    the length limit (no early stopping at all: what the exact rule must reproduce); ``first_k``
    is fairseq's rule (stop at K finished; only the K best candidates of a step may close)."""
    live, finished = [((), 0.0)], []
    for step in range(limit):
        length, at_limit = step + 1, step + 1 >= limit
        candidates = sorted(((s + lp_t, toks, t) for toks, s in live
                             for t, lp_t in enumerate(lm.log_probs(sentence, toks)) if lp_t > float("-inf")),
                            key=lambda c: -c[0])
        extended = [c for c in candidates if c[2] != EOS][:beam]
        if rule == "exact":
            closed = [(s, toks) for s, toks, t in candidates if t == EOS]
            closed += [(s, toks + (t,)) for s, toks, t in extended] if at_limit else []
            finished = sorted(finished + [(s / lp(length, alpha, form), s, list(toks)) for s, toks in closed],
                              key=lambda f: -f[0])[:beam]
        else:
            for s, toks, t in candidates[:beam]:
                if (t == EOS or at_limit) and len(finished) < beam:
                    toks = toks if t == EOS else toks + (t,)
                    finished.append((s / lp(length, alpha, form), s, list(toks)))
            if len(finished) >= beam:
                break
        if at_limit or not extended:
            break
        live = [(toks + (t,), s) for s, toks, t in extended]
    return sorted(finished, key=lambda f: -f[0])


def search(lm, n_sentences, beam, limit, alpha, rule, nbest=None, form="gnmt"):
    src = torch.zeros(n_sentences, 1, dtype=torch.long)
    return beam_search(lm, src, BOS, EOS, beam=beam, nbest=nbest or beam, len_penalty=alpha, max_len_a=0.0,
                       max_len_b=limit, use_cache=False, banned_ids=BANNED, stopping=rule, penalty_form=form)


@pytest.mark.parametrize("form", ["gnmt", "power"])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_unpruned_beam_finds_the_exhaustive_n_best(alpha, form):
    """When the beam holds every live prefix (beam >= (real tokens)^(limit - 1)), nothing is
    pruned, and exact stopping must return the brute-force n-best: scores and tokens. (A beam as
    wide as the vocabulary is not enough in general: with 3 real tokens there are 9 prefixes of
    2 tokens, and pruning one of them can lose the optimum.)"""
    for trial in range(12):
        vocab, limit = (5, 4) if trial % 2 else (6, 3)  # 2 or 3 real tokens besides eos
        real = vocab - len(BANNED) - 1
        beam = real ** (limit - 1)
        lm = RandomLM(vocab, seed=trial)
        results = search(lm, 2, beam, limit, alpha, "exact", nbest=4, form=form)
        for sentence in range(2):
            expected = enumerate_outputs(lm, sentence, limit, alpha, form)[:4]
            got = results[sentence]
            assert [h.tokens for h in got] == [e[2] for e in expected], (trial, sentence)
            assert [h.score for h in got] == pytest.approx([e[0] for e in expected], abs=1e-5)
            assert [h.log_prob for h in got] == pytest.approx([e[1] for e in expected], abs=1e-5)


@pytest.mark.parametrize("form", ["gnmt", "power"])
@pytest.mark.parametrize("rule", ["exact", "first_k"])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_pruned_beam_equals_the_plain_reference(rule, alpha, form):
    """Beam as wide as the vocabulary, so it prunes: the batched search equals the plain
    reference written above — for ``exact`` one that never stops early, so the exact rule stops
    only when continuing could not change the K best."""
    for trial in range(15):
        vocab = 6
        limit = 2 + trial % 3
        lm = RandomLM(vocab, seed=100 + trial)
        results = search(lm, 3, vocab, limit, alpha, rule, form=form)
        for sentence in range(3):
            expected = reference_beam(lm, sentence, vocab, limit, alpha, rule, form)
            got = results[sentence]
            assert [h.tokens for h in got] == [e[2] for e in expected], (trial, sentence)
            assert [h.score for h in got] == pytest.approx([e[0] for e in expected], abs=1e-5)


def test_first_k_stops_too_early_where_exact_does_not():
    """The reason for the exact rule: over random models, fairseq's rule sometimes returns a worse
    best hypothesis than the exact rule with the same beam, and never a better one."""
    worse = 0
    for trial in range(40):
        lm = RandomLM(6, seed=500 + trial)
        exact = search(lm, 2, 3, 4, 1.0, "exact", nbest=1)
        first_k = search(lm, 2, 3, 4, 1.0, "first_k", nbest=1)
        for e, f in zip(exact, first_k):
            assert f[0].score <= e[0].score + 1e-12
            worse += f[0].score < e[0].score - 1e-9
    assert worse > 0


def test_length_penalty_is_the_gnmt_formula():
    """Hypotheses of known length: score == log-probability / ((5 + L) / 6) ** alpha, with L
    counting eos when the hypothesis ended with one (it is shorter than the limit)."""
    m, src = model(), sources()
    limit = int(src[0].ne(PAD).sum()) + 3  # max_len_a 1.0, max_len_b 3
    for alpha in (0.0, 0.6, 1.0):
        for h in beam_search(m, src, BOS, EOS, beam=3, nbest=3, len_penalty=alpha, max_len_a=1.0,
                             max_len_b=3, banned_ids=BANNED)[0]:
            length = len(h.tokens) + 1 if len(h.tokens) < limit else limit
            assert h.score == pytest.approx(h.log_prob / ((5 + length) / 6) ** alpha, rel=1e-6)
    assert length_penalty(7, 0.6) == pytest.approx((12 / 6) ** 0.6)


def test_scores_are_sums_of_log_probabilities_best_first():
    m, src = model(), sources()
    results = beam_search(m, src, BOS, EOS, beam=5, nbest=5, len_penalty=0.0, max_len_a=1.0,
                          max_len_b=3, banned_ids=BANNED)
    for i, hyps in enumerate(results):
        assert len(hyps) == 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5  # no duplicates
        for h in hyps:
            ended = len(h.tokens) < int(src[i].ne(PAD).sum()) + 3
            tokens = h.tokens + ([EOS] if ended else [])
            assert h.log_prob == pytest.approx(sequence_log_prob(m, src[i], tokens), abs=1e-4)
            assert h.log_prob <= 0  # a probability sum would be positive
            assert EOS not in h.tokens and BOS not in h.tokens


@pytest.mark.parametrize("rule", ["exact", "first_k"])
def test_n_best_lists_are_sorted_and_distinct(rule):
    for trial in range(10):
        lm = RandomLM(6, seed=900 + trial)
        for hyps in search(lm, 3, 4, 3, 0.6, rule):
            assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
            assert len({tuple(h.tokens) for h in hyps}) == len(hyps)


def test_ties_are_deterministic_and_never_duplicate():
    """Exactly tied scores are ordered as torch.topk returns them (search/beam.py says so): the
    same input gives the same output, and ties never produce the same hypothesis twice."""
    m = model(tie=False)
    with torch.no_grad():
        m.output.weight.zero_()  # uniform distribution: every candidate ties
    for rule in ("exact", "first_k"):
        results = beam_search(m, sources(), BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=2,
                              banned_ids=BANNED, stopping=rule)
        assert all(len(hyps) == 4 and len({tuple(h.tokens) for h in hyps}) == 4 for hyps in results)
        assert results == beam_search(m, sources(), BOS, EOS, beam=4, nbest=4, max_len_a=1.0, max_len_b=2,
                                      banned_ids=BANNED, stopping=rule)


def test_candidates_never_extend_a_closed_slot():
    scores = torch.tensor([[0.0, float("-inf")]])
    logits = torch.randn(1, 2, 5)
    log_probs = torch.log_softmax(logits, -1)
    eos, live, beams, tokens = select_live(scores, logits, EOS, beam=2)
    assert (beams[0] == 0).all() and (tokens[0] != EOS).all()  # both live extensions from slot 0
    assert eos[0, 0].item() == pytest.approx(log_probs[0, 0, EOS].item(), abs=1e-6) and eos[0, 1] == float("-inf")
    assert live[0, 0] >= live[0, 1]
    best = log_probs[0, 0].clone()
    best[EOS] = float("-inf")
    assert live[0].tolist() == pytest.approx(best.topk(2).values.tolist(), abs=1e-6)
    assert tokens[0].tolist() == best.topk(2).indices.tolist()


def test_the_k_best_extensions_come_from_each_hypothesis_k_best_tokens():
    """select_live keeps each hypothesis's K best tokens only: the K best extensions of the whole
    (b, K, V) table, computed here over the full log-softmax, with their scores, beams and tokens."""
    torch.manual_seed(5)
    b, k, v = 3, 4, 50
    scores = torch.randn(b, k) * 3
    scores[2, 3] = float("-inf")  # an empty slot
    logits = torch.randn(b, k, v) * 2
    banned = torch.tensor([0, 7])
    full = scores[:, :, None] + torch.log_softmax(logits, -1)
    full[:, :, EOS] = float("-inf")
    full[:, :, banned] = float("-inf")
    want, flat = full.view(b, -1).topk(k, dim=1)
    eos, live, beams, tokens = select_live(scores, logits.clone(), EOS, k, banned)
    assert torch.allclose(live, want, atol=1e-5)
    assert torch.equal(beams, flat // v) and torch.equal(tokens, flat % v)
    assert torch.allclose(eos[:, :3], (scores + torch.log_softmax(logits, -1)[:, :, EOS])[:, :3], atol=1e-5)
    # a banned eos closes nothing
    eos, _, _, _ = select_live(scores, logits.clone(), EOS, k, torch.tensor([EOS]))
    assert torch.isneginf(eos).all()


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



def test_the_finished_list_keeps_the_k_best_and_reads_back_best_first_without_empty_slots():
    """``Finished`` directly: a merge keeps the K best of old and new (ties in topk's order, as the
    search documents); reading back lists the filled slots best first, equal scores in slot order
    (a stable sort), and never an empty (-inf) slot."""
    from search.beam import Finished

    inf = float("-inf")
    done = Finished.empty(2, 3, 3, torch.device("cpu"))
    rows = torch.tensor([0, 1])
    score = torch.tensor([[-1.0, -2.0, -4.0, -0.5], [-3.0, inf, inf, inf]])
    tokens = torch.tensor([[[4, 3, 0], [5, 3, 0], [6, 3, 0], [7, 3, 0]], [[7, 7, 3], [0, 0, 0], [0, 0, 0], [0, 0, 0]]])
    n_tokens = torch.tensor([[2, 2, 2, 2], [3, 0, 0, 0]])
    done.merge(rows, score, score - 0.5, tokens, n_tokens)
    assert done.count(rows).tolist() == [3, 1]
    got = done.hypotheses(nbest=3)
    assert [[h.tokens for h in hyps] for hyps in got] == [[[7, 3], [4, 3], [5, 3]], [[7, 7, 3]]]
    assert [h.score for h in got[0]] == [-0.5, -1.0, -2.0] and [h.log_prob for h in got[0]] == [-1.0, -1.5, -2.5]
    done.merge(rows[:1], torch.tensor([[-1.5, -5.0]]), torch.tensor([[-9.0, -9.0]]),
               torch.tensor([[[8, 0, 0], [9, 0, 0]]]), torch.tensor([[1, 1]]))
    assert [h.tokens for h in done.hypotheses(nbest=3)[0]] == [[7, 3], [4, 3], [8]]
    assert [h.tokens for h in done.hypotheses(nbest=1)[0]] == [[7, 3]]

    k = 64  # a 64-way tie with two empty slots: slot order, the empty slots left out
    scores = torch.zeros(1, k)
    scores[0, [5, 40]] = inf
    tied = Finished(scores, scores.clone(), torch.arange(k)[None, :, None], torch.ones(1, k, dtype=torch.long))
    assert [h.tokens[0] for h in tied.hypotheses(nbest=k)[0]] == [i for i in range(k) if i not in (5, 40)]


@pytest.mark.parametrize("rule", ["exact", "first_k"])
def test_searches_create_their_tensors_on_the_models_device(rule):
    """With ``meta`` as the default device, any tensor a search creates without naming the model's
    device lands on ``meta`` and the first operation mixing it with the model's CPU tensors fails:
    on a GPU the same omission would put search state on the CPU. Checked here without a GPU."""
    m, src = model(), sources()
    want_beam = beam_search(m, src, BOS, EOS, beam=4, nbest=2, max_len_a=1.0, max_len_b=4, banned_ids=BANNED,
                            stopping=rule)
    want_greedy = greedy_search(m, src, BOS, EOS, 1.0, 4, banned_ids=BANNED)
    with torch.device("meta"):
        assert beam_search(m, src, BOS, EOS, beam=4, nbest=2, max_len_a=1.0, max_len_b=4, banned_ids=BANNED,
                           stopping=rule) == want_beam
        assert greedy_search(m, src, BOS, EOS, 1.0, 4, banned_ids=BANNED) == want_greedy


def test_translate_reports_each_decoded_batch_and_the_progress_changes_nothing():
    """``translate``'s progress callback gets each batch's sentence count (7 sentences, batches of 3:
    3, 3, 1), and the hypotheses are those of a call without it."""
    from experiment.config import load_config as config
    from experiment.decode_config import resolve_settings
    from search.translate import translate

    tok = SimpleNamespace(pad_id=PAD, bos_id=BOS, eos_id=EOS, decode_tgt=lambda ids: " ".join(map(str, ids)))
    settings = resolve_settings(config(None, ["decode.batch_size=3"]).decode, greedy=True)
    g = torch.Generator().manual_seed(2)
    srcs = [torch.randint(4, 8, (int(n),), generator=g).tolist() for n in torch.randint(2, 7, (7,), generator=g)]
    m, seen = model(), []
    with_progress = translate(m, srcs, tok, settings, progress=seen.append)
    assert seen == [3, 3, 1]
    assert [h[0].tokens for h in with_progress] == [h[0].tokens for h in translate(m, srcs, tok, settings)]


def test_the_record_names_the_power_form_and_its_beam_rule_differs_from_gnmts():
    from experiment.decode_config import DecodeConfig, DecodeRecord

    gnmt, power = DecodeConfig(), DecodeConfig(len_penalty_form="power")
    assert "len_penalty_form" not in DecodeRecord.of(gnmt, 0).tree()  # records from before the option read the same
    assert DecodeRecord.of(power, 0).tree()["len_penalty_form"] == "power"
    assert DecodeRecord.of(gnmt, 0).rule() != DecodeRecord.of(power, 0).rule()
    greedy = [DecodeRecord.of(DecodeConfig(beam=1, nbest=1, len_penalty_form=f), 0) for f in ("gnmt", "power")]
    assert greedy[0].rule() == greedy[1].rule()  # no penalty in greedy search
