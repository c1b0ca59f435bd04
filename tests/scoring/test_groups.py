"""Significance groups: Holm's correction, the compact letter display and the all-pairs tests,
each against a computation written out here."""
from __future__ import annotations

import csv
import itertools
import json
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from experiment.config import load_config, to_dict
from experiment.manifest import Manifest
from scoring.evaluated import EvaluatedRun
from scoring.groups import all_pairs, group_letter, groups_path, holm, letters, significance_groups, write_groups
from scoring.loaded import LoadedRun
from scoring.metrics import BOOTSTRAP_SEED, Draws, bootstrap_samples
from tests.conftest import ARITHMETIC_NOTE
from tests.scoring.test_statistics import corpus, degrade, two_level, write_evaluated_run
from utils.errors import UserError


def test_holm_multiplies_the_kth_smallest_by_m_minus_k_plus_1_and_keeps_the_order():
    # sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> 0.06 (never below the previous)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.9]) == [1.0, 1.0]  # 2 x 0.6 capped at 1
    assert holm([0.0, 0.0, 0.2]) == pytest.approx([0.0, 0.0, 0.2])
    assert holm([]) == []


def test_letters_of_hand_worked_displays():
    assert letters(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}
    assert letters(["A", "B", "C"], {frozenset("AC")}) == {"A": "a", "B": "ab", "C": "b"}
    # A≠C, A≠D, B≠D: the groups {A, B}, {B, C}, {C, D}
    assert letters(list("ABCD"), {frozenset("AC"), frozenset("AD"), frozenset("BD")}) == {
        "A": "a", "B": "ab", "C": "bc", "D": "c"}
    every = {frozenset(p) for p in itertools.combinations("ABC", 2)}
    assert letters(["A", "B", "C"], every) == {"A": "a", "B": "b", "C": "c"}
    alphabet = [f"r{i:02d}" for i in range(27)]  # every row apart: a group each
    apart = {frozenset(p) for p in itertools.combinations(alphabet[:26], 2)}
    assert "".join(letters(alphabet[:26], apart).values()) == "abcdefghijklmnopqrstuvwxyz"
    # past z the capitals (the synthetic length study's 33 rows can part into more than 26 groups)
    assert letters(alphabet, {frozenset(p) for p in itertools.combinations(alphabet, 2)})["r26"] == "A"
    assert group_letter(51) == "Z"
    with pytest.raises(UserError, match=r"^53 significance groups: more than the 52 letters a-z, A-Z$"):
        group_letter(52)


@pytest.mark.parametrize("seed", range(40))
def test_letters_separate_exactly_the_pairs_that_differ(seed):
    """The display's promise, checked on random relations: two rows share a letter if and only if
    they were not found to differ, and no group is another's subset (each letter says something)."""
    rng = random.Random(seed)
    rows = [f"r{i}" for i in range(rng.randint(2, 7))]
    different = {frozenset(p) for p in itertools.combinations(rows, 2) if rng.random() < 0.4}
    marks = letters(rows, different)
    for a, b in itertools.combinations(rows, 2):
        share = bool(set(marks[a]) & set(marks[b]))
        assert share == (frozenset((a, b)) not in different), (a, b, marks, different)
    members = {letter: {row for row in rows if letter in marks[row]} for letter in set("".join(marks.values()))}
    assert not any(g < h for g in members.values() for h in members.values())
    assert "a" in marks[rows[0]]  # lettered from the best row's group


def evaluated(label: str, seed: int, hyps: list[str], refs: list[str]) -> EvaluatedRun:
    run = LoadedRun(Path(label), {}, load_config(None), Manifest(), [], {}, {})  # a run of these texts alone
    return EvaluatedRun(run, label, label, seed, None, None, None, hyps, refs)


def test_all_pairs_are_the_two_sided_seed_bootstrap_holm_corrected():
    refs = corpus(40, 11)
    shares = {"alibi": (0.3, 0.34), "rope": (0.05, 0.08), "t5": (0.31, 0.36)}
    rows = {name: [evaluated(name, s + 1, degrade(refs, share, 10 * i + s), refs) for s, share in enumerate(seeds)]
            for i, (name, seeds) in enumerate(shares.items())}
    tests = all_pairs(rows, samples=200)
    indices = bootstrap_samples(len(refs), 200)
    # each row resampled once, on its own seed stream: BOOTSTRAP_SEED + 1 + its place in name order
    sampled = {name: two_level([r.hyps for r in rows[name]], refs, indices, BOOTSTRAP_SEED + 1 + i)
               for i, name in enumerate(sorted(rows))}
    mean = {name: statistics.mean(sacrebleu.corpus_bleu(r.hyps, [refs]).score for r in rows[name]) for name in rows}
    raw = {}
    for a, b in itertools.combinations(sorted(rows), 2):
        d = sampled[a] - sampled[b]
        observed = mean[a] - mean[b]
        raw[(a, b)] = min(1.0, 2 * (float(np.mean(d <= 0)) if observed >= 0 else float(np.mean(d >= 0))))
    assert [(t.a, t.b) for t in tests] == list(raw)
    for t in tests:
        assert t.p == pytest.approx(raw[(t.a, t.b)]) and t.difference == pytest.approx(mean[t.a] - mean[t.b])
        ranked = sorted(raw, key=raw.get)  # ties in the table's order of pairs
        smaller, k = [raw[pair] for pair in ranked], ranked.index((t.a, t.b))  # the largest (3 - j) p_(j) up to k
        terms = [min(1.0, (3 - j) * smaller[j]) for j in range(k + 1)]
        assert t.p_holm == pytest.approx(max(terms))
        # its Monte Carlo error: the setting term's (the last of the largest), 2 sqrt(q (1 - q) / S) x its multiplier
        j = max(i for i, term in enumerate(terms) if term == max(terms))
        q = max(smaller[j] / 2, 1 / 200)
        assert t.p_holm_se == pytest.approx((3 - j) * 2 * math.sqrt(q * (1 - q) / 200))
        assert t.borderline == (abs(t.p_holm - 0.05) < 3 * t.p_holm_se)
    by_pair = {(t.a, t.b): t for t in tests}
    assert by_pair[("alibi", "rope")].significant and not by_pair[("alibi", "t5")].significant
    assert 0.05 < by_pair[("alibi", "t5")].p < 1  # a p that the seed streams decide, not a certainty


def test_a_pair_of_equal_rows_has_p_one_and_other_references_are_named():
    refs = corpus(30, 15)
    hyps = degrade(refs, 0.3, 1)
    same = {"a": [evaluated("a", 1, hyps, refs)], "b": [evaluated("b", 1, hyps, refs)]}
    (test,) = all_pairs(same, samples=50)
    assert test.p == 1.0 and test.p_holm == 1.0 and test.difference == 0  # two-sided p capped at 1
    other = refs[:-1] + ["something else entirely"]
    mixed = {"a": same["a"], "b": [evaluated("b", 1, hyps, refs), evaluated("b2", 2, hyps, other)]}
    with pytest.raises(UserError, match=r"^b2 was scored on other references than the table's first run$"):
        all_pairs(mixed, samples=50)


def test_a_pair_at_exactly_the_level_is_not_significant(monkeypatch):
    """The caption's rule is corrected p < 0.05: a bootstrap p of exactly 0.05 (500 of 10,000
    resamples; one pair, so Holm leaves it) is not significant, and one just below it is."""
    refs = corpus(20, 18)
    rows = {"a": [evaluated("a", 1, degrade(refs, 0.3, 1), refs)], "b": [evaluated("b", 1, degrade(refs, 0.1, 2), refs)]}
    for p, significant in ((0.05, False), (0.0499, True)):
        monkeypatch.setattr("scoring.groups.two_sided_p", lambda differences, observed, p=p: p)
        (test,) = all_pairs(rows, samples=20)
        assert (test.p, test.p_holm, test.significant) == (p, p, significant)
        assert test.borderline  # 20 resamples: an error of 0.097, far wider than the distance to the level
    # 10,000 resamples: 0.0499 is within 3 errors (0.0031 each) of 0.05, 0.01 is 28 errors away
    for p, near in ((0.0499, True), (0.01, False)):
        monkeypatch.setattr("scoring.groups.two_sided_p", lambda differences, observed, p=p: p)
        (test,) = all_pairs(rows, samples=10_000)
        assert test.borderline == near and test.p_holm_se == pytest.approx(2 * math.sqrt(p / 2 * (1 - p / 2) / 10_000))


def test_the_groups_refuse_runs_of_two_machines_unless_allowed_and_then_list_the_mix(tmp_path, monkeypatch):
    monkeypatch.setattr("scoring.groups.GROUP_SAMPLES", 40)
    refs = corpus(20, 19)
    indices = bootstrap_samples(len(refs), 20)
    config = to_dict(load_config(None))
    dirs = [tmp_path / "sinusoidal", tmp_path / "rope"]
    for i, folder in enumerate(dirs):
        write_evaluated_run(folder, config, folder.name, 1, degrade(refs, 0.2 + 0.1 * i, i), refs, indices)
    manifest = json.loads((dirs[1] / "manifest.json").read_text(encoding="utf-8"))
    (dirs[1] / "manifest.json").write_text(json.dumps({**manifest, "cpu": "AMD EPYC"}), encoding="utf-8")
    out = tmp_path / "archive" / "groups_test.md"
    with pytest.raises(UserError, match=r"ran in different arithmetic \(cpu: "):
        significance_groups(dirs, "test")  # refused unless allowed: the default
    with pytest.raises(UserError, match=r"ran in different arithmetic \(cpu: "):
        write_groups(dirs, "test", out)
    assert not out.parent.exists()  # nothing half-written
    md_path, _ = write_groups(dirs, "test", out, allow_mixed_arithmetic=True)
    assert "Arithmetic mixed, allowed for this table" in md_path.read_text(encoding="utf-8").splitlines()[-1]


def test_the_groups_file_of_an_archive(tmp_path):
    refs = corpus(40, 12)
    indices = bootstrap_samples(len(refs), 50)
    config = to_dict(load_config(None))
    dirs = []
    for scheme, shares in (("sinusoidal", (0.3, 0.32)), ("rope", (0.02, 0.03)), ("alibi", (0.31, 0.29))):
        for seed, share in enumerate(shares, start=1):
            dirs.append(tmp_path / f"{scheme}-{seed}")
            write_evaluated_run(dirs[-1], config, scheme, seed, degrade(refs, share, seed + 7 * len(dirs)), refs, indices)
    out = groups_path(tmp_path / "archive" / "comparison_test.md")
    assert out == tmp_path / "archive" / "groups_test.md"
    assert groups_path(tmp_path / "mine.md") == tmp_path / "groups_mine.md"
    md_path, csv_path = write_groups(list(reversed(dirs)), "test", out)
    text = md_path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "| scheme | seeds | BLEU | group |" and lines[1] == "| --- | --- | --- | --- |"
    assert lines[5] == "" and lines[6].startswith("Test set `test`. Rows that share a letter")
    assert len(lines) == 7 and text.endswith(f"from the best row's group down. {ARITHMETIC_NOTE}\n")
    table = [line.strip("| ").split(" | ") for line in lines[2:5]]
    mean = {scheme: statistics.mean(sacrebleu.corpus_bleu(Path(d, "eval", "test", "hyps.txt").read_text().splitlines(),
                                                          [refs]).score for d in dirs if d.name.startswith(scheme))
            for scheme in ("sinusoidal", "rope", "alibi")}
    assert [row[0] for row in table] == sorted(mean, key=lambda s: -mean[s])  # best first
    assert [row[1] for row in table] == ["2", "2", "2"] and [row[2] for row in table] == [
        f"{mean[row[0]]:.2f}" for row in table]
    assert table[0][3] == "a" and table[1][3] == table[2][3] == "b"  # rope apart; the two close ones together
    assert "every pair of the 3 rows was tested (3 pairs)" in md_path.read_text(encoding="utf-8")
    with csv_path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    blank = rows.index([])
    assert rows[:blank] == [["scheme", "seeds", "BLEU", "group"], *table]
    assert rows[blank + 1] == ["a", "b", "difference", "p", "p_holm", "significant", "p_holm_se", "borderline"]
    assert len(rows) == blank + 5
    verdicts = {(a, b): flag for a, b, _, _, p_holm, flag, _, _ in rows[blank + 2:]}
    assert all(flag == ("yes" if float(rows[blank + 2 + i][4]) < 0.05 else "no")
               for i, flag in enumerate(verdicts.values()))
    assert sorted(verdicts.values()) == ["no", "yes", "yes"]  # rope apart from both; the close two not


def test_the_groups_refuse_rows_decoded_differently(tmp_path):
    refs = corpus(20, 16)
    indices = bootstrap_samples(len(refs), 20)
    config = to_dict(load_config(None))
    for scheme, beam in (("sinusoidal", 4), ("rope", 5)):
        decode = {"beam": beam, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "stopping": "first_k",
                  "batch_size": 64, "cut_sources": 0}
        write_evaluated_run(tmp_path / scheme, config, scheme, 1, refs, refs, indices, decode=decode)
    with pytest.raises(UserError, match=r"were decoded differently on 'test'"):
        significance_groups([tmp_path / "sinusoidal", tmp_path / "rope"], "test")


def test_compare_command_writes_the_groups_beside_the_table(tmp_path, capsys):
    from nmt.evaluate import main

    refs = corpus(30, 13)
    indices = bootstrap_samples(len(refs), 20)
    config = to_dict(load_config(None))
    dirs = []
    for i, (scheme, share) in enumerate((("sinusoidal", 0.3), ("rope", 0.02))):
        dirs.append(tmp_path / scheme)
        write_evaluated_run(dirs[-1], config, scheme, 1, degrade(refs, share, i), refs, indices)
    main(["--compare", *map(str, dirs), "--out", str(tmp_path / "t" / "comparison_test.md"), "--groups"])
    printed = capsys.readouterr().out
    assert f"written: {tmp_path / 't' / 'groups_test.md'} and {tmp_path / 't' / 'groups_test.csv'}" in printed
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == [
        "comparison_test.csv", "comparison_test.md", "groups_test.csv", "groups_test.md"]
    main(["--compare", *map(str, dirs), "--groups"])  # no --out: printed only
    assert "| scheme | seeds | BLEU | group |" in capsys.readouterr().out


def test_neither_table_depends_on_the_order_the_folders_come_in(tmp_path, monkeypatch):
    """A row's seeds are resampled in seed order: the same runs named in another order give the same
    interval, p, letters and pair tests (the two-level bootstrap draws seeds by their place)."""
    from scoring.compare import compare

    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=60))
    monkeypatch.setattr("scoring.groups.GROUP_SAMPLES", 60)
    refs = corpus(30, 14)
    indices = bootstrap_samples(len(refs), 60)
    config = to_dict(load_config(None))
    dirs = []
    for i, (scheme, shares) in enumerate((("sinusoidal", (0.3, 0.1, 0.5)), ("rope", (0.05, 0.4, 0.2)))):
        for seed, share in enumerate(shares, start=1):
            dirs.append(tmp_path / f"{scheme}-{seed}")
            write_evaluated_run(dirs[-1], config, scheme, seed, degrade(refs, share, 3 * i + seed), refs, indices)
    shuffled = [dirs[2], dirs[4], dirs[0], dirs[5], dirs[1], dirs[3]]
    assert compare(shuffled, "test") == compare(dirs, "test")
    assert significance_groups(shuffled, "test") == significance_groups(dirs, "test")
