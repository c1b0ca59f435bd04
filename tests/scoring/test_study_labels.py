"""A study's tables name a row by the study's label of it (``shape-k20``), not by the config settings
that set two rows of one scheme apart (``shape (model.positional.shape.max_shift=20)``): the comparison
table, the significance groups and the by-length table, given ``labels`` (run folder -> label), fold the
runs of one label into one row, and refuse two runs of one label and one seed."""
from __future__ import annotations

import statistics

import pytest
import sacrebleu

from analysis.results import length_study
from experiment.config import load_config, to_dict
from scoring.compare import compare
from scoring.groups import significance_groups, table_rows
from scoring.metrics import Draws, bootstrap_samples
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run
from utils.errors import UserError

# (folder, label, max_shift, seed, share of words replaced)
RUNS = [("sinusoidal", "sinusoidal", 100, 1, 0.1), ("sinusoidal-seed2", "sinusoidal", 100, 2, 0.15),
        ("shape", "shape", 100, 1, 0.5), ("shape-seed2", "shape", 100, 2, 0.45),
        ("shape-k20", "shape-k20", 20, 1, 0.3), ("shape-k20-seed2", "shape-k20", 20, 2, 0.35)]


def study_runs(tmp_path, monkeypatch):
    refs = corpus(60, 3)
    indices = bootstrap_samples(len(refs), samples=50)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    monkeypatch.setattr("scoring.groups.GROUP_SAMPLES", 50)
    labels, bleu = {}, {}
    for number, (folder, label, shift, seed, share) in enumerate(RUNS):
        config = to_dict(load_config(None, [f"model.positional.shape.max_shift={shift}"]))
        hyps = degrade(refs, share, number)
        write_evaluated_run(tmp_path / folder, config, "shape" if label != "sinusoidal" else "sinusoidal", seed,
                            hyps, refs, indices)
        labels[tmp_path / folder] = label
        bleu.setdefault(label, []).append(sacrebleu.corpus_bleu(hyps, [refs]).score)
    return labels, bleu


def cells(markdown: str) -> dict[str, list[str]]:
    return {line.strip("| ").split(" | ")[0]: line.strip("| ").split(" | ")
            for line in markdown.splitlines()[2:] if line.startswith("| ")}


def test_every_table_of_a_study_names_its_rows_by_the_studys_labels(tmp_path, monkeypatch):
    labels, bleu = study_runs(tmp_path, monkeypatch)
    dirs = list(labels)
    # without labels, the two shape rows are told apart by their setting
    assert set(cells(compare(dirs, "test")[0])) == {
        "sinusoidal", "shape (model.positional.shape.max_shift=100)", "shape (model.positional.shape.max_shift=20)"}
    table = cells(compare(dirs, "test", labels=labels)[0])
    assert set(table) == {"sinusoidal", "shape", "shape-k20"}
    for label, scores in bleu.items():  # each label's two seeds folded: mean ± sample std
        assert table[label][1] == "2"
        assert table[label][4] == f"{statistics.mean(scores):.2f} ± {statistics.stdev(scores):.2f}"
    assert {label: [r.seed for r in runs] for label, runs in table_rows(dirs, "test", labels).items()} == {
        "sinusoidal": [1, 2], "shape": [1, 2], "shape-k20": [1, 2]}
    groups = cells(significance_groups(dirs, "test", labels=labels)[0])
    assert set(groups) == set(bleu)
    assert {label: float(row[2]) for label, row in groups.items()} == pytest.approx(
        {label: statistics.mean(scores) for label, scores in bleu.items()}, abs=0.006)
    _, by_length, _ = length_study(dirs, tmp_path / "lengths", labels=labels)
    assert set(cells(by_length.read_text(encoding="utf-8"))) == set(bleu)


def test_two_runs_of_one_label_and_seed_are_refused(tmp_path, monkeypatch):
    labels, _ = study_runs(tmp_path, monkeypatch)
    labels[tmp_path / "shape-k20-seed2"] = "shape"  # seed 2 of shape twice: it would pass for a third seed
    for table in (lambda: compare(list(labels), "test", labels=labels),
                  lambda: table_rows(list(labels), "test", labels)):
        with pytest.raises(UserError, match=r" are both seed 2 of row 'shape': one would pass for another seed$"):
            table()


def test_the_length_table_is_the_same_whatever_order_its_folders_come_in(tmp_path, monkeypatch):
    """Its interval and p beyond the training lengths draw each row's seeds by position: in seed order, not in
    the order the folders were named (a shell's glob sorts `alibi/` after `alibi-seed2/`)."""
    labels, _ = study_runs(tmp_path, monkeypatch)
    limit = load_config(None).data.synthetic["train"].max_words  # 12
    for folder in labels:  # half the sources within the training lengths, half beyond
        sources = [" ".join(["mot"] * (3 if i % 2 else limit + 5)) for i in range(60)]
        (folder / "eval" / "test" / "srcs.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    dirs = list(labels)
    _, forward, _ = length_study(dirs, tmp_path / "forward", labels=labels)
    _, backward, _ = length_study(dirs[::-1], tmp_path / "backward", labels=labels)
    table = forward.read_text(encoding="utf-8")
    assert "> 12: 95% CI" in table and table == backward.read_text(encoding="utf-8")
