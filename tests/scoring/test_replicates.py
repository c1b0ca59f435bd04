"""Replicates (runs of one recipe and one seed, e.g. a re-run beside its archived run) are rows of
their own in every table that folds seeds: folded, two copies of seed 1 would pass for a seed spread."""
from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import sacrebleu

from analysis.results import length_study
from experiment.config import load_config, to_dict
from scoring.compare import compare
from scoring.evaluated import REPLICATES_NOTE, row_keys
from scoring.groups import significance_groups, table_rows
from scoring.metrics import bootstrap_samples
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run


def test_each_run_joins_the_row_of_its_recipe_unless_a_seed_repeats():
    a, b = Path("report/multi30k"), Path("runs/multi30k")
    # seeds 1-3 of rope and one of alibi: a row per recipe
    assert row_keys([("rope", 1, a / "rope"), ("rope", 2, a / "rope-seed2"), ("alibi", 1, a / "alibi"),
                     ("rope", 3, a / "rope-seed3")]) == ["rope", "rope", "alibi", "rope"]
    # rope's seed 1 again in another folder: rope's runs form a row per parent folder, alibi's row is untouched
    assert row_keys([("rope", 1, a / "rope"), ("rope", 2, a / "rope-seed2"), ("rope", 1, b / "rope"),
                     ("alibi", 1, a / "alibi")]) == [f"rope@{a}", f"rope@{a}", f"rope@{b}", "alibi"]
    # both copies in one parent: a row per folder
    assert row_keys([("rope", 1, a / "rope"), ("rope", 1, a / "rope-again"), ("rope", 2, a / "rope-seed2")]) == [
        f"rope@{a / 'rope'}", f"rope@{a / 'rope-again'}", f"rope@{a / 'rope-seed2'}"]


def runs_with_a_replicate(tmp_path, refs, indices) -> tuple[list[Path], dict[int, list[str]]]:
    """Seeds 1-3 of sinusoidal archived under report/, seed 1 trained again under runs/ (other outputs,
    as another CPU's rounding gives)."""
    config, hyps, dirs = to_dict(load_config(None)), {}, []
    for seed, share, folder in ((1, 0.2, "report/sinusoidal"), (2, 0.4, "report/sinusoidal-seed2"),
                                (3, 0.3, "report/sinusoidal-seed3"), (1, 0.25, "runs/sinusoidal")):
        dirs.append(tmp_path / folder)
        hyps[len(dirs)] = degrade(refs, share, len(dirs))
        write_evaluated_run(dirs[-1], config, "sinusoidal", seed, hyps[len(dirs)], refs, indices)
    return dirs, hyps


def test_a_rerun_beside_its_archived_seeds_is_a_row_of_its_own(tmp_path, monkeypatch):
    refs = corpus(40, 8)
    indices = bootstrap_samples(len(refs), samples=100)
    monkeypatch.setattr("scoring.compare.bootstrap_samples", lambda n: bootstrap_samples(n, samples=100))
    dirs, hyps = runs_with_a_replicate(tmp_path, refs, indices)
    bleu = {i: sacrebleu.corpus_bleu(h, [refs]).score for i, h in hyps.items()}
    markdown, _ = compare(dirs, "test", baseline=dirs[-1])
    lines = markdown.splitlines()
    rows = {line.strip("| ").split(" | ")[0]: line.strip("| ").split(" | ") for line in lines[2:4]}
    archive, rerun = f"sinusoidal ({tmp_path / 'report'})", f"sinusoidal ({tmp_path / 'runs'})"
    assert sorted(rows) == sorted([archive, rerun]) and len(lines[4]) == 0  # two rows, no third
    assert rows[archive][1] == "3" and rows[rerun][1] == "1"
    assert rows[archive][4] == f"{statistics.mean(bleu[i] for i in (1, 2, 3)):.2f} ± {statistics.stdev(bleu[i] for i in (1, 2, 3)):.2f}"
    assert rows[rerun][4] == f"{bleu[4]:.2f}" and rows[rerun][-2:] == ["—", "—"]  # the baseline named
    assert f"| p vs {rerun} | significant |" in lines[0] and REPLICATES_NOTE in lines[-1]
    # the significance groups fold the same way, and their caption says why a recipe has two rows
    assert {label: len(members) for label, members in table_rows(dirs, "test").items()} == {archive: 3, rerun: 1}
    monkeypatch.setattr("scoring.groups.GROUP_SAMPLES", 100)
    assert REPLICATES_NOTE in significance_groups(dirs, "test")[0].splitlines()[-1]
    assert REPLICATES_NOTE not in significance_groups(dirs[:3], "test")[0]
    # a baseline not among the runs named joins them: the same table
    assert compare(dirs[:3], "test", baseline=dirs[-1])[0] == markdown
    # a table without replicates says nothing of them
    assert REPLICATES_NOTE not in compare(dirs[:3], "test")[0]


def test_the_length_study_keeps_a_replicate_apart(tmp_path):
    """The re-run here is an exact copy of the archived seed 1 (what the same CPU gives): still its own
    row, under its own folder's name."""
    refs = corpus(40, 9)
    dirs, _ = runs_with_a_replicate(tmp_path, refs, bootstrap_samples(len(refs), samples=20))
    shutil.rmtree(dirs[-1])
    shutil.copytree(dirs[0], dirs[-1])
    _, table, _ = length_study(dirs, tmp_path / "out")
    rows = [line.strip("| ").split(" | ") for line in table.read_text(encoding="utf-8").splitlines()[2:]
            if line.startswith("| ")]
    assert sorted((r[0], r[1]) for r in rows) == [(f"sinusoidal ({tmp_path / 'report'})", "3"),
                                                  (f"sinusoidal ({tmp_path / 'runs'})", "1")]
    assert REPLICATES_NOTE in table.read_text(encoding="utf-8").splitlines()[-1]
    _, alone, _ = length_study(dirs[:3], tmp_path / "alone")
    assert REPLICATES_NOTE not in alone.read_text(encoding="utf-8")
