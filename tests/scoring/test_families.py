"""Declared families of hypotheses: each pair's two-sided paired bootstrap over seeds x sentences
and Holm within the family, recomputed here; the study file's declaration and its one-line errors."""
from __future__ import annotations

import csv
import math
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
    shares = {"sinusoidal": (0.30, 0.33), "rope": (0.05, 0.08), "alibi": (0.31, 0.28), "t5": (0.5, 0.45),
              "xl": (0.27, 0.30)}
    dirs, hyps = [], {}
    for i, (scheme, pair) in enumerate(shares.items()):
        for seed, share in enumerate(pair, start=1):
            dirs.append(tmp_path / f"{scheme}-{seed}")
            hyps.setdefault(scheme, []).append(degrade(refs, share, 10 * i + seed))
            write_evaluated_run(dirs[-1], config, scheme, seed, hyps[scheme][-1], refs, indices)
    pairs = [("rope", "sinusoidal"), ("alibi", "sinusoidal"), ("t5", "alibi"), ("xl", "sinusoidal")]
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
    order = sorted(range(4), key=lambda i: raw[i])  # Holm written out for four
    corrected, corrected_se = [0.0] * 4, [0.0] * 4
    running = running_se = 0.0
    for rank, i in enumerate(order):
        # each raw p's Monte Carlo error: two-sided p = 2q of S samples, q at least 1/S; the adjusted p's is the
        # error of the raw p that sets it, times that p's multiplier
        q = min(max(raw[i] / 2, 1 / samples), 1.0)
        if min(1.0, (4 - rank) * raw[i]) >= running:
            running, running_se = min(1.0, (4 - rank) * raw[i]), (4 - rank) * 2 * math.sqrt(q * (1 - q) / samples)
        corrected[i], corrected_se[i] = running, running_se
    rows = list(csv.reader(table.splitlines()))
    assert rows[0] == ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant", "p_holm_se",
                       "borderline", "margin", "p_equivalence", "p_equivalence_holm", "equivalent",
                       "p_equivalence_holm_se", "equivalence_borderline"]
    for got, (row, base, observed, low, high), p, q, se in zip(rows[1:], expected, raw, corrected, corrected_se):
        assert got == [row, base, "2", f"{observed:+.2f}", f"{low:+.2f}", f"{high:+.2f}", f"{p:.4f}", f"{q:.4f}",
                       "yes" if q < 0.05 else "no", f"{se:.4f}", "yes" if abs(q - 0.05) < 3 * se else "no",
                       "", "", "", "", "", ""]  # no margin declared: no equivalence test
    assert "p (Holm) ± MC SE" in markdown and f"{corrected[0]:.4f} ± {corrected_se[0]:.4f}" in markdown
    # with a margin of 25 BLEU (36 sentences, two seeds: wide intervals): two one-sided tests on the same resampled differences, Holm over the four
    margin = 25.0
    tost = [max(np.mean(drawn[row] - drawn[base] <= -margin), np.mean(drawn[row] - drawn[base] >= margin))
            for row, base in pairs]
    order = sorted(range(4), key=lambda i: tost[i])
    tost_holm, running = [0.0] * 4, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (4 - rank) * tost[i]))
        tost_holm[i] = running
    equivalence = list(csv.reader(family_table(dirs, "test", "mine", pairs, margin=margin)[1].splitlines()))[1:]
    for got, p, q in zip(equivalence, tost, tost_holm):
        assert got[11:15] == ["25.00", f"{p:.4f}", f"{q:.4f}", "yes" if q < 0.05 else "no"]
    assert equivalence[0][14] == "no" and equivalence[0][8] == "yes"  # rope: far from sinusoidal, not equivalent
    assert equivalence[1][14] == "yes" and equivalence[1][8] == "no"  # alibi: close to sinusoidal, within 25
    assert any(q != p for p, q in zip(raw, corrected) if 0 < p < 1)  # the correction changes something here
    verdicts = [r[8] for r in rows[1:]]
    assert verdicts[0] == "yes" and verdicts[1] == "no"  # rope far above; alibi not shown to differ
    assert "family `mine`: 4 hypotheses" in markdown and "corrected within the family (Holm 1979)" in markdown
    # a smaller family corrects less: rope vs sinusoidal alone keeps its raw p
    alone = list(csv.reader(family_table(dirs, "test", "one", pairs[:1])[1].splitlines()))[1]
    assert alone[6] == alone[7] == f"{raw[0]:.4f}"
    # the files, and a family naming a row with no runs
    md_path, csv_path = write_family(dirs, "test", tmp_path / "archive", "mine", pairs)
    assert md_path.name == "family_mine_test.md" and csv_path.read_bytes().decode("utf-8") == table
    with pytest.raises(UserError, match=r"the family tests 'deberta', which has no runs in the table"):
        family_table(dirs, "test", "bad", [("deberta", "sinusoidal")])


def write_study(tmp_path, families: str) -> object:
    config = tmp_path / "run.yaml"
    config.write_text("seed: 1\n", encoding="utf-8")
    path = tmp_path / "fam.yaml"
    path.write_text(f"config: {config}\nschemes: [sinusoidal, rope, alibi, fox]\nseeds: [1]\nout: out\n"
                    f"families:\n{families}", encoding="utf-8")
    return path


def test_a_study_declares_its_families_as_pairs(tmp_path):
    path = write_study(tmp_path, "  vs-sinusoidal: {baseline: sinusoidal, rows: all, declared: 2026-11-28}\n"
                                 "  papers: {pairs: [fox vs alibi], baseline: rope, rows: [alibi], declared: 2026-11-28}\n")
    study = load_study(path)
    assert {name: family.pairs for name, family in study.families.items()} == {
        "vs-sinusoidal": (("rope", "sinusoidal"), ("alibi", "sinusoidal"), ("fox", "sinusoidal")),
        "papers": (("alibi", "rope"), ("fox", "alibi"))}
    for families, message in (
            ("  a: {pairs: [xl vs rope], declared: 2026-11-28}\n", r"'families\.a' names 'xl', not a row of the study"),
            ("  a: {pairs: [fox vs rope, rope vs fox], declared: 2026-11-28}\n",
             r"'families\.a' tests rope vs fox twice or against itself"),
            ("  a: {pairs: [rope vs rope], declared: 2026-11-28}\n", r"'families\.a' tests rope vs rope twice or against itself"),
            ("  a: {pairs: [rope against fox], declared: 2026-11-28}\n", r"pairs"),
            ("  a: {rows: all, declared: 2026-11-28}\n", r"rows"),
            ("  a: {declared: 2026-11-28}\n", r"pairs"),
            ("  a: {pairs: [fox vs rope]}\n", r"'families\.a\.declared' in .* must be the date \(and time, UTC\) the family "
                                             r"was declared, ISO 8601"),
            ("  a: {pairs: [fox vs rope], declared: last week}\n", r"'families\.a\.declared'"),
            ("  a: {pairs: [fox vs rope], declared: 2026-11-28, interaction: other, variants: all}\n",
             r"'families\.a\.variants' .* must be empty in an interaction family")):
        with pytest.raises(ConfigError, match=message):
            load_study(write_study(tmp_path, families))


def test_buckets_pool_the_test_sets_and_test_each_family_within_each_bucket(tmp_path, monkeypatch):
    """Two test sets pooled, sentences bucketed by source words: each row's BLEU, its interval over
    seeds x sentences, chrF and length ratio per bucket (recomputed here with sacrebleu on the chosen
    sentences), the sentence counts, and a family tested within each bucket; a bucket nobody falls in
    is a one-line error."""
    import json
    import shutil

    from scoring.buckets import parse_bucket, write_bucket_tables

    monkeypatch.setattr("scoring.families.GROUP_SAMPLES", 60)
    config = to_dict(load_config(None))
    refs = {"test": corpus(20, 41), "other": corpus(14, 42)}
    sources = {name: [" ".join(["mot"] * (2 + i % 9)) for i in range(len(lines))] for name, lines in refs.items()}
    shares = {("sinusoidal", 1): 0.4, ("sinusoidal", 2): 0.35, ("shaw", 1): 0.1, ("shaw", 2): 0.15}
    dirs, hyps = [], {}
    for i, ((scheme, seed), share) in enumerate(shares.items()):
        folder = tmp_path / f"{scheme}-{seed}"
        for name in ("test", "other"):
            hyps[(scheme, seed, name)] = degrade(refs[name], share, 10 * i + len(name))
        write_evaluated_run(folder, config, scheme, seed, hyps[(scheme, seed, "test")], refs["test"],
                            bootstrap_samples(20, 10))
        shutil.copytree(folder / "eval" / "test", folder / "eval" / "other")
        for name in ("test", "other"):
            (folder / "eval" / name / "srcs.txt").write_text("\n".join(sources[name]) + "\n", encoding="utf-8")
        for file, lines in (("hyps.txt", hyps[(scheme, seed, "other")]), ("refs.txt", refs["other"])):
            (folder / "eval" / "other" / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
        record = json.loads((folder / "eval" / "other" / "results.json").read_text(encoding="utf-8"))
        (folder / "eval" / "other" / "results.json").write_text(json.dumps({**record, "testset": "other"}),
                                                                 encoding="utf-8")
        dirs.append(folder)
    made = write_bucket_tables(dirs, ["test", "other"], ["2-5", "6-"], {"vs": [("shaw", "sinusoidal")]}, tmp_path / "a")
    assert [p.name for p in made] == ["buckets_test_other.md", "buckets_test_other.csv", "family_vs_words_2-5.md",
                                      "family_vs_words_2-5.csv", "family_vs_words_6-.md", "family_vs_words_6-.csv"]
    pooled_sources = sources["test"] + sources["other"]
    pooled_refs = refs["test"] + refs["other"]
    table = list(csv.reader(made[1].read_text(encoding="utf-8").splitlines()))
    assert table[0] == ["scheme", "bucket", "sentences", "seeds", "bleu", "low", "high", "chrf", "length_ratio",
                        "bleu_without_bp", "seed_bleus"]
    markdown = made[0].read_text(encoding="utf-8")
    # the caption names where shaw saturates (its clipping distance from its config), not sinusoidal
    clip = config["model"]["positional"]["shaw"]["max_distance"]
    assert markdown.rstrip().endswith(f"Where a scheme saturates (as trained; long inputs go past it): `shaw` relative "
                                      f"distances clip at ±{clip}.")
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    for lo, hi in ((2, 5), (6, None)):
        keep = [i for i, s in enumerate(pooled_sources) if lo <= len(s.split()) and (hi is None or len(s.split()) <= hi)]
        name = f"{lo}-{hi or ''}"
        assert f"### Source length {name} words ({len(keep)} sentences)" in markdown
        kept_refs = [pooled_refs[i] for i in keep]
        indices = np.random.default_rng(12345).integers(0, len(keep), size=(1000, len(keep)))  # 1,000 samples
        means = {}
        for scheme in ("shaw", "sinusoidal"):
            kept = [[(hyps[(scheme, s, "test")] + hyps[(scheme, s, "other")])[i] for i in keep] for s in (1, 2)]
            scores = [bleu.corpus_score(h, [kept_refs]) for h in kept]
            means[scheme] = statistics.mean(x.score for x in scores)
            ratio = statistics.mean(x.sys_len / x.ref_len for x in scores)
            chrf_mean = statistics.mean(chrf.corpus_score(h, [kept_refs]).score for h in kept)
            drawn = two_level(kept, kept_refs, indices, 12345 + 1)
            line = next(r for r in table if r[:2] == [scheme, name])
            # without the brevity penalty: exp of the mean log n-gram precision (sacreBLEU's own statistics)
            nobp = statistics.mean(100 * math.exp(sum(math.log(p / 100) for p in x.precisions) / 4) for x in scores)
            assert line[2:] == [str(len(keep)), "2", f"{means[scheme]:.2f}", f"{np.percentile(drawn, 2.5):.2f}",
                                f"{np.percentile(drawn, 97.5):.2f}", f"{chrf_mean:.2f}", f"{ratio:.3f}", f"{nobp:.2f}",
                                ";".join(f"{x.score:.2f}" for x in scores)]
        assert [r[0] for r in table if r[1] == name] == ["shaw", "sinusoidal"]  # best first: shaw is less degraded
        family = list(csv.reader((tmp_path / "a" / f"family_vs_words_{lo}-{hi or ''}.csv").read_text().splitlines()))
        assert family[1][:4] == ["shaw", "sinusoidal", "2", f"{means['shaw'] - means['sinusoidal']:+.2f}"]
        assert family[1][6] == family[1][7]  # a family of one: Holm leaves its p
    assert parse_bucket("21-") == (21, None) and parse_bucket(" 16-20 ") == (16, 20)
    with pytest.raises(UserError, match="a length bucket reads LOW-HIGH or LOW-"):
        parse_bucket("20-16")
    with pytest.raises(UserError, match="no test sentence has a source of 40- words"):
        write_bucket_tables(dirs, ["test"], ["40-"], {}, tmp_path / "b")


def test_an_interaction_family_tests_the_change_of_each_gap_between_two_studies(tmp_path, monkeypatch):
    """Two studies on the same sentences: each pair's difference in differences (gap here minus gap
    there) and its bootstrap written out here (one sentence resample for both studies, each study's
    seeds from a stream named by its label and the other study's name), Holm within the family; a
    study compared with itself on one seed a row has every resampled difference 0."""
    from scoring.families import interaction_table

    samples = 80
    monkeypatch.setattr("scoring.families.GROUP_SAMPLES", samples)
    refs = corpus(30, 23)
    indices = bootstrap_samples(len(refs), samples)
    config = to_dict(load_config(None))
    shares = {"here": {"sinusoidal": (0.30, 0.34), "rope": (0.10, 0.14), "alibi": (0.3, 0.28)},
              "there": {"sinusoidal": (0.20, 0.22), "rope": (0.25, 0.30), "alibi": (0.21, 0.2)}}
    dirs, hyps = {"here": [], "there": []}, {}
    for study, rows in shares.items():
        for i, (scheme, pair) in enumerate(rows.items()):
            for seed, share in enumerate(pair, start=1):
                folder = tmp_path / study / f"{scheme}-{seed}"
                hyps.setdefault((study, scheme), []).append(degrade(refs, share, 100 * len(study) + 10 * i + seed))
                write_evaluated_run(folder, config, scheme, seed, hyps[(study, scheme)][-1], refs, indices)
                dirs[study].append(folder)
    pairs = [("rope", "sinusoidal"), ("alibi", "sinusoidal")]
    markdown, table = interaction_table(dirs["here"], dirs["there"], "there", "test", "budget", pairs,
                                        standing="Confirmatory: declared 2026-11-28 09:00 UTC, before any run")

    bleu = sacrebleu.metrics.BLEU()
    mean = {key: statistics.mean(bleu.corpus_score(h, [refs]).score for h in runs) for key, runs in hyps.items()}

    def stream(label: str, study: str) -> int:
        name = label if study == "here" else f"{label}@there"
        return BOOTSTRAP_SEED + 1 + zlib.crc32(name.encode()) % 100_000

    drawn = {key: two_level(runs, refs, indices, stream(key[1], key[0])) for key, runs in hyps.items()}
    raw, expected = [], []
    for row, base in pairs:
        d = (drawn[("here", row)] - drawn[("here", base)]) - (drawn[("there", row)] - drawn[("there", base)])
        observed = (mean[("here", row)] - mean[("here", base)]) - (mean[("there", row)] - mean[("there", base)])
        against = np.mean(d <= 0) if observed >= 0 else np.mean(d >= 0)
        raw.append(min(1.0, 2 * float(against)))
        expected.append((row, base, observed, np.percentile(d, 2.5), np.percentile(d, 97.5)))
    holm = [min(1.0, 2 * min(raw)), max(min(1.0, 2 * min(raw)), max(raw))]  # Holm for two, sorted
    holm = holm if raw[0] <= raw[1] else holm[::-1]
    rows = list(csv.reader(table.splitlines()))
    for got, (row, base, observed, low, high), p, q in zip(rows[1:], expected, raw, holm):
        assert got[:9] == [row, base, "2", f"{observed:+.2f}", f"{low:+.2f}", f"{high:+.2f}", f"{p:.4f}", f"{q:.4f}",
                           "yes" if q < 0.05 else "no"]
        assert got[11:] == [""] * 6  # no margin declared: no equivalence test
    assert expected[0][2] > 10  # rope: far above sinusoidal here (fewer words replaced), below it there
    assert "minus its gap in `there` (a difference in differences" in markdown
    assert "family `budget`: 2 hypotheses declared in the study file (`families`). Confirmatory: declared" in markdown
    # a study against itself, one seed a row: every difference in differences is 0
    firsts = [d for d in dirs["here"] if d.name.endswith("-1")]
    same = list(csv.reader(interaction_table(firsts, firsts, "itself", "test", "x", pairs)[1].splitlines()))
    assert [r[3:8] for r in same[1:]] == [["+0.00", "+0.00", "+0.00", "1.0000", "1.0000"]] * 2
    # other references are refused in one line
    shutil_refs = tmp_path / "other-refs"
    write_evaluated_run(shutil_refs, config, "rope", 1, refs[::-1], refs[::-1], indices)
    with pytest.raises(UserError, match=r"an interaction with far needs the same test sentences"):
        interaction_table(firsts, [shutil_refs], "far", "test", "x", [("rope", "sinusoidal")])


def test_a_family_declared_after_its_studys_first_run_is_exploratory(tmp_path):
    """The standing read off the declared time and the archived runs' start times; a date alone is the
    end of its day, so a family declared the day its study first ran is not taken for confirmatory."""
    import dataclasses
    import json

    from studies.catalog import Family, Study, declared_at
    from studies.standing import family_standing

    runs = []
    for name, started in (("a", "2026-11-27T13:15:05+00:00"), ("b", "2026-11-27T14:00:00+00:00")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"started": started}), encoding="utf-8")
        runs.append(tmp_path / name)
    study = Study(name="s", base_config=tmp_path / "c.yaml", schemes=["rope"], seeds=[1], out=tmp_path)

    def declared_family(study: Study, declared: str) -> Study:
        return dataclasses.replace(study, families={"f": Family("f", (("rope", "sinusoidal"),), declared_at(declared))})

    def standing(declared: str, other=()) -> str:
        return family_standing(declared_family(study, declared), "f", runs, other)

    assert standing("2026-11-27T10:36:22Z") == ("Confirmatory: declared 2026-11-27 10:36 UTC, before the first run "
                                                "(2026-11-27 13:15 UTC)")
    assert standing("2026-11-27T13:16Z").startswith("Exploratory: declared 2026-11-27 13:16 UTC, after the first run "
                                                    "(2026-11-27 13:15 UTC)")
    assert standing("2026-11-27").startswith("Exploratory: declared 2026-11-27 23:59 UTC")  # the day's end
    assert standing("2026-11-26").startswith("Confirmatory")
    assert standing("2026-11-27T10:36+01:00").startswith("Confirmatory: declared 2026-11-27 09:36 UTC")
    assert family_standing(declared_family(study, "2026-11-28"), "f", []) == (
        "Confirmatory: declared 2026-11-28 23:59 UTC, before any run")
    (tmp_path / "c").mkdir()  # an interaction's other study started earlier: it counts too
    (tmp_path / "c" / "manifest.json").write_text(json.dumps({"started": "2026-11-20T00:00:00+00:00"}),
                                                  encoding="utf-8")
    assert standing("2026-11-26", [tmp_path / "c"]).startswith("Exploratory")
    assert declared_at("last week") is None and declared_at("2026-13-01") is None


def test_equivalence_is_the_larger_share_beyond_either_bound():
    """TOST written out on seven resampled differences and a margin of 1: 1 of 7 at or below -1, 2 of 7
    at or above +1, so p = 2/7; a margin of 2 leaves none beyond: p = 0."""
    from scoring.families import equivalence_p

    differences = np.array([-1.5, -0.5, 0.0, 0.2, 0.9, 1.0, 1.2])
    assert equivalence_p(differences, 1.0) == pytest.approx(2 / 7)
    assert equivalence_p(differences, 2.0) == 0.0
    assert equivalence_p(differences + 10, 1.0) == 1.0  # all beyond +1: surely not equivalent


def test_a_bootstrap_p_carries_its_monte_carlo_error_and_holm_carries_the_setting_terms():
    """A two-sided p of S resamples is 2q for a share q: its error 2 sqrt(q(1 - q)/S), q at least 1/S.
    Holm's adjusted p carries the error of the raw p that sets it, times that p's multiplier."""
    from scoring.groups import holm_se
    from scoring.significance import borderline, monte_carlo_se

    assert monte_carlo_se(0.05, 10_000, sides=2) == pytest.approx(2 * math.sqrt(0.025 * 0.975 / 10_000))
    assert monte_carlo_se(0.0, 10_000, sides=2) == pytest.approx(2 * math.sqrt(1e-4 * (1 - 1e-4) / 10_000))
    assert monte_carlo_se(0.3, 400) == pytest.approx(math.sqrt(0.3 * 0.7 / 400))  # a one-sided share (TOST)
    # raw 0.01, 0.04, 0.03: adjusted 0.03 (3 x 0.01), 0.06 (2 x 0.03, which also sets the third), 0.06
    assert holm_se([0.01, 0.04, 0.03], [0.001, 0.004, 0.002]) == pytest.approx([0.003, 0.004, 0.004])
    assert holm_se([0.04], [0.002]) == [0.002]
    # within 3 errors of 0.05 a verdict is borderline, on either side
    assert borderline(0.045, 0.002) and borderline(0.055, 0.002)
    assert not borderline(0.045, 0.001) and not borderline(0.2, 0.01)


def test_another_draw_of_the_bootstrap_keeps_every_verdict_that_is_not_borderline(tmp_path):
    """Five draws of a family's bootstrap (other sentence and seed streams): every verdict the first
    draw does not mark borderline comes out the same in each, and the p-values do move between draws
    (a test of nothing would pass too)."""
    from scoring.families import tested_family
    from scoring.groups import table_rows

    refs = corpus(60, 5)
    indices = bootstrap_samples(len(refs), 50)
    config = to_dict(load_config(None))
    shares = {"sinusoidal": (0.30, 0.32), "rope": (0.10, 0.12), "alibi": (0.29, 0.31), "t5": (0.22, 0.25),
              "xl": (0.45, 0.40), "fire": (0.27, 0.26)}
    dirs = []
    for i, (scheme, pair) in enumerate(shares.items()):
        for seed, share in enumerate(pair, start=1):
            dirs.append(tmp_path / f"{scheme}-{seed}")
            write_evaluated_run(dirs[-1], config, scheme, seed, degrade(refs, share, 10 * i + seed), refs, indices)
    rows = table_rows(dirs, "test")
    pairs = [(s, "sinusoidal") for s in shares if s != "sinusoidal"]
    draws = [tested_family(rows, pairs, samples=2_000, margin=3.0, draw=d) for d in range(5)]
    first = draws[0]
    assert {t.significant for t in first} == {True, False}  # the family holds both verdicts
    assert len({tuple(t.p for t in d) for d in draws}) == 5  # each draw is another bootstrap
    for i, test in enumerate(first):
        for other in draws[1:]:
            if not test.borderline:
                assert other[i].significant == test.significant, (test, other[i])
            if not test.equivalence_borderline:
                assert other[i].equivalent == test.equivalent, (test, other[i])
