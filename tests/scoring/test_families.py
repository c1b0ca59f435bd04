"""Declared families of hypotheses: each pair's two-sided paired bootstrap over seeds x sentences
and Holm within the family, recomputed here; the study file's declaration and its one-line errors."""
from __future__ import annotations

import csv
import statistics
import zlib

import numpy as np
import pytest
import sacrebleu

from experiment.config import load_config, to_dict
from scoring.families import family_table, write_family
from scoring.metrics import BOOTSTRAP_SEED, bootstrap_samples
from studies.catalog import load_study
from tests.scoring.test_statistics import corpus, degrade, two_level, write_evaluated_run
from utils.errors import ConfigError, UserError


def test_hand_worked_holm_within_a_family():
    """Raw p 0.01, 0.04, 0.03 in a family of three: sorted 0.01, 0.03, 0.04 are multiplied by 3, 2, 1
    (0.03, 0.06, 0.04) and made non-decreasing (0.03, 0.06, 0.06) — in a family of one, 0.04 stays."""
    from scoring.groups import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.04]) == [0.04]


def test_a_family_is_tested_two_sided_over_seeds_and_sentences_and_corrected_within_itself(tmp_path, monkeypatch):
    samples = 120
    monkeypatch.setattr("scoring.families.GROUP_SAMPLES", samples)
    refs = corpus(36, 21)
    indices = bootstrap_samples(len(refs), samples)
    config = to_dict(load_config(None))
    shares = {"sinusoidal": (0.30, 0.33), "rope": (0.05, 0.08), "alibi": (0.31, 0.28), "t5": (0.5, 0.45)}
    dirs, hyps = [], {}
    for i, (scheme, pair) in enumerate(shares.items()):
        for seed, share in enumerate(pair, start=1):
            dirs.append(tmp_path / f"{scheme}-{seed}")
            hyps.setdefault(scheme, []).append(degrade(refs, share, 10 * i + seed))
            write_evaluated_run(dirs[-1], config, scheme, seed, hyps[scheme][-1], refs, indices)
    pairs = [("rope", "sinusoidal"), ("alibi", "sinusoidal"), ("t5", "alibi")]
    markdown, table = family_table(dirs, "test", "mine", pairs)

    bleu = sacrebleu.metrics.BLEU()
    mean = {s: statistics.mean(bleu.corpus_score(h, [refs]).score for h in hyps[s]) for s in hyps}
    # each row's seeds drawn from a stream named by its label alone (the same in every family)
    drawn = {s: two_level(hyps[s], refs, indices, BOOTSTRAP_SEED + 1 + zlib.crc32(s.encode()) % 100_000) for s in hyps}
    raw, expected = [], []
    for row, base in pairs:
        d = drawn[row] - drawn[base]
        observed = mean[row] - mean[base]
        against = np.mean(d <= 0) if observed >= 0 else np.mean(d >= 0)
        raw.append(min(1.0, 2 * float(against)))
        expected.append((row, base, observed, np.percentile(d, 2.5), np.percentile(d, 97.5)))
    order = sorted(range(3), key=lambda i: raw[i])  # Holm written out for three
    corrected = [0.0] * 3
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[i]))
        corrected[i] = running
    rows = list(csv.reader(table.splitlines()))
    assert rows[0] == ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant"]
    for got, (row, base, observed, low, high), p, q in zip(rows[1:], expected, raw, corrected):
        assert got == [row, base, "2", f"{observed:+.2f}", f"{low:+.2f}", f"{high:+.2f}", f"{p:.4f}", f"{q:.4f}",
                       "yes" if q < 0.05 else "no"]
    verdicts = [r[-1] for r in rows[1:]]
    assert verdicts[0] == "yes" and verdicts[1] == "no"  # rope far above; alibi level with sinusoidal
    assert "family `mine`: 3 hypotheses" in markdown and "corrected within the family (Holm 1979)" in markdown
    # a smaller family corrects less: rope vs sinusoidal alone keeps its raw p
    alone = list(csv.reader(family_table(dirs, "test", "one", pairs[:1])[1].splitlines()))[1]
    assert alone[6] == alone[7] == f"{raw[0]:.4f}"
    # the files, and a family naming a row with no runs
    md_path, csv_path = write_family(dirs, "test", tmp_path / "archive", "mine", pairs)
    assert md_path.name == "family_mine_test.md" and csv_path.read_bytes().decode("utf-8") == table
    with pytest.raises(UserError, match=r"the family tests 'xl', which has no runs in the table"):
        family_table(dirs, "test", "bad", [("xl", "sinusoidal")])


def write_study(tmp_path, families: str) -> object:
    config = tmp_path / "run.yaml"
    config.write_text("seed: 1\n", encoding="utf-8")
    path = tmp_path / "fam.yaml"
    path.write_text(f"config: {config}\nschemes: [sinusoidal, rope, alibi, fox]\nseeds: [1]\nout: out\n"
                    f"families:\n{families}", encoding="utf-8")
    return path


def test_a_study_declares_its_families_as_pairs(tmp_path):
    path = write_study(tmp_path, "  vs-sinusoidal: {baseline: sinusoidal, rows: all}\n"
                                 "  papers: {pairs: [fox vs alibi], baseline: rope, rows: [alibi]}\n")
    study = load_study(path)
    assert study.families == {"vs-sinusoidal": (("rope", "sinusoidal"), ("alibi", "sinusoidal"), ("fox", "sinusoidal")),
                              "papers": (("alibi", "rope"), ("fox", "alibi"))}
    for families, message in (
            ("  a: {pairs: [xl vs rope]}\n", r"'families\.a' names 'xl', not a row of the study"),
            ("  a: {pairs: [fox vs rope, rope vs fox]}\n", r"'families\.a' tests rope vs fox twice or against itself"),
            ("  a: {pairs: [rope vs rope]}\n", r"'families\.a' tests rope vs rope twice or against itself"),
            ("  a: {pairs: [rope against fox]}\n", r"pairs"),
            ("  a: {rows: all}\n", r"rows"),
            ("  a: {}\n", r"pairs")):
        with pytest.raises(ConfigError, match=message):
            load_study(write_study(tmp_path, families))
