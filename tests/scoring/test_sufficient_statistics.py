"""What makes an archive's tables fast without changing a digit: corpus BLEU and every bootstrap
sample summed from each sentence's statistics (each run's texts tokenized once), and the metric
columns kept beside the tables they fill (``metric_scores.json``). Each is checked against
sacreBLEU scoring the texts itself."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest
import sacrebleu

from experiment.run_dir import run_config_tree
from scoring.metrics import Draws, Scored, bootstrap_samples, corpus_bleu, resampled_bleu, sentence_bleu_stats
from scoring.table_metrics import METRICS, MetricScores, scores_kept_in
from tests.scoring.test_statistics import corpus, degrade


def test_each_bootstrap_sample_is_sacrebleu_on_the_drawn_sentences():
    refs = corpus(60, 11)
    hyps = degrade(refs, 0.35, 12)
    indices = bootstrap_samples(60, samples=40)
    got = resampled_bleu(sentence_bleu_stats(hyps, refs), indices)
    bleu = sacrebleu.metrics.BLEU()
    expected = [bleu.corpus_score([hyps[i] for i in row], [[refs[i] for i in row]]).score for row in indices]
    assert got.tolist() == expected  # the same integer sums, the same arithmetic: equal to the last bit
    # a scored run resampled on the draws of the same three numbers: the same samples, kept on the run; a
    # caller's change to a result stays its own
    scored = Scored.of(hyps, refs)
    assert scored.resampled(Draws(60, 40)).tolist() == expected
    again = scored.resampled(Draws(60, 40))
    again[:] = -1
    assert scored.resampled(Draws(60, 40)).tolist() == expected
    assert scored.resampled(Draws(60, 40, seed=7)).tolist() != expected  # other draws: other samples
    # another system on the same draws is not served the first one's
    other = degrade(refs, 0.7, 13)
    assert Scored.of(other, refs).resampled(Draws(60, 40)).tolist() == [
        bleu.corpus_score([other[i] for i in row], [[refs[i] for i in row]]).score for row in indices]
    with pytest.raises(ValueError, match="draws of 61 sentences for 60 scored"):
        scored.resampled(Draws(61, 40))


def test_a_scored_runs_subsets_and_pools_are_sacrebleu_on_those_sentences():
    """A bucket's sentences (``take``) and two test sets pooled (``+``): BLEU summed from the kept
    statistics, equal to sacreBLEU scoring the texts cut or joined."""
    refs, more = corpus(40, 3), corpus(25, 4)
    hyps, more_hyps = degrade(refs, 0.3, 5), degrade(more, 0.5, 6)
    keep = [0, 3, 3, 7, 12, 39]
    cut = Scored.of(hyps, refs).take(keep)
    bleu = sacrebleu.metrics.BLEU()
    assert cut.bleu.value == bleu.corpus_score([hyps[i] for i in keep], [[refs[i] for i in keep]]).score
    pooled = Scored.of(hyps, refs) + Scored.of(more_hyps, more)
    assert len(pooled) == 65 and pooled.bleu.value == bleu.corpus_score(hyps + more_hyps, [refs + more]).score


def test_a_sample_drawing_a_sentence_the_statistics_lack_is_refused():
    refs = corpus(10, 1)
    stats = sentence_bleu_stats(refs, refs)
    with pytest.raises(ValueError, match="outside the 10 sentences"):
        resampled_bleu(stats, bootstrap_samples(11, samples=5))
    assert not stats.flags.writeable  # statistics a scored run keeps cannot be changed by a caller
    assert not Scored(stats.copy()).stats.flags.writeable


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


def test_a_kept_score_is_reused_only_for_the_same_texts_and_metric_version(tmp_path):
    refs = corpus(20, 31)
    hyps, other = degrade(refs, 0.3, 32), degrade(refs, 0.5, 33)
    store = tmp_path / "metric_scores.json"
    with scores_kept_in(store) as scores:
        ter = scores.score("ter", hyps, refs)
    assert ter == sacrebleu.metrics.TER().corpus_score(hyps, [refs]).score
    tree = json.loads(store.read_text())
    assert list(tree) == ["ter"] and tree["ter"]["version"] == METRICS["ter"].version
    (digest,) = tree["ter"]["scores"]
    tree["ter"]["scores"][digest] = 123.25  # planted: a reused score is read, not recomputed
    store.write_text(json.dumps(tree))
    with scores_kept_in(store) as scores:
        assert scores.score("ter", hyps, refs) == 123.25
        assert scores.score("ter", other, refs) == sacrebleu.metrics.TER().corpus_score(other, [refs]).score
    assert len(json.loads(store.read_text())["ter"]["scores"]) == 2
    tree = json.loads(store.read_text())
    tree["ter"]["version"] = "another TER"
    store.write_text(json.dumps(tree))
    with scores_kept_in(store) as scores:
        assert scores.score("ter", hyps, refs) == ter  # made again under this version
    # the file holds exactly what the last tables used, sorted: the same bytes when made again
    with scores_kept_in(store) as scores:
        scores.score("chrf", hyps, refs)
    first = store.read_bytes()
    assert list(json.loads(first)) == ["chrf"]
    with scores_kept_in(store) as scores:
        scores.score("chrf", hyps, refs)
    assert store.read_bytes() == first


def test_a_store_that_is_not_one_is_said_and_made_anew_and_failed_tables_keep_their_scores(tmp_path):
    refs = corpus(15, 41)
    hyps = degrade(refs, 0.4, 42)
    store = tmp_path / "metric_scores.json"
    store.write_text('{"ter": {"version": 3}')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), scores_kept_in(store) as scores:
        chrf = scores.score("chrf", hyps, refs)
    assert printed.getvalue().count("\n") == 1 and "not a store of metric scores" in printed.getvalue()
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    # tables that fail (or are interrupted) after a costly score keep it beside the scores already kept
    with pytest.raises(KeyboardInterrupt), scores_kept_in(store) as scores:
        ter = scores.score("ter", hyps, refs)
        raise KeyboardInterrupt
    tree = json.loads(store.read_text())
    assert sorted(tree) == ["chrf", "ter"] and list(tree["ter"]["scores"].values()) == [ter]
    assert list(tree["chrf"]["scores"].values()) == [chrf]
    (digest,) = tree["ter"]["scores"]
    tree["ter"]["scores"][digest] = 77.5  # planted: the next remake reads the kept score
    store.write_text(json.dumps(tree))
    with scores_kept_in(store) as scores:
        assert scores.score("ter", hyps, refs) == 77.5
    assert list(json.loads(store.read_text())) == ["ter"]  # a completed remake prunes what it did not use


def test_a_runs_config_tree_is_each_callers_own_and_a_changed_file_is_read_anew(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 1\nmodel:\n  d_model: 8\n")
    tree = run_config_tree(run)
    tree["model"]["d_model"] = 99
    assert run_config_tree(run) == {"seed": 1, "model": {"d_model": 8}}
    (run / "config.yaml").write_text("seed: 2\nmodel:\n  d_model: 16\n")
    assert run_config_tree(run) == {"seed": 2, "model": {"d_model": 16}}


def test_one_set_of_tables_scores_each_texts_once_and_another_shares_nothing(monkeypatch):
    """The tables of one study share a ``MetricScores``: the same texts are scored once however many tables
    show them; a second set of tables (another study, another process's state) starts from what is kept only."""
    refs = corpus(12, 51)
    hyps = degrade(refs, 0.3, 52)
    calls = []

    def counted(hypotheses, references):
        calls.append(len(hypotheses))
        return 42.0
    monkeypatch.setitem(METRICS, "ter", dataclasses.replace(METRICS["ter"], score=counted))
    first = MetricScores()
    assert [first.score("ter", hyps, refs) for _ in range(3)] == [42.0] * 3 and calls == [12]
    first.score("ter", hyps[:-1], refs[:-1])  # other texts: scored
    assert calls == [12, 11] and len(first.used) == 2
    second = MetricScores()
    second.score("ter", hyps, refs)
    assert calls == [12, 11, 12]


def test_a_test_sets_references_are_tokenized_once_for_all_the_runs_of_a_load(tmp_path):
    """Runs loaded together (``load_runs``) share one ``References`` per test set: each run's sentence
    statistics are sacreBLEU's own on its texts, and a run with other references gets its own."""
    from experiment.config import load_config, to_dict
    from scoring.loaded import load_runs
    from tests.scoring.test_statistics import write_evaluated_run

    refs, other_refs = corpus(20, 61), corpus(20, 62)
    config = to_dict(load_config(None))
    folders = []
    for i, (scheme, texts) in enumerate([("rope", refs), ("alibi", refs), ("t5", other_refs)]):
        folders.append(tmp_path / scheme)
        write_evaluated_run(folders[-1], config, scheme, 1, degrade(texts, 0.3, 63 + i), texts,
                            bootstrap_samples(20, 10))
    runs = load_runs(folders)
    evaluations = [run.evaluation("test") for run in runs]
    assert evaluations[0].tokenized is evaluations[1].tokenized
    assert evaluations[2].tokenized is not evaluations[0].tokenized
    bleu = sacrebleu.metrics.BLEU()
    for evaluation in evaluations:
        assert evaluation.scored.bleu.value == bleu.corpus_score(evaluation.hypotheses, [evaluation.references]).score
        expected = bleu._extract_corpus_statistics(evaluation.hypotheses, [evaluation.references])
        assert evaluation.scored.stats.tolist() == [list(row) for row in expected]
