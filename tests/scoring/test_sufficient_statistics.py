"""What makes an archive's tables fast without changing a digit: corpus BLEU and every bootstrap
sample summed from each sentence's statistics (each run's texts tokenized once), and the metric
columns kept beside the tables they fill (``metric_scores.json``). Each is checked against
sacreBLEU scoring the texts itself."""
from __future__ import annotations

import contextlib
import io
import json

import pytest
import sacrebleu

from experiment.run_dir import run_config_tree
from scoring import table_metrics
from scoring.metrics import bootstrap_samples, corpus_bleu, resampled_bleu, sentence_bleu_stats
from scoring.table_metrics import METRICS, metric_score, scores_kept_in
from tests.scoring.test_statistics import corpus, degrade


def test_each_bootstrap_sample_is_sacrebleu_on_the_drawn_sentences():
    refs = corpus(60, 11)
    hyps = degrade(refs, 0.35, 12)
    indices = bootstrap_samples(60, samples=40)
    got = resampled_bleu(sentence_bleu_stats(hyps, refs), indices)
    bleu = sacrebleu.metrics.BLEU()
    expected = [bleu.corpus_score([hyps[i] for i in row], [[refs[i] for i in row]]).score for row in indices]
    assert got.tolist() == expected  # the same integer sums, the same arithmetic: equal to the last bit
    # a writable copy of the indices (not memoized) draws the same; a caller's change to a result stays its own
    assert resampled_bleu(sentence_bleu_stats(hyps, refs), indices.copy()).tolist() == expected
    again = resampled_bleu(sentence_bleu_stats(hyps, refs), indices)
    again[:] = -1
    assert resampled_bleu(sentence_bleu_stats(hyps, refs), indices).tolist() == expected
    # another system on the same samples is not served the first one's
    other = degrade(refs, 0.7, 13)
    assert resampled_bleu(sentence_bleu_stats(other, refs), indices).tolist() == [
        bleu.corpus_score([other[i] for i in row], [[refs[i] for i in row]]).score for row in indices]


def test_a_sample_drawing_a_sentence_the_statistics_lack_is_refused():
    refs = corpus(10, 1)
    stats = sentence_bleu_stats(refs, refs)
    with pytest.raises(ValueError, match="outside the 10 sentences"):
        resampled_bleu(stats, bootstrap_samples(11, samples=5))
    assert not stats.flags.writeable  # the memoized statistics cannot be changed by a caller


def test_corpus_bleu_from_the_sentence_statistics_is_sacrebleus_corpus_score():
    refs = [s.capitalize() + "." for s in corpus(50, 21)]
    for share in (0.0, 0.2, 0.9):
        hyps = [" ".join(h.split()[: max(1, len(h.split()) - (i % 3))]) for i, h in enumerate(degrade(refs, share, 22))]
        metric = sacrebleu.metrics.BLEU()
        expected = metric.corpus_score(hyps, [refs])
        got = corpus_bleu(hyps, refs)
        assert got.value == expected.score and got.signature == str(metric.get_signature())
        assert got.length_ratio == expected.sys_len / expected.ref_len
    with pytest.raises(ValueError, match="3 hypotheses scored against 50 references"):
        corpus_bleu(refs[:3], refs)  # sacreBLEU would score the first three alone
    with pytest.raises(ValueError, match="0 hypotheses"):
        corpus_bleu([], [])


@pytest.fixture
def fresh_scores(monkeypatch):
    """The process's memo of metric scores, empty for the test."""
    monkeypatch.setattr(table_metrics, "_scores", {})


def test_a_kept_score_is_reused_only_for_the_same_texts_and_metric_version(tmp_path, fresh_scores):
    refs = corpus(20, 31)
    hyps, other = degrade(refs, 0.3, 32), degrade(refs, 0.5, 33)
    store = tmp_path / "metric_scores.json"
    with scores_kept_in(store):
        ter = metric_score("ter", hyps, refs)
    assert ter == sacrebleu.metrics.TER().corpus_score(hyps, [refs]).score
    tree = json.loads(store.read_text())
    assert list(tree) == ["ter"] and tree["ter"]["version"] == METRICS["ter"].version
    (digest,) = tree["ter"]["scores"]
    tree["ter"]["scores"][digest] = 123.25  # planted: a reused score is read, not recomputed
    store.write_text(json.dumps(tree))
    table_metrics._scores.clear()
    with scores_kept_in(store):
        assert metric_score("ter", hyps, refs) == 123.25
        assert metric_score("ter", other, refs) == sacrebleu.metrics.TER().corpus_score(other, [refs]).score
    assert len(json.loads(store.read_text())["ter"]["scores"]) == 2
    tree = json.loads(store.read_text())
    tree["ter"]["version"] = "another TER"
    store.write_text(json.dumps(tree))
    table_metrics._scores.clear()
    with scores_kept_in(store):
        assert metric_score("ter", hyps, refs) == ter  # made again under this version
    # the file holds exactly what the last tables used, sorted: the same bytes when made again
    with scores_kept_in(store):
        metric_score("chrf", hyps, refs)
    first = store.read_bytes()
    assert list(json.loads(first)) == ["chrf"]
    with scores_kept_in(store):
        metric_score("chrf", hyps, refs)
    assert store.read_bytes() == first


def test_a_store_that_is_not_one_is_said_and_made_anew_and_failed_tables_keep_their_scores(tmp_path, fresh_scores):
    refs = corpus(15, 41)
    hyps = degrade(refs, 0.4, 42)
    store = tmp_path / "metric_scores.json"
    store.write_text('{"ter": {"version": 3}')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), scores_kept_in(store):
        chrf = metric_score("chrf", hyps, refs)
    assert printed.getvalue().count("\n") == 1 and "not a store of metric scores" in printed.getvalue()
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    # tables that fail (or are interrupted) after a costly score keep it beside the scores already kept
    with pytest.raises(KeyboardInterrupt), scores_kept_in(store):
        ter = metric_score("ter", hyps, refs)
        raise KeyboardInterrupt
    tree = json.loads(store.read_text())
    assert sorted(tree) == ["chrf", "ter"] and list(tree["ter"]["scores"].values()) == [ter]
    assert list(tree["chrf"]["scores"].values()) == [chrf]
    (digest,) = tree["ter"]["scores"]
    tree["ter"]["scores"][digest] = 77.5  # planted: the next remake reads the kept score
    store.write_text(json.dumps(tree))
    table_metrics._scores.clear()
    with scores_kept_in(store):
        assert metric_score("ter", hyps, refs) == 77.5
    assert list(json.loads(store.read_text())) == ["ter"]  # a completed remake prunes what it did not use


def test_a_runs_config_is_read_once_per_version_and_each_caller_gets_its_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 1\nmodel:\n  d_model: 8\n")
    tree = run_config_tree(run)
    tree["model"]["d_model"] = 99
    assert run_config_tree(run) == {"seed": 1, "model": {"d_model": 8}}
    (run / "config.yaml").write_text("seed: 2\nmodel:\n  d_model: 16\n")
    assert run_config_tree(run) == {"seed": 2, "model": {"d_model": 16}}
