"""Replicates (runs of one recipe and one seed, e.g. a re-run beside its archived run) are rows of
their own in every table that folds seeds: folded, two copies of seed 1 would pass for a seed spread."""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import sacrebleu

from analysis.results import length_study
from experiment.config import load_config, to_dict
from scoring.compare import compare
from scoring.evaluated import REPLICATES_NOTE, row_keys
from scoring.groups import significance_groups, table_rows
from scoring.metrics import Draws, bootstrap_samples
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run
from utils.errors import UserError


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
    # one folder named twice (here once through '..'): refused, not a second seed of spread 0
    with pytest.raises(UserError, match=r"^report/multi30k/\.\./multi30k/rope is named twice: name each run once"):
        row_keys([("rope", 1, a / "rope"), ("alibi", 1, a / "alibi"), ("rope", 1, a / ".." / "multi30k" / "rope")])


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
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=100))
    dirs, hyps = runs_with_a_replicate(tmp_path, refs, indices)
    bleu = {i: sacrebleu.corpus_bleu(h, [refs]).score for i, h in hyps.items()}
    markdown, _ = compare(dirs, "test", baseline=dirs[-1])
    lines = markdown.splitlines()
    rows = {line.strip("| ").split(" | ")[0]: line.strip("| ").split(" | ") for line in lines[2:4]}
    archive, rerun = f"sinusoidal ({tmp_path / 'report'})", f"sinusoidal ({tmp_path / 'runs'})"
    assert sorted(rows) == sorted([archive, rerun]) and len(lines[4]) == 0  # two rows, no third
    assert rows[archive][1] == "3" and rows[rerun][1] == "1"
    assert rows[archive][4] == f"{statistics.mean(bleu[i] for i in (1, 2, 3)):.2f} ± {statistics.stdev(bleu[i] for i in (1, 2, 3)):.2f}"
    assert rows[rerun][4] == f"{bleu[4]:.2f}" and rows[rerun][-3:] == ["—", "—", "—"]  # the baseline named
    assert f"| p vs {rerun} | p MC SE | significant |" in lines[0] and " " + REPLICATES_NOTE + " " in lines[-1]
    # the significance groups fold the same way, and their caption says why a recipe has two rows
    assert {label: len(members) for label, members in table_rows(dirs, "test").items()} == {archive: 3, rerun: 1}
    monkeypatch.setattr("scoring.groups.GROUP_SAMPLES", 100)
    assert REPLICATES_NOTE in significance_groups(dirs, "test")[0].splitlines()[-1]
    assert REPLICATES_NOTE not in significance_groups(dirs[:3], "test")[0]
    # a baseline not among the runs named joins them: the same table
    assert compare(dirs[:3], "test", baseline=dirs[-1])[0] == markdown
    # a table without replicates says nothing of them
    assert REPLICATES_NOTE not in compare(dirs[:3], "test")[0]
    # a run named twice is refused by every table that folds seeds
    for table in (lambda: compare([*dirs, dirs[1]], "test"), lambda: table_rows([*dirs, dirs[1]], "test"),
                  lambda: length_study([*dirs, dirs[1]], tmp_path / "twice")):
        with pytest.raises(UserError, match=f"^{dirs[1]} is named twice"):
            table()


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


def test_a_variants_decode_beside_its_run_is_a_row_of_its_own_not_a_replicate(tmp_path, monkeypatch):
    """A study's evaluation variant decodes a trained run again (same recipe and seed, its own decoding
    rule): a row of its own, told by the variant and never taken for a replicate; the default baseline
    is the plain sinusoidal row whatever order the folders come in; the variant's decodes must agree
    among themselves."""
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    refs = corpus(40, 10)
    indices = bootstrap_samples(len(refs), samples=50)
    config = to_dict(load_config(None))
    oracle = {"beam": 5, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "stopping": "first_k",
              "batch_size": 64, "cut_sources": 0, "oracle_length": True}
    made = {}
    for name, scheme, seed, share, decode, variant in (
            ("rope", "rope", 1, 0.3, None, None), ("sinusoidal-oracle", "sinusoidal", 1, 0.25, oracle, "oracle"),
            ("sinusoidal", "sinusoidal", 1, 0.2, None, None),
            ("sinusoidal-seed2-oracle", "sinusoidal", 2, 0.22, {**oracle, "beam": 4}, "oracle")):
        made[name] = tmp_path / name
        write_evaluated_run(made[name], config, scheme, seed, degrade(refs, share, seed + len(made)), refs, indices,
                            decode=decode)
        results = made[name] / "eval" / "test" / "results.json"
        results.write_text(json.dumps({**json.loads(results.read_text(encoding="utf-8")), "variant": variant}),
                           encoding="utf-8")
    markdown, _ = compare([made["rope"], made["sinusoidal-oracle"], made["sinusoidal"]], "test")
    lines = markdown.splitlines()
    labels = [line.strip("| ").split(" | ")[0] for line in lines[2:] if line.startswith("| ")]
    assert len(labels) == 3 and REPLICATES_NOTE not in markdown
    (plain,) = [label for label in labels if label.startswith("sinusoidal") and "oracle" not in label]
    assert sum("oracle" in label for label in labels) == 1 and f"| p vs {plain} |" in lines[0]
    with pytest.raises(UserError, match=r"were decoded differently on 'test'"):  # two oracle decodes, two rules
        compare(list(made.values()), "test")
