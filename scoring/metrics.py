"""Translation quality: sacreBLEU (with signatures), chrF, NLTK BLEU-4, the seed project's
character-level figure, BLEU by source length, and bootstrap statistics (Koehn 2004).
"""
from __future__ import annotations

import functools
import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 12345
TIE = 1e-9  # BLEU differences smaller than this are rounding, not a sign
LENGTH_BUCKETS = [(1, 10), (11, 20), (21, 30), (31, 40), (41, 60), (61, 10**9)]
NLTK_TOKENIZATION = "sacrebleu 13a tokenizer, case-sensitive, then split on spaces"


@dataclass
class Score:
    value: float  # 0-100
    signature: str
    length_ratio: float | None = None  # BLEU: hypothesis / reference length (tokens)
    without_brevity_penalty: float | None = None  # BLEU: the value divided by its brevity penalty (0 if that is 0)


MEMO_SIZE = 4096  # entries of ``memoized``: every run x test set of the largest archive, several times over
_memo: OrderedDict[tuple[str, str], object] = OrderedDict()


def texts_digest(hypotheses: list[str], references: list[str]) -> str:
    """SHA-256 of a pair of text lists (hex): what a memoized score of them is keyed by."""
    digest = hashlib.sha256()
    for line in (*hypotheses, "\0", *references):
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def memoized(kind: str, hypotheses: list[str], references: list[str], compute: Callable[[], object]) -> object:
    """``compute()`` once per (``kind``, hypotheses, references) for the life of the process, the
    ``MEMO_SIZE`` latest kept: a study's tables read each run's texts in every table, family and
    bucket, and tokenizing them into n-gram counts is what costs."""
    key = (kind, texts_digest(hypotheses, references))
    if key in _memo:
        _memo.move_to_end(key)
        return _memo[key]
    value = _memo[key] = compute()
    if len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)
    return value


def _bleu_signature() -> str:
    metric = BLEU()
    metric.corpus_score(["a"], [["a"]])  # the signature's reference count is known once it has scored
    return str(metric.get_signature())


BLEU_SIGNATURE = _bleu_signature()


def bleu_from_stats(totals: np.ndarray) -> Score:
    """Corpus BLEU from summed sufficient statistics (10,): sacreBLEU's own arithmetic on them, as
    ``corpus_score`` does after summing its sentences'."""
    score = BLEU()._compute_score_from_stats(np.asarray(totals, dtype=np.int64).tolist())
    return Score(score.score, BLEU_SIGNATURE, score.sys_len / max(score.ref_len, 1),
                 score.score / score.bp if score.bp > 0 else 0.0)


def corpus_bleu(hypotheses: list[str], references: list[str]) -> Score:
    """sacreBLEU corpus BLEU on detokenized text (13a tokenization, exp smoothing); also the
    geometric mean of the n-gram precisions alone (BLEU without its brevity penalty: a control of the
    length study, where short hypotheses of long inputs lose BLEU through the penalty). Summed from
    the memoized sentence statistics (``sentence_bleu_stats``), which is what ``corpus_score`` does."""
    if not hypotheses or len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses scored against {len(references)} references")
    return bleu_from_stats(sentence_bleu_stats(hypotheses, references).sum(0))


def corpus_chrf(hypotheses: list[str], references: list[str]) -> Score:
    metric = CHRF()
    return Score(metric.corpus_score(hypotheses, [references]).score, str(metric.get_signature()))


def nltk_bleu4(hypotheses: list[str], references: list[str]) -> float:
    """NLTK ``corpus_bleu`` (uniform 4-gram weights, no smoothing) over word token lists, 0-100."""
    from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = Tokenizer13a()
    hyps = [tok(h).split() for h in hypotheses]
    refs = [[tok(r).split()] for r in references]
    with _no_zero_count_warning():
        return 100.0 * nltk_corpus_bleu(refs, hyps)


@contextmanager
def _no_zero_count_warning() -> Iterator[None]:
    """NLTK warns at length, once per call, that an order with no matching n-gram makes its
    unsmoothed BLEU 0; that 0 is the defined value of the column, not news in every study's output."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"nltk\.translate\.bleu_score")
        yield


def seed_char_bleu4(hypotheses: list[str], references: list[str]) -> float:
    """The seed project's figure, reproduced: its test.py passed raw strings to NLTK
    ``corpus_bleu``, which then counts *character* 4-grams (case-sensitive, no smoothing); the
    value is on a 0-1 scale. Only for standing beside that project's table."""
    from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu

    with _no_zero_count_warning():
        return float(nltk_corpus_bleu([[r] for r in references], list(hypotheses)))


def bleu_by_length(sources: list[str], hypotheses: list[str], references: list[str]) -> list[dict]:
    """sacreBLEU per bucket of source length (whitespace words); empty buckets are left out."""
    out = []
    lengths = [len(s.split()) for s in sources]
    for lo, hi in LENGTH_BUCKETS:
        idx = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        if idx:
            score = corpus_bleu([hypotheses[i] for i in idx], [references[i] for i in idx]).value
            out.append({"min_words": lo, "max_words": hi if hi < 10**9 else None, "n": len(idx), "bleu": score})
    return out


def sentence_bleu_stats(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """(N, 10) sacreBLEU sufficient statistics per sentence (lengths, n-gram matches/totals),
    memoized (``memoized``) and read-only."""
    def extract() -> np.ndarray:
        stats = np.asarray(BLEU()._extract_corpus_statistics(hypotheses, [references]), dtype=np.int64)
        stats = stats.reshape(len(hypotheses), -1)
        stats.setflags(write=False)
        return stats
    return memoized("bleu-stats", hypotheses, references, extract)


SEED_ADJUSTMENT = ("each row's seeds drawn R of R with replacement, spread about their mean by sqrt(R/(R-1)) "
                   "first, so the seed variance is not understated")


@functools.lru_cache(maxsize=16)
def bootstrap_samples(n: int, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(samples, n) sentence indices drawn with replacement, the same for every system: one
    read-only array per (n, samples, seed), so that ``resampled_bleu`` knows it again."""
    indices = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    indices.setflags(write=False)
    return indices


_resampled: OrderedDict[tuple[bytes, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()


def resampled_bleu(stats: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """BLEU of each bootstrap sample: stats (N, 10), indices (S, n) of rows of stats -> (S,). Each
    sample's statistics are the count of each sentence in it (S, N) times ``stats``: whole numbers,
    so the sums are exact and the score is sacreBLEU's arithmetic on them. Memoized for read-only
    ``indices`` (``bootstrap_samples``'; a table resamples each run in every test it is part of):
    the entry holds the array, so its identity cannot pass to another while the entry lives."""
    if indices.flags.writeable:
        return _resampled_bleu(stats, indices)
    key = (hashlib.sha256(np.ascontiguousarray(stats).tobytes()).digest(), id(indices))
    if key not in _resampled:
        _resampled[key] = (indices, _resampled_bleu(stats, indices))
        if len(_resampled) > MEMO_SIZE:
            _resampled.popitem(last=False)
    _resampled.move_to_end(key)
    return _resampled[key][1].copy()


def _resampled_bleu(stats: np.ndarray, indices: np.ndarray) -> np.ndarray:
    n = len(stats)
    if indices.size and not 0 <= indices.min() <= indices.max() < n:
        raise ValueError(f"bootstrap indices outside the {n} sentences scored")
    totals = np.rint(_sample_counts(indices, n) @ stats.astype(np.float64)).astype(np.int64)
    metric = BLEU()
    return np.array([metric._compute_score_from_stats(row).score for row in totals.tolist()])


_counts: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()


def _sample_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` sentences is in each sample: indices (S, n') -> (S, n) float64 (whole
    numbers, so a product with counts of n-grams is exact: every sum stays far below 2**53). The
    latest two read-only index arrays' counts are kept (each run of a table is resampled alike)."""
    key = (id(indices), n)
    if not indices.flags.writeable and key in _counts:
        return _counts[key][1]
    samples = indices.shape[0]
    flat = (indices + n * np.arange(samples)[:, None]).ravel()
    counts = np.bincount(flat, minlength=samples * n).reshape(samples, n).astype(np.float64)
    if not indices.flags.writeable:
        _counts[key] = (indices, counts)
        if len(_counts) > 2:
            _counts.popitem(last=False)
    return counts


def bleu_confidence_interval(hypotheses: list[str], references: list[str],
                             indices: np.ndarray | None = None) -> tuple[float, float]:
    """95% bootstrap confidence interval of corpus BLEU (percentiles 2.5 and 97.5)."""
    stats = sentence_bleu_stats(hypotheses, references)
    indices = bootstrap_samples(len(hypotheses)) if indices is None else indices
    scores = resampled_bleu(stats, indices)
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


def one_sided_p(differences: np.ndarray, observed: float) -> float:
    """Share of the resampled differences (S,) that do not have the sign of ``observed``. Differences
    within ``TIE`` BLEU of zero are ties: a mean over seeds of equal scores must not take a sign
    from the last bit of its rounding."""
    differences = np.where(np.abs(differences) < TIE, 0.0, differences)
    if observed >= -TIE:
        return float(np.mean(differences <= 0))
    return float(np.mean(differences >= 0))


def seed_resampled_bleu(stats_per_run: list[np.ndarray], indices: np.ndarray, seed: int) -> np.ndarray:
    """Two-level bootstrap of the mean BLEU over training seeds: for each sentence sample (row of
    ``indices``, (S, N)) the runs (seeds) are drawn with replacement too, and their BLEU on that
    sample averaged -> (S,). With one run this is ``resampled_bleu`` of it.

    Drawing R of R seeds gives their mean a variance of (R - 1)/R times the seeds' variance over R —
    a third too small with three seeds. So before the draw each sample's seeds are spread about
    their mean by sqrt(R / (R - 1)) (``SEED_ADJUSTMENT``; the usual small-sample adjustment of
    resampled residuals, Davison and Hinkley 1997, §6.2.3): the drawn mean then has the seeds'
    unbiased variance over R, the sample mean unchanged."""
    per_run = np.stack([resampled_bleu(stats, indices) for stats in stats_per_run])  # (R, S)
    if len(per_run) == 1:
        return per_run[0]
    center = per_run.mean(0, keepdims=True)
    per_run = center + np.sqrt(len(per_run) / (len(per_run) - 1)) * (per_run - center)
    picks = np.random.default_rng(seed).integers(0, len(per_run), size=(indices.shape[0], len(per_run)))
    return per_run[picks, np.arange(indices.shape[0])[:, None]].mean(1)


def seed_paired_bootstrap_p(system: list[list[str]], baseline: list[list[str]], references: list[str],
                            indices: np.ndarray | None = None) -> float:
    """One-sided p-value of the difference in mean BLEU between two systems trained with several
    seeds each (lists of hypothesis lists, one per seed), accounting for both sources of variance:
    each bootstrap sample draws the test sentences (the same for both systems, paired; Koehn 2004)
    and, independently for each system, its seeds with replacement (a two-level bootstrap over
    seeds x sentences, as recommended for optimizer instability by Clark et al. 2011). It is the
    share of samples in which the difference does not have the sign observed on the whole set.
    With one seed each it is Koehn's (2004) paired bootstrap of the two systems."""
    if any(len(h) != len(references) for h in (*system, *baseline)):
        raise ValueError("paired bootstrap needs the same sentences for both systems")
    indices = bootstrap_samples(len(references)) if indices is None else indices
    a = seed_resampled_bleu([sentence_bleu_stats(h, references) for h in system], indices, BOOTSTRAP_SEED + 1)
    b = seed_resampled_bleu([sentence_bleu_stats(h, references) for h in baseline], indices, BOOTSTRAP_SEED + 2)
    observed = (np.mean([corpus_bleu(h, references).value for h in system])
                - np.mean([corpus_bleu(h, references).value for h in baseline]))
    return one_sided_p(a - b, observed)


def seed_bleu_interval(runs: list[list[str]], references: list[str],
                       indices: np.ndarray | None = None) -> tuple[float, float]:
    """95% interval (percentiles 2.5, 97.5) of the mean BLEU over seeds by the two-level bootstrap."""
    indices = bootstrap_samples(len(references)) if indices is None else indices
    scores = seed_resampled_bleu([sentence_bleu_stats(h, references) for h in runs], indices, BOOTSTRAP_SEED + 1)
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


__all__ = ["Score", "corpus_bleu", "corpus_chrf", "nltk_bleu4", "seed_char_bleu4", "bleu_by_length",
           "bleu_confidence_interval", "one_sided_p", "seed_paired_bootstrap_p", "seed_bleu_interval"]
