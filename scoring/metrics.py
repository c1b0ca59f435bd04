"""Translation quality: sacreBLEU (with signatures), chrF, NLTK BLEU-4, the seed project's
character-level figure, BLEU by source length, and bootstrap statistics (Koehn 2004).
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterator
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


def texts_digest(hypotheses: list[str], references: list[str]) -> str:
    """SHA-256 of a pair of text lists (hex): what a kept score of them is keyed by (``scoring.table_metrics``)."""
    digest = hashlib.sha256()
    for line in (*hypotheses, "\0", *references):
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


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
    the sentence statistics (``sentence_bleu_stats``), which is what ``corpus_score`` does."""
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
    """(N, 10) sacreBLEU sufficient statistics per sentence (lengths, n-gram matches/totals), read-only."""
    stats = np.asarray(BLEU()._extract_corpus_statistics(hypotheses, [references]), dtype=np.int64)
    stats = stats.reshape(len(hypotheses), -1)
    stats.setflags(write=False)
    return stats


class References:
    """A test set's references with their n-grams counted once (sacreBLEU's reference cache): every
    system scored against them (``Scored.of``) reuses it."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        self._metric: BLEU | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def sentence_stats(self, hypotheses: list[str]) -> np.ndarray:
        """``sentence_bleu_stats`` of ``hypotheses`` against these references."""
        if len(hypotheses) != len(self.lines):
            raise ValueError(f"{len(hypotheses)} hypotheses scored against {len(self.lines)} references")
        if self._metric is None:
            self._metric = BLEU(references=[self.lines])
        stats = np.asarray(self._metric._extract_corpus_statistics(hypotheses, None), dtype=np.int64)
        stats = stats.reshape(len(hypotheses), -1)
        stats.setflags(write=False)
        return stats


SEED_ADJUSTMENT = ("each row's seeds drawn R of R with replacement, spread about their mean by sqrt(R/(R-1)) "
                   "first, so the seed variance is not understated")


def bootstrap_samples(n: int, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(samples, n) sentence indices drawn with replacement, read-only: the same for every system
    drawn with the same (n, samples, seed)."""
    indices = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    indices.setflags(write=False)
    return indices


@dataclass(frozen=True)
class Draws:
    """One bootstrap's draws: ``samples`` resamples of ``n`` sentences with generator ``seed``
    (``bootstrap_samples``), the same for every system of a table (paired). A value: two Draws of
    the same three numbers are the same draws, so a system resampled on them once (``Scored``) is
    not resampled again."""

    n: int
    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED

    @property
    def indices(self) -> np.ndarray:
        """(samples, n) sentence indices (``bootstrap_samples``), drawn on first use and kept with the draws."""
        if "_indices" not in self.__dict__:
            object.__setattr__(self, "_indices", bootstrap_samples(self.n, self.samples, self.seed))
        return self.__dict__["_indices"]

    @property
    def counts(self) -> np.ndarray:
        """(samples, n): how often each sentence is in each sample (``sample_counts``), kept with the draws."""
        if "_counts" not in self.__dict__:
            object.__setattr__(self, "_counts", sample_counts(self.indices, self.n))
        return self.__dict__["_counts"]


Resampling = Draws | np.ndarray  # draws by value (a table's), or explicit (S, n) sentence indices


class Scored:
    """A system's hypotheses scored against their references sentence by sentence: sacreBLEU's
    sufficient statistics (N, 10), from which its BLEU, its BLEU on any subset of the sentences and
    on each bootstrap resample are summed exactly. Each resampling is kept on the object: a table
    resamples a run in every test it is part of, on the same draws."""

    def __init__(self, stats: np.ndarray):
        stats = np.asarray(stats, dtype=np.int64)
        if stats.flags.writeable:
            stats = stats.copy()
            stats.setflags(write=False)
        self.stats = stats
        # (n, samples, seed) of each Draws -> BLEU on its resamples: the numbers, not the Draws, so that the
        # draws' indices and counts (samples x n each) go with the table that drew them
        self._resampled: dict[tuple[int, int, int], np.ndarray] = {}

    @classmethod
    def of(cls, hypotheses: list[str], references: list[str] | References) -> Scored:
        """``hypotheses`` scored against ``references`` (a test set's ``References``: tokenized once for all)."""
        if isinstance(references, References):
            return cls(references.sentence_stats(hypotheses))
        if len(hypotheses) != len(references):
            raise ValueError(f"{len(hypotheses)} hypotheses scored against {len(references)} references")
        return cls(sentence_bleu_stats(hypotheses, references))

    def __len__(self) -> int:
        return len(self.stats)

    @property
    def bleu(self) -> Score:
        """Corpus BLEU of the sentences (``bleu_from_stats``)."""
        return bleu_from_stats(self.stats.sum(0))

    def take(self, keep: list[int]) -> Scored:
        """The sentences ``keep`` (indices) alone."""
        return Scored(self.stats[keep])

    def __add__(self, other: Scored) -> Scored:
        """These sentences, then ``other``'s (test sets pooled)."""
        return Scored(np.concatenate([self.stats, other.stats]))

    def resampled(self, draws: Draws) -> np.ndarray:
        """BLEU on each of ``draws``' resamples (S,): a fresh copy, the caller's to change."""
        if draws.n != len(self):
            raise ValueError(f"bootstrap draws of {draws.n} sentences for {len(self)} scored")
        key = (draws.n, draws.samples, draws.seed)
        if key not in self._resampled:
            self._resampled[key] = _counted_bleu(self.stats, draws.counts)
        return self._resampled[key].copy()


def sample_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` sentences is in each sample: indices (S, n') -> (S, n) float64 (whole
    numbers, so a product with counts of n-grams is exact: every sum stays far below 2**53)."""
    if indices.size and not 0 <= indices.min() <= indices.max() < n:
        raise ValueError(f"bootstrap indices outside the {n} sentences scored")
    samples = indices.shape[0]
    flat = (indices + n * np.arange(samples)[:, None]).ravel()
    return np.bincount(flat, minlength=samples * n).reshape(samples, n).astype(np.float64)


def resampled_bleu(stats: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """BLEU of each bootstrap sample: stats (N, 10), indices (S, n) of rows of stats -> (S,). Each
    sample's statistics are the count of each sentence in it (S, N) times ``stats``: whole numbers,
    so the sums are exact and the score is sacreBLEU's arithmetic on them."""
    return _counted_bleu(stats, sample_counts(indices, len(stats)))


def _counted_bleu(stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
    totals = np.rint(counts @ stats.astype(np.float64)).astype(np.int64)
    metric = BLEU()
    return np.array([metric._compute_score_from_stats(row).score for row in totals.tolist()])


def _resample(run: Scored, draws: Resampling) -> np.ndarray:
    """The run's BLEU on each resample (S,): kept on the run for ``Draws``, computed for explicit indices."""
    return run.resampled(draws) if isinstance(draws, Draws) else resampled_bleu(run.stats, draws)


def _interval(scores: np.ndarray) -> tuple[float, float]:
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


def bleu_confidence_interval(hypotheses: list[str], references: list[str],
                             indices: np.ndarray | None = None) -> tuple[float, float]:
    """95% bootstrap confidence interval of corpus BLEU (percentiles 2.5 and 97.5)."""
    return seed_interval([Scored.of(hypotheses, references)], Draws(len(hypotheses)) if indices is None else indices)


def one_sided_p(differences: np.ndarray, observed: float) -> float:
    """Share of the resampled differences (S,) that do not have the sign of ``observed``. Differences
    within ``TIE`` BLEU of zero are ties: a mean over seeds of equal scores must not take a sign
    from the last bit of its rounding."""
    differences = np.where(np.abs(differences) < TIE, 0.0, differences)
    if observed >= -TIE:
        return float(np.mean(differences <= 0))
    return float(np.mean(differences >= 0))


def seed_draw(per_run: np.ndarray, seed: int) -> np.ndarray:
    """Two-level bootstrap of the mean BLEU over training seeds, from each run's BLEU on each sentence
    sample (R, S): for each sample the runs (seeds) are drawn with replacement too, and their BLEU on
    that sample averaged -> (S,). With one run this is that run's.

    Drawing R of R seeds gives their mean a variance of (R - 1)/R times the seeds' variance over R —
    a third too small with three seeds. So before the draw each sample's seeds are spread about
    their mean by sqrt(R / (R - 1)) (``SEED_ADJUSTMENT``; the usual small-sample adjustment of
    resampled residuals, Davison and Hinkley 1997, §6.2.3): the drawn mean then has the seeds'
    unbiased variance over R, the sample mean unchanged."""
    if len(per_run) == 1:
        return per_run[0]
    samples = per_run.shape[1]
    center = per_run.mean(0, keepdims=True)
    per_run = center + np.sqrt(len(per_run) / (len(per_run) - 1)) * (per_run - center)
    picks = np.random.default_rng(seed).integers(0, len(per_run), size=(samples, len(per_run)))
    return per_run[picks, np.arange(samples)[:, None]].mean(1)


def seed_resampled_bleu(runs: list[Scored] | list[np.ndarray], draws: Resampling, seed: int) -> np.ndarray:
    """``seed_draw`` of the runs (scored, or their sentence statistics (N, 10)) resampled on ``draws`` -> (S,)."""
    scored = [run if isinstance(run, Scored) else Scored(run) for run in runs]
    return seed_draw(np.stack([_resample(run, draws) for run in scored]), seed)


def seed_paired_p(system: list[Scored], baseline: list[Scored], draws: Resampling) -> float:
    """One-sided p-value of the difference in mean BLEU between two systems trained with several
    seeds each (one scored run per seed), accounting for both sources of variance: each bootstrap
    sample draws the test sentences (the same for both systems, paired; Koehn 2004) and,
    independently for each system, its seeds with replacement (a two-level bootstrap over seeds x
    sentences, as recommended for optimizer instability by Clark et al. 2011). It is the share of
    samples in which the difference does not have the sign observed on the whole set. With one seed
    each it is Koehn's (2004) paired bootstrap of the two systems."""
    if len({len(run) for run in (*system, *baseline)}) > 1:
        raise ValueError("paired bootstrap needs the same sentences for both systems")
    a = seed_resampled_bleu(system, draws, BOOTSTRAP_SEED + 1)
    b = seed_resampled_bleu(baseline, draws, BOOTSTRAP_SEED + 2)
    observed = np.mean([run.bleu.value for run in system]) - np.mean([run.bleu.value for run in baseline])
    return one_sided_p(a - b, observed)


def seed_interval(runs: list[Scored], draws: Resampling) -> tuple[float, float]:
    """95% interval (percentiles 2.5, 97.5) of the mean BLEU over seeds (scored runs) by the two-level bootstrap."""
    return _interval(seed_resampled_bleu(runs, draws, BOOTSTRAP_SEED + 1))


def seed_paired_bootstrap_p(system: list[list[str]], baseline: list[list[str]], references: list[str],
                            indices: np.ndarray | None = None) -> float:
    """``seed_paired_p`` of two systems' hypotheses (a list per seed) on ``references`` (``indices``:
    explicit resamples, (S, n); default the table's ``Draws``)."""
    if any(len(h) != len(references) for h in (*system, *baseline)):
        raise ValueError("paired bootstrap needs the same sentences for both systems")
    return seed_paired_p([Scored.of(h, references) for h in system], [Scored.of(h, references) for h in baseline],
                         Draws(len(references)) if indices is None else indices)


def seed_bleu_interval(runs: list[list[str]], references: list[str],
                       indices: np.ndarray | None = None) -> tuple[float, float]:
    """``seed_interval`` of a system's hypotheses (a list per seed) on ``references``."""
    return seed_interval([Scored.of(h, references) for h in runs], Draws(len(references)) if indices is None else indices)


__all__ = ["Score", "Scored", "Draws", "corpus_bleu", "corpus_chrf", "nltk_bleu4", "seed_char_bleu4", "bleu_by_length",
           "bleu_confidence_interval", "one_sided_p", "seed_paired_p", "seed_interval", "seed_paired_bootstrap_p",
           "seed_bleu_interval"]
