"""Significance over seeds x sentences, the seed-spread rule, the recipe check and the length study,
against references written here (sacrebleu called directly, explicit resampling loops)."""
from __future__ import annotations

import collections
import csv
import io
import itertools
import json
import math
import random
import shutil
import statistics

import numpy as np
import pytest
import sacrebleu
import yaml

from analysis.results import length_buckets, length_study
from experiment.config import load_config, to_dict
from experiment.manifest import read_manifest
from scoring.compare import compare, write_comparison
from scoring.metrics import (
    BOOTSTRAP_SEED,
    Draws,
    Scored,
    bleu_confidence_interval,
    bootstrap_samples,
    corpus_bleu,
    corpus_chrf,
    nltk_bleu4,
    seed_bleu_interval,
    seed_char_bleu4,
    seed_paired_bootstrap_p,
    seed_resampled_bleu,
    sentence_bleu_stats,
)
from scoring.recipe import check_same_recipe, training_precision
from scoring.significance import verdict
from tests.conftest import ARITHMETIC_NOTE, arithmetic_manifest, evaluation_record
from utils.errors import UserError

WORDS = "the a man woman dog cat red blue runs sits on in street park with ball".split()


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def degrade(sentences: list[str], share: float, seed: int) -> list[str]:
    """Replace every word by a random one with probability ``share``."""
    rng = random.Random(seed)
    return [" ".join(w if rng.random() > share else rng.choice(WORDS) for w in s.split()) for s in sentences]


def reference_paired_p(system: list[str], baseline: list[str], refs: list[str], indices: np.ndarray) -> float:
    """Koehn's paired bootstrap written out: BLEU of both systems on each resampled test set."""
    bleu = sacrebleu.metrics.BLEU()
    observed = bleu.corpus_score(system, [refs]).score - bleu.corpus_score(baseline, [refs]).score
    worse = 0
    for row in indices:
        a = bleu.corpus_score([system[i] for i in row], [[refs[i] for i in row]]).score
        b = bleu.corpus_score([baseline[i] for i in row], [[refs[i] for i in row]]).score
        worse += (a - b <= 0) if observed >= 0 else (a - b >= 0)
    return worse / len(indices)


def test_one_seed_each_is_koehns_paired_bootstrap():
    refs = corpus(40, 0)
    system, baseline = degrade(refs, 0.3, 1), degrade(refs, 0.4, 2)
    indices = bootstrap_samples(len(refs), samples=200)
    assert seed_paired_bootstrap_p([system], [baseline], refs, indices) == pytest.approx(
        reference_paired_p(system, baseline, refs, indices))


def test_identical_and_clearly_better_systems():
    refs = corpus(60, 0)
    runs = [degrade(refs, 0.3, s) for s in range(3)]
    assert seed_paired_bootstrap_p(runs, runs, refs) > 0.4  # no evidence for a difference
    better = [degrade(refs, 0.05, 10 + s) for s in range(3)]
    assert seed_paired_bootstrap_p(better, runs, refs) < 0.01


def test_training_noise_is_not_mistaken_for_a_difference():
    """System A's first seed beats B clearly on the sentences, but its other seeds are worse than B:
    the sentence bootstrap of the first seeds alone calls it significant, the seed-aware one must not."""
    refs = corpus(80, 0)
    b_runs = [degrade(refs, 0.3, 20 + s) for s in range(3)]
    a_runs = [degrade(refs, 0.1, 30), degrade(refs, 0.45, 31), degrade(refs, 0.4, 32)]
    indices = bootstrap_samples(len(refs), samples=300)
    assert reference_paired_p(a_runs[0], b_runs[0], refs, indices) < 0.01
    assert seed_paired_bootstrap_p(a_runs, b_runs, refs, indices) > 0.2


def test_a_difference_within_the_seed_spread_is_never_significant():
    assert verdict(0.001, delta=0.5, spread=0.8) == "no"
    assert verdict(0.001, delta=-1.2, spread=0.8) == "yes"
    assert verdict(0.2, delta=3.0, spread=0.8) == "no"
    assert verdict(0.01, delta=0.1, spread=None) == "yes (one seed)"


def test_a_verdict_another_bootstrap_draw_may_turn_is_marked_borderline():
    """Within 3 Monte Carlo errors of 0.05 a verdict p decides is borderline, on either side of the
    level and with or without seeds; one the seed spread decides is not, whatever its p."""
    assert verdict(0.04, delta=2.0, spread=1.0, error=0.004) == "yes (borderline)"
    assert verdict(0.06, delta=2.0, spread=1.0, error=0.004) == "no (borderline)"
    assert verdict(0.04, delta=2.0, spread=None, error=0.004) == "yes (one seed, borderline)"
    assert verdict(0.04, delta=2.0, spread=1.0, error=0.003) == "yes"  # 0.01 away: 3.3 errors
    assert verdict(0.04, delta=0.5, spread=1.0, error=0.004) == "no"  # the spread decides: no draw turns it
    assert verdict(0.2, delta=2.0, spread=None, error=0.01) == "no (one seed)"
    # the error itself: 1,000 resamples, p 0.05 (a share of 0.025) and p 0 (a share counted as 1 of 1,000)
    from scoring.significance import monte_carlo_se
    assert monte_carlo_se(0.05, 1000, sides=2) == pytest.approx(2 * math.sqrt(0.025 * 0.975 / 1000))
    assert monte_carlo_se(0.0, 1000, sides=2) == pytest.approx(2 * math.sqrt(0.001 * 0.999 / 1000))


def config_run(folder, scheme: str = "sinusoidal", seed: int = 1, edit=None):
    """A run folder holding only config.yaml: the default config with ``scheme``, ``seed`` and ``edit(tree)``."""
    tree = to_dict(load_config(None))
    tree["model"]["positional"]["name"], tree["seed"] = scheme, seed
    if edit is not None:
        edit(tree)
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
    return folder


def test_runs_of_different_recipes_are_refused(tmp_path):
    sin1, sin2 = config_run(tmp_path / "sin1"), config_run(tmp_path / "sin2", seed=2)
    rope1 = config_run(tmp_path / "rope1", "rope")
    check_same_recipe([sin1, sin2, rope1])  # scheme and seed may differ
    longer = config_run(tmp_path / "longer", edit=lambda t: t["train"].update(max_steps=t["train"]["max_steps"] + 1))
    with pytest.raises(UserError) as err:
        check_same_recipe([sin1, rope1, longer, config_run(tmp_path / "other", edit=lambda t: t["train"].update(lr=0.123))])
    assert str(err.value) == (f"the runs were trained with different recipes ({sin1} and {longer} differ in more than "
                              "scheme and seed); a table must not mix them: move the runs of the old recipe aside")
    check_same_recipe([longer])


def test_a_table_may_hold_rows_that_differ_in_the_declared_keys_only(tmp_path):
    """A study's rows may set keys apart (``varying``, e.g. ``train.max_steps``, or a scheme's own
    option): those differences are allowed, and only those."""
    base = config_run(tmp_path / "base")
    longer = config_run(tmp_path / "longer", edit=lambda t: t["train"].update(max_steps=t["train"]["max_steps"] + 100))
    shifted = config_run(tmp_path / "shifted", "shape", edit=lambda t: t["model"]["positional"].update(
        shape={**t["model"]["positional"].get("shape", {}), "max_shift": 20}))
    other_lr = config_run(tmp_path / "lr", edit=lambda t: t["train"].update(lr=0.123))
    check_same_recipe([base, longer], varying={"train.max_steps"})
    check_same_recipe([base, shifted], varying={"model.positional.shape.max_shift"})
    with pytest.raises(UserError, match="different recipes"):
        check_same_recipe([base, shifted])  # the scheme's option differs: refused unless declared
    check_same_recipe([base, longer, shifted], varying={"train.max_steps", "model.positional.shape.max_shift"})
    with pytest.raises(UserError, match="different recipes"):
        check_same_recipe([base, longer], varying={"train.lr"})  # another key than the one that differs
    with pytest.raises(UserError, match=f"{base} and {other_lr} differ"):
        check_same_recipe([base, longer, other_lr], varying={"train.max_steps"})
    # a config written before a declared key existed lacks it: the schema's default stands in, no error
    older = config_run(tmp_path / "older", edit=lambda t: t["train"].pop("max_steps"))
    check_same_recipe([base, older, longer], varying={"train.max_steps"})
    with pytest.raises(UserError, match="different recipes"):
        check_same_recipe([base, longer], varying={"nosuch.section.max_steps"})  # a key no config has: nothing allowed


def test_runs_trained_in_different_precisions_are_refused(tmp_path):
    # amp: auto (the default) trains in fp32 on a CPU and in bf16 on a GPU: the configs are equal,
    # the arithmetic is not. Older manifests say only the device; newer ones say the precision.
    def with_manifest(run, **manifest):
        (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return run
    cpu = with_manifest(config_run(tmp_path / "cpu"), device="cpu (x86_64, 1 threads)")
    gpu = with_manifest(config_run(tmp_path / "gpu", seed=2), device="NVIDIA H100 80GB HBM3")
    fp32 = with_manifest(config_run(tmp_path / "fp32", "rope"), device="cpu (x86_64, 2 threads)", precision="fp32")
    bf16 = with_manifest(config_run(tmp_path / "bf16", "rope", seed=3), device="cpu", precision="bf16")
    check_same_recipe([cpu, fp32])
    check_same_recipe([gpu, bf16])
    for mixed, names in (([cpu, fp32, gpu], (cpu, "fp32", gpu, "bf16")), ([fp32, bf16], (fp32, "fp32", bf16, "bf16"))):
        with pytest.raises(UserError) as err:
            check_same_recipe(mixed)
        assert str(err.value).startswith("the runs were trained in different precisions ("
                                          f"{names[0]}: {names[1]}, {names[2]}: {names[3]}; ")
    no_amp = config_run(tmp_path / "no-amp", seed=4, edit=lambda t: t["train"].update(amp="none"))
    with_manifest(no_amp, device="NVIDIA H100 80GB HBM3")
    assert training_precision(read_manifest(no_amp), "none") == "fp32" and training_precision(read_manifest(gpu), "auto") == "bf16"
    assert training_precision(read_manifest(gpu), "fp16") == "fp16"


def test_two_recipes_three_precisions_and_old_manifests(tmp_path):
    def with_manifest(run, **manifest):
        (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return run
    # two recipes are one too many
    with pytest.raises(UserError, match="different recipes"):
        check_same_recipe([config_run(tmp_path / "a"), config_run(tmp_path / "b", edit=lambda t: t["train"].update(lr=0.5))])
    # three precisions: the message names the first two
    runs = [with_manifest(config_run(tmp_path / p, seed=i), device="cpu", precision=p)
            for i, p in enumerate(["fp32", "bf16", "fp16"])]
    with pytest.raises(UserError, match=f"\\({runs[0]}: fp32, {runs[1]}: bf16; "):
        check_same_recipe(runs)
    # a manifest that names no device (or no manifest at all): a CPU run, fp32
    bare = config_run(tmp_path / "bare")
    assert training_precision(read_manifest(bare), "auto") == "fp32"
    assert training_precision(read_manifest(with_manifest(config_run(tmp_path / "old"), parameters=1)), "auto") == "fp32"
    # amp none is fp32 on a GPU too: a CPU run and a GPU run of that recipe may share a table
    none = dict(edit=lambda t: t["train"].update(amp="none"))
    on_cpu = with_manifest(config_run(tmp_path / "none-cpu", **none), device="cpu (x86_64, 2 threads)")
    on_gpu = with_manifest(config_run(tmp_path / "none-gpu", seed=2, **none), device="NVIDIA H100 80GB HBM3")
    check_same_recipe([on_cpu, on_gpu])


@pytest.mark.parametrize("boundary", [None, 7, 12])
def test_length_buckets_partition_the_lengths(boundary):
    rng = random.Random(boundary)
    lengths = [rng.randint(3, 30) for _ in range(500)]
    buckets = length_buckets(lengths, boundary, min_count=40)
    assert buckets[0][0] == min(lengths) and buckets[-1][1] == max(lengths)
    assert all(a[1] < b[0] for a, b in zip(buckets, buckets[1:]))  # ordered, disjoint
    covered = sum(sum(lo <= n <= hi for n in lengths) for lo, hi in buckets)
    assert covered == len(lengths)
    # every bucket holds min_count sentences, except the last and the one the boundary closes
    assert all(sum(lo <= n <= hi for n in lengths) >= 40 for lo, hi in buckets[:-1] if hi != boundary)
    if boundary is not None:
        assert any(hi == boundary for _, hi in buckets)  # no bucket mixes within and beyond


def test_length_study_table_against_sacrebleu(runs, tmp_path):
    from nmt import evaluate as test_cli

    for name in ("sin1", "rope1"):
        test_cli.main(["--run", str(runs[name])])
    picture, table, table_csv = length_study([runs["sin1"], runs["rope1"]], tmp_path, min_count=5)
    assert picture.is_file() and picture.stat().st_size > 10_000
    srcs = (runs["sin1"] / "eval" / "test" / "srcs.txt").read_text(encoding="utf-8").splitlines()
    hyps = (runs["sin1"] / "eval" / "test" / "hyps.txt").read_text(encoding="utf-8").splitlines()
    refs = (runs["sin1"] / "eval" / "test" / "refs.txt").read_text(encoding="utf-8").splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")
            for line in table.read_text(encoding="utf-8").splitlines() if line.startswith("| ") and "---" not in line}
    header = rows.pop("scheme")
    assert set(rows) == {"sinusoidal", "rope"} and header[2] == "BLEU ≤ 6 words"  # the tiny config's max_words
    with table_csv.open(newline="", encoding="utf-8") as handle:  # the CSV beside it holds the same cells
        csv_header, *csv_rows = csv.reader(handle)
    assert csv_header == header and {row[0]: row for row in csv_rows} == rows
    first = header[4].split(" ")[0]
    lo, hi = (int(x) for x in first.split("–")) if "–" in first else (int(first), int(first))
    idx = [i for i, s in enumerate(srcs) if lo <= len(s.split()) <= hi]
    expected = sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
    assert float(rows["sinusoidal"][4]) == pytest.approx(expected, abs=0.005)
    assert float(rows["sinusoidal"][2]) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=0.005)


def test_length_study_tests_the_sentences_beyond_the_training_lengths(runs, tmp_path):
    """On the sentences longer than any training source (the tiny config trains on at most 6
    words), the table's interval and p are the explicit bootstrap written here, against sinusoidal."""
    rng = random.Random(5)
    sources = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(80)]
    refs = corpus(80, 1)
    hyps = {"sin1": degrade(refs, 0.5, 2), "rope1": degrade(refs, 0.15, 3)}
    dirs = []
    for name, hyp in hyps.items():
        run = tmp_path / name
        (run / "eval" / "test").mkdir(parents=True)
        shutil.copy(runs[name] / "config.yaml", run / "config.yaml")
        for filename, lines in (("srcs.txt", sources), ("hyps.txt", hyp), ("refs.txt", refs)):
            (run / "eval" / "test" / filename).write_text("\n".join(lines) + "\n", encoding="utf-8")
        (run / "eval" / "test" / "results.json").write_text(json.dumps(evaluation_record()), encoding="utf-8")
        dirs.append(run)
    _, table, _ = length_study(dirs, tmp_path / "out", min_count=10)
    lines = [line.strip("| ").split(" | ") for line in table.read_text(encoding="utf-8").splitlines()
             if line.startswith("| ") and "---" not in line]
    header, rows = lines[0], {row[0]: row for row in lines[1:]}
    assert header[3:8] == ["BLEU > 6 words", "> 6: 95% CI", "> 6: p vs sinusoidal", "> 6: p MC SE", "> 6: significant"]
    beyond = [i for i, s in enumerate(sources) if len(s.split()) > 6]
    assert 20 < len(beyond) < 80
    pick = lambda lines: [lines[i] for i in beyond]  # noqa: E731
    indices = bootstrap_samples(len(beyond))
    bleu = sacrebleu.metrics.BLEU()
    resampled = [bleu.corpus_score([pick(hyps["rope1"])[i] for i in row], [[pick(refs)[i] for i in row]]).score
                 for row in indices]
    assert rows["rope"][4] == f"[{np.percentile(resampled, 2.5):.2f}, {np.percentile(resampled, 97.5):.2f}]"
    p = reference_paired_p(pick(hyps["rope1"]), pick(hyps["sin1"]), pick(refs), indices)
    assert rows["rope"][5:7] == [f"{p:.3f}", f"{mc_se(p, len(indices)):.3f}"] and p < 0.05
    assert rows["rope"][7] == "yes (one seed)" and abs(p - 0.05) > 3 * mc_se(p, len(indices))  # far from borderline
    assert rows["sinusoidal"][5:8] == ["—", "—", "—"]
    assert float(rows["rope"][3]) == pytest.approx(bleu.corpus_score(pick(hyps["rope1"]), [pick(refs)]).score,
                                                   abs=0.005)


def test_rows_of_one_scheme_with_other_settings_are_labelled_by_those_settings(tmp_path):
    from scoring.evaluated import group_labels
    from scoring.loaded import load_run

    base = to_dict(load_config(None))
    variants = {"k20": {"shape": {"max_shift": 20}}, "k100": {"shape": {"max_shift": 100}},
                "k100-lr": {"shape": {"max_shift": 100}, "cape": {"max_global_shift": 1.0}, "lr": 0.5},
                "plain": {}}
    groups = {}
    for name, change in variants.items():
        def edit(tree, change=change):
            tree["model"]["positional"]["shape"]["max_shift"] = change.get("shape", {}).get("max_shift", 100)
            if "cape" in change:  # another scheme's option: not worth naming in a shape row
                tree["model"]["positional"]["cape"]["max_global_shift"] = change["cape"]["max_global_shift"]
            if "lr" in change:
                tree["train"]["lr"] = change["lr"]
        scheme = "sinusoidal" if name == "plain" else "shape"
        groups[name] = (scheme, load_run(config_run(tmp_path / name, scheme, seed=len(groups) + 1, edit=edit)))  # seeds never label
    lr = base["train"]["lr"]
    assert group_labels(groups) == {
        "k20": f"shape (model.positional.shape.max_shift=20, train.lr={lr})",
        "k100": f"shape (model.positional.shape.max_shift=100, train.lr={lr})",
        "k100-lr": "shape (model.positional.shape.max_shift=100, train.lr=0.5)",
        "plain": "sinusoidal"}
    # only another scheme's option differs: named, for want of anything else; nothing differs: the folder
    other = {"a": ("cape", config_run(tmp_path / "a", "cape")),
             "b": ("cape", config_run(tmp_path / "b", "cape", edit=lambda t: t["model"]["positional"]["shape"].update(max_shift=7))),
             "c": ("rope", config_run(tmp_path / "c", "rope")),
             "d": ("rope", config_run(tmp_path / "d", "rope", seed=5, edit=lambda t: t["decode"].update(beam=9)))}
    other = {key: (scheme, load_run(folder)) for key, (scheme, folder) in other.items()}
    assert group_labels(other) == {"a": "cape (model.positional.shape.max_shift=100)",
                                   "b": "cape (model.positional.shape.max_shift=7)", "c": "rope (c)", "d": "rope (d)"}


# ---------------------------------------------------------------- the bootstrap against explicit loops


def resampled(hyps: list[str], refs: list[str], indices: np.ndarray) -> np.ndarray:
    """BLEU of one system on each resampled test set: sacrebleu on the resampled sentences."""
    bleu = sacrebleu.metrics.BLEU()
    return np.array([bleu.corpus_score([hyps[i] for i in row], [[refs[i] for i in row]]).score for row in indices])


def adjusted(per_run: np.ndarray) -> np.ndarray:
    """Each sample's R seed BLEUs (R, S) moved away from their mean by sqrt(R/(R-1)): drawing R of R
    from them gives a mean whose variance is the seeds' unbiased variance over R."""
    r = len(per_run)
    mean = per_run.mean(0)
    return np.stack([mean + math.sqrt(r / (r - 1)) * (row - mean) for row in per_run])


def two_level(runs: list[list[str]], refs: list[str], indices: np.ndarray, stream: int) -> np.ndarray:
    """The seeds x sentences bootstrap written out: for sample s, the sentences of row s and R seeds
    drawn with replacement, the mean of those seeds' (adjusted) BLEU on those sentences. The seeds come
    from the fixed stream ``default_rng(stream).integers(0, R, (S, R))``: a published table must come
    out the same on every machine, so the stream is part of what the tables promise."""
    per_run = np.stack([resampled(h, refs, indices) for h in runs])  # (R, S)
    if len(runs) == 1:
        return per_run[0]
    per_run = adjusted(per_run)
    picks = np.random.default_rng(stream).integers(0, len(runs), size=(len(indices), len(runs)))
    return np.array([np.mean([per_run[r, s] for r in picks[s]]) for s in range(len(indices))])


def one_sided_p(a: np.ndarray, b: np.ndarray, observed: float) -> float:
    """Share of samples whose difference does not have the observed sign."""
    return float(np.mean(a - b <= 0)) if observed >= 0 else float(np.mean(a - b >= 0))


def test_the_sentences_are_drawn_with_replacement():
    indices = bootstrap_samples(50, samples=400)
    assert indices.shape == (400, 50) and indices.min() >= 0 and indices.max() < 50
    # with replacement a row holds 1 - (49/50)^50 = 63.6% distinct sentences; a permutation 100%
    distinct = np.mean([len(set(row.tolist())) for row in indices]) / 50
    assert abs(distinct - (1 - (49 / 50) ** 50)) < 0.02
    counts = np.bincount(indices.ravel(), minlength=50)  # each sentence 400 times on average
    assert counts.min() > 300 and counts.max() < 500
    assert np.array_equal(indices, bootstrap_samples(50, samples=400))  # every system resampled alike


def test_the_seeds_are_drawn_with_replacement_in_every_sample():
    """Whatever the stream: each two-level sample is the mean of 3 seeds' BLEU on that sample's
    sentences, with repeats as often as drawing with replacement gives (1 - 3!/3^3 = 78%)."""
    refs = corpus(30, 0)
    runs = [degrade(refs, share, 40 + i) for i, share in enumerate((0.1, 0.3, 0.5))]
    indices = bootstrap_samples(30, samples=300)
    per_run = adjusted(np.stack([resampled(h, refs, indices) for h in runs]))
    got = seed_resampled_bleu([sentence_bleu_stats(h, refs) for h in runs], indices, seed=7)
    chosen = []
    for s in range(len(indices)):
        matches = [c for c in itertools.combinations_with_replacement(range(3), 3)
                   if abs(per_run[list(c), s].mean() - got[s]) < 1e-9]
        assert matches, s
        chosen.append(matches[0])
    repeated = np.mean([len(set(c)) < 3 for c in chosen])
    assert 0.65 < repeated < 0.9
    usage = np.bincount([r for c in chosen for r in c], minlength=3) / (3 * len(chosen))
    assert np.all(np.abs(usage - 1 / 3) < 0.06)


def test_the_seed_draw_does_not_understate_the_seed_variance():
    """Every sample the whole test set, so only the seeds vary: the mean of 3 seeds drawn 3 of 3 has
    the seeds' unbiased variance over 3 (s^2 / 3, ddof 1) — not the (3 - 1)/3 of it that a plain draw
    gives — and the seeds' mean as its mean."""
    refs = corpus(40, 3)
    runs = [degrade(refs, share, 70 + i) for i, share in enumerate((0.1, 0.3, 0.6))]
    samples = 20_000
    indices = np.tile(np.arange(len(refs)), (samples, 1))
    bleus = [sacrebleu.metrics.BLEU().corpus_score(h, [refs]).score for h in runs]
    drawn = seed_resampled_bleu([sentence_bleu_stats(h, refs) for h in runs], indices, seed=3)
    assert np.var(drawn) == pytest.approx(np.var(bleus, ddof=1) / 3, rel=0.05)
    assert abs(np.var(drawn) - np.var(bleus) / 3) > 0.2 * np.var(bleus, ddof=1) / 3  # the plain draw's, far off
    assert np.mean(drawn) == pytest.approx(np.mean(bleus), abs=0.05 * np.std(bleus))


def test_seed_interval_and_p_are_the_explicit_two_level_loop():
    refs = corpus(30, 1)
    a = [degrade(refs, 0.25, 50 + s) for s in range(3)]
    b = [degrade(refs, 0.3, 60 + s) for s in range(2)]
    indices = bootstrap_samples(30, samples=200)
    sa, sb = two_level(a, refs, indices, BOOTSTRAP_SEED + 1), two_level(b, refs, indices, BOOTSTRAP_SEED + 2)
    bleu = sacrebleu.metrics.BLEU()
    observed = (np.mean([bleu.corpus_score(h, [refs]).score for h in a])
                - np.mean([bleu.corpus_score(h, [refs]).score for h in b]))
    assert seed_paired_bootstrap_p(a, b, refs, indices) == pytest.approx(one_sided_p(sa, sb, observed))
    # the other way round: the system's seeds come from the first stream, the baseline's from the second
    swapped = one_sided_p(two_level(b, refs, indices, BOOTSTRAP_SEED + 1),
                          two_level(a, refs, indices, BOOTSTRAP_SEED + 2), -observed)
    assert seed_paired_bootstrap_p(b, a, refs, indices) == pytest.approx(swapped)
    assert seed_bleu_interval(a, refs, indices) == pytest.approx((np.percentile(sa, 2.5), np.percentile(sa, 97.5)))


def test_p_and_interval_on_cases_whose_answer_is_known():
    refs = corpus(40, 2)
    system = degrade(refs, 0.3, 1)
    indices = bootstrap_samples(40, samples=300)
    # identical systems: no resample shows a difference in the observed direction (0): p = 1
    assert seed_paired_bootstrap_p([system], [system], refs, indices) == 1.0
    assert seed_paired_bootstrap_p([system] * 2, [system] * 3, refs, indices) == 1.0
    # perfect translations are better on every resample, in either order of the arguments: p = 0
    assert seed_paired_bootstrap_p([refs], [system], refs, indices) == 0.0
    assert seed_paired_bootstrap_p([system], [refs], refs, indices) == 0.0
    # a perfect system's interval is a point; a degraded one's is the explicit percentile interval,
    # of positive width, around its BLEU; identical seeds change nothing
    assert bleu_confidence_interval(refs, refs, indices) == pytest.approx((100.0, 100.0))
    explicit = resampled(system, refs, indices)
    low, high = bleu_confidence_interval(system, refs, indices)
    assert (low, high) == pytest.approx((np.percentile(explicit, 2.5), np.percentile(explicit, 97.5)))
    assert low < sacrebleu.corpus_bleu(system, [refs]).score < high and high - low > 1
    assert seed_bleu_interval([system] * 3, refs, indices) == pytest.approx((low, high))


def write_evaluated_run(folder, config: dict, scheme: str, seed: int, hyps: list[str], refs: list[str],
                        indices: np.ndarray, parameters: int | None = None, valid_losses: tuple = (),
                        nltk: float = 0.0, decode: dict | None = None) -> None:
    """A run folder as train.py and test.py leave it, with hypotheses chosen here and results
    computed here (the interval from the bootstrap samples ``indices``); the manifest records one
    arithmetic (``ARITHMETIC``) and ``parameters``, ``valid_losses`` as validation points of metrics.jsonl between training points."""
    tree = yaml.safe_load(yaml.safe_dump(config))
    (folder / "eval").mkdir(parents=True, exist_ok=True)
    fields = {} if parameters is None else {"parameters": parameters}
    (folder / "manifest.json").write_text(json.dumps(arithmetic_manifest(**fields)), encoding="utf-8")
    points = [p for loss in valid_losses for p in ({"kind": "train", "loss": loss / 10}, {"kind": "valid", "loss": loss})]
    if points:
        (folder / "eval").mkdir(parents=True, exist_ok=True)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points), encoding="utf-8")
    tree["model"]["positional"]["name"], tree["seed"] = scheme, seed
    (folder / "eval" / "test").mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
    bleu = sacrebleu.metrics.BLEU()
    explicit = resampled(hyps, refs, indices)
    results = evaluation_record(
        bleu=bleu.corpus_score(hyps, [refs]).score, signature=str(bleu.get_signature()),
        bleu_ci95=[np.percentile(explicit, 2.5), np.percentile(explicit, 97.5)],
        chrf=sacrebleu.corpus_chrf(hyps, [refs]).score, nltk_bleu4=nltk,
        decode=decode or {"beam": 4, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "stopping": "first_k",
                          "batch_size": 64, "cut_sources": 0})
    (folder / "eval" / "test" / "results.json").write_text(json.dumps(results), encoding="utf-8")
    sources = [f"source {i}" for i in range(len(refs))]
    for name, lines in (("hyps.txt", hyps), ("refs.txt", refs), ("srcs.txt", sources)):
        (folder / "eval" / "test" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_comparison_table_is_recomputed_from_its_runs(tmp_path, monkeypatch):
    """Every row's BLEU, interval, p against the baseline and verdict, recomputed here from the
    hypotheses: sinusoidal (3 seeds, the baseline), rope (2 seeds, better), t5 (2 seeds that
    disagree), learnable (1 seed: the baseline's seed spread decides)."""
    config = to_dict(load_config(None))
    refs = corpus(40, 3)
    systems = {("sinusoidal", 1): 0.30, ("sinusoidal", 2): 0.32, ("sinusoidal", 3): 0.31,
               ("rope", 1): 0.08, ("rope", 2): 0.10, ("t5", 1): 0.05, ("t5", 2): 0.55, ("learnable", 1): 0.27}
    samples = 200  # the table's 1000 resamples, fewer: the arithmetic is the same, the test 5x faster
    indices = bootstrap_samples(len(refs), samples=samples)
    hyps, dirs = {}, []
    for (scheme, seed), share in systems.items():
        hyps[scheme, seed] = degrade(refs, share, 100 * seed + len(dirs))
        dirs.append(tmp_path / f"{scheme}-{seed}")
        write_evaluated_run(dirs[-1], config, scheme, seed, hyps[scheme, seed], refs, indices,
                            parameters=PARAMETERS[scheme], valid_losses=losses_of(share, seed), nltk=40 + 10 * share + seed)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=samples))
    markdown, table_csv = compare(dirs, "test")
    assert f"CI: {samples} bootstrap resamples" in markdown
    lines = [line.strip("| ").split(" | ") for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    header, rows = lines[0], {row[0]: dict(zip(lines[0], row)) for row in lines[1:]}
    assert set(rows) == {"sinusoidal", "rope", "t5", "learnable"} and header[-3:] == ["p vs sinusoidal", "p MC SE",
                                                                                       "significant"]

    bleu = sacrebleu.metrics.BLEU()
    by_scheme = {s: [hyps[k] for k in hyps if k[0] == s] for s in rows}
    scores = {s: [bleu.corpus_score(h, [refs]).score for h in by_scheme[s]] for s in rows}
    spreads = {s: statistics.stdev(v) for s, v in scores.items() if len(v) > 1}
    base = two_level(by_scheme["sinusoidal"], refs, indices, BOOTSTRAP_SEED + 2)
    near = {}
    for scheme, row in rows.items():
        mean = statistics.mean(scores[scheme])
        assert row["BLEU"] == (f"{mean:.2f} ± {spreads[scheme]:.2f}" if scheme in spreads else f"{mean:.2f}")
        ci = (two_level(by_scheme[scheme], refs, indices, BOOTSTRAP_SEED + 1) if scheme in spreads
              else resampled(by_scheme[scheme][0], refs, indices))
        assert row["BLEU 95% CI"] == f"[{np.percentile(ci, 2.5):.2f}, {np.percentile(ci, 97.5):.2f}]"
        if scheme == "sinusoidal":
            assert (row["p vs sinusoidal"], row["p MC SE"], row["significant"]) == ("—", "—", "—")
            continue
        delta = mean - statistics.mean(scores["sinusoidal"])
        p = min(1.0, 2 * one_sided_p(two_level(by_scheme[scheme], refs, indices, BOOTSTRAP_SEED + 1), base, delta))
        spread = max(spreads.get(scheme, 0.0), spreads["sinusoidal"])
        error = mc_se(p, samples)
        assert row["p vs sinusoidal"] == f"{p:.3f}" and row["p MC SE"] == f"{error:.3f}"
        near[scheme] = abs(delta) > spread and abs(p - 0.05) < 3 * error  # p decides, and another draw may turn it
        assert row["significant"] == ("yes" if p < 0.05 and abs(delta) > spread else "no") + (
            " (borderline)" if near[scheme] else "")
    # the constructed cases cover both verdicts and the seed-spread rule
    assert rows["rope"]["significant"] == "yes" and rows["t5"]["significant"] == "no"
    assert near == {"rope": False, "t5": False, "learnable": True}  # and a verdict marked borderline

    # the other columns, the order, the footer and the CSV, written out here; the metric columns are
    # sacreBLEU's chrF, chrF++ (word bigrams) and TER, and the hand BLEU-4 on 13a tokens, each
    # computed from the hypotheses (the records' own figures are not read)
    chrf_pp, ter = sacrebleu.metrics.CHRF(word_order=2), sacrebleu.metrics.TER()
    def mean_sd(values: list[float], digits: int) -> str:
        return (f"{values[0]:.{digits}f}" if len(values) == 1 else
                f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}")

    expected = []
    for scheme in sorted(rows, key=lambda s: -statistics.mean(scores[s])):
        keys = [k for k in systems if k[0] == scheme]
        expected.append([scheme, str(len(keys)), f"{PARAMETERS[scheme]:,}" if PARAMETERS[scheme] else "",
                         mean_sd([min(losses_of(systems[k], k[1])) for k in keys], 3), rows[scheme]["BLEU"],
                         rows[scheme]["BLEU 95% CI"],
                         mean_sd([sacrebleu.corpus_chrf(hyps[k], [refs]).score for k in keys], 2),
                         mean_sd([100 * ngram_bleu4(*(words(t) for t in (hyps[k], refs))) for k in keys], 2),
                         mean_sd([chrf_pp.corpus_score(hyps[k], [refs]).score for k in keys], 2),
                         mean_sd([ter.corpus_score(hyps[k], [refs]).score for k in keys], 2),
                         rows[scheme]["p vs sinusoidal"], rows[scheme]["p MC SE"], rows[scheme]["significant"]])
    head = ["scheme", "seeds", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "chrF", "BLEU-4 (nltk)", "chrF++",
            "TER", "p vs sinusoidal", "p MC SE", "significant"]
    counted = f"Marked borderline: {sum(near.values())} of the {len(near)} verdicts."  # the footer counts them
    assert markdown == "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
        + ["| " + " | ".join(r) + " |" for r in expected] + ["", FOOTER.format(
            sig=bleu.get_signature(), samples=samples, spread=BASELINE_SEEDED_NOTE, tally=counted)
            + metric_notes(refs) + " " + ARITHMETIC_NOTE]) + "\n"
    assert list(csv.reader(io.StringIO(table_csv))) == [head] + expected


def words(texts: list[str]) -> list[list[str]]:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return [Tokenizer13a()(t).split() for t in texts]


def metric_notes(refs: list[str]) -> str:
    """What the footer says of the default metric columns, with sacreBLEU's signatures."""
    signatures = []
    for metric in (sacrebleu.metrics.CHRF(), sacrebleu.metrics.CHRF(word_order=2), sacrebleu.metrics.TER()):
        metric.corpus_score(refs[:1], [refs[:1]])
        signatures.append(metric.get_signature())
    return (f" chrF: sacreBLEU's chrF (`{signatures[0]}`). BLEU-4 (nltk): NLTK's corpus BLEU-4 on sacreBLEU's 13a "
            f"tokens. chrF++: chrF with word bigrams (Popović 2017; `{signatures[1]}`). TER: translation edit rate, "
            f"lower is better (`{signatures[2]}`).")


MONTE_CARLO_NOTE = ("p MC SE: p's Monte Carlo standard error (a two-sided p of S resamples, 2 x a share q: "
                    "2 sqrt(q(1 - q)/S)); a verdict that p decides and that lies within 3 of them of 0.05 is marked "
                    "borderline: another draw of the bootstrap may turn it.")


def mc_se(p: float, samples: int) -> float:
    """The Monte Carlo standard error of a two-sided bootstrap p = 2q over ``samples`` resamples:
    2 sqrt(q (1 - q) / S), a share q of none counted as 1/S."""
    q = min(max(p / 2, 1 / samples), 1.0)
    return 2 * math.sqrt(q * (1 - q) / samples)


PARAMETERS = {"sinusoidal": 1_234_567, "rope": 7_654_321, "t5": 42, "learnable": None}
FOOTER = ("Test set `test`, 40 sentences, decoding: beam 4, length penalty 1.0, stopping rule first_k. sacreBLEU "
          "signature: `{sig}`. Runs that differ only in seed are folded into mean ± std (sample std). CI: {samples} "
          "bootstrap resamples of the sentences (several seeds: of seeds x sentences, the mean over seeds; each row's "
          "seeds drawn R of R with replacement, spread about their mean by sqrt(R/(R-1)) first, so the seed variance "
          "is not understated). p: "
          "two-sided paired bootstrap (Koehn 2004) over seeds x sentences (Clark et al. 2011), uncorrected (the study's "
          "declared families correct theirs). Significant: p < 0.05 "
          "and the difference of means larger than the seed spread; {spread}. " + MONTE_CARLO_NOTE + " {tally}")
SPREAD_NOTE = ("the seed spread is the larger seed std of the two rows, or where both have a single seed the pooled "
               "seed std of the multi-seed rows ({pooled:.2f} BLEU)")
# the baseline has several seeds: no verdict borrows the pooled spread, and the footer does not name it
BASELINE_SEEDED_NOTE = "the seed spread is the larger seed std of the two rows"
ONE_SEED_NOTE = ("no row has several seeds, so training noise is not measured: the verdict (marked 'one seed') "
                 "accounts for test-set sampling only")


def losses_of(share: float, seed: int) -> tuple[float, ...]:
    """Validation losses of a constructed run: the table shows their minimum (training points, a
    tenth of each, lie between them and must not count)."""
    return (4.0 + share, 2.0 + share + seed / 100, 2.5 + share)


def read(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def one_seed_runs(tmp_path, refs, indices, **run) -> dict[str, object]:
    config = to_dict(load_config(None))
    dirs = {}
    for i, (scheme, share) in enumerate((("sinusoidal", 0.3), ("rope", 0.05), ("alibi", 0.32))):
        dirs[scheme] = tmp_path / scheme
        write_evaluated_run(dirs[scheme], config, scheme, 1, degrade(refs, share, i), refs, indices, **run)
    return dirs


def test_a_table_of_single_seeds_says_its_verdicts_account_for_sentences_only(tmp_path, monkeypatch):
    refs = corpus(40, 4)
    indices = bootstrap_samples(len(refs), samples=100)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=100))
    dirs = one_seed_runs(tmp_path, refs, indices)
    markdown, _ = compare(list(dirs.values()), "test")
    rows = {r.split(" | ")[0].strip("| "): r.strip("| ").split(" | ") for r in markdown.splitlines()[2:5]}
    assert markdown.endswith(f"the difference of means larger than the seed spread; {ONE_SEED_NOTE}. {MONTE_CARLO_NOTE}"
                             f" {tally(rows)}{metric_notes(refs)} {ARITHMETIC_NOTE}\n")
    hyps = {scheme: read(dirs[scheme] / "eval" / "test" / "hyps.txt") for scheme in dirs}
    bleu = {scheme: sacrebleu.corpus_bleu(h, [refs]).score for scheme, h in hyps.items()}
    assert [r.split(" | ")[0].strip("| ") for r in markdown.splitlines()[2:5]] == sorted(bleu, key=lambda s: -bleu[s])
    for scheme in ("rope", "alibi"):
        p = min(1.0, 2 * reference_paired_p(hyps[scheme], hyps["sinusoidal"], refs, indices))  # two-sided
        error = mc_se(p, 100)
        marks = "one seed, borderline" if abs(p - 0.05) < 3 * error else "one seed"
        assert rows[scheme][-3:] == [f"{p:.3f}", f"{error:.3f}", ("yes" if p < 0.05 else "no") + f" ({marks})"]
        assert rows[scheme][2:4] == ["", ""]  # no parameters recorded, no validation points: empty cells
    # both verdicts covered; 100 resamples cannot resolve rope's: even a p of 0 has an error of 0.02 (a share counted
    # as 1 of 100), within 3 errors of 0.05; alibi's p lies far above the level
    assert rows["rope"][-1] == "yes (one seed, borderline)" and rows["alibi"][-1] == "no (one seed)"
    # another baseline: its row has no p, the others are tested against it
    markdown, _ = compare(list(dirs.values()), "test", baseline=dirs["rope"])
    rows = {r.split(" | ")[0].strip("| "): r.strip("| ").split(" | ") for r in markdown.splitlines()[2:5]}
    assert "| p vs rope | p MC SE | significant |" in markdown.splitlines()[0] and rows["rope"][-3:] == ["—"] * 3
    assert rows["sinusoidal"][-1] == rows["alibi"][-1] == "yes (one seed, borderline)"  # 100 resamples, as above
    # no sinusoidal row and no baseline named: the first row given is the baseline
    markdown, _ = compare([dirs["alibi"], dirs["rope"]], "test")
    assert "| p vs alibi | p MC SE | significant |" in markdown.splitlines()[0]
    # a two-seed row beside them: the single-seed rows borrow its seed spread (the pooled spread)
    for seed, share in ((1, 0.2), (2, 0.6)):
        write_evaluated_run(tmp_path / f"t5-{seed}", to_dict(load_config(None)), "t5", seed,
                            degrade(refs, share, 50 + seed), refs, indices)
    markdown, _ = compare([*dirs.values(), tmp_path / "t5-1", tmp_path / "t5-2"], "test")
    rows = {r.split(" | ")[0].strip("| "): r.strip("| ").split(" | ") for r in markdown.splitlines()[2:6]}
    t5 = [sacrebleu.corpus_bleu(read(tmp_path / f"t5-{s}" / "eval" / "test" / "hyps.txt"), [refs]).score for s in (1, 2)]
    for scheme in ("rope", "alibi"):
        p = min(1.0, 2 * reference_paired_p(hyps[scheme], hyps["sinusoidal"], refs, indices))
        assert rows[scheme][-3:] == [f"{p:.3f}", f"{mc_se(p, 100):.3f}",
                                     verdict(p, bleu[scheme] - bleu["sinusoidal"], statistics.stdev(t5), mc_se(p, 100))]
    assert markdown.endswith(f"{SPREAD_NOTE.format(pooled=statistics.stdev(t5))}. {MONTE_CARLO_NOTE} {tally(rows)}"
                             f"{metric_notes(refs)} {ARITHMETIC_NOTE}\n")
    # a one-seed baseline beside multi-seed rows only: each verdict has a seed std of its own, no pooled spread named
    markdown, _ = compare([dirs["sinusoidal"], tmp_path / "t5-1", tmp_path / "t5-2"], "test")
    rows = {r.split(" | ")[0].strip("| "): r.strip("| ").split(" | ") for r in markdown.splitlines()[2:4]}
    assert markdown.endswith(f"{BASELINE_SEEDED_NOTE}. {MONTE_CARLO_NOTE} {tally(rows)}{metric_notes(refs)} "
                             f"{ARITHMETIC_NOTE}\n")


def tally(rows: dict[str, list[str]]) -> str:
    """The footer's count of the verdicts marked borderline among the tested rows (the baseline's is "—")."""
    tested = [row[-1] for row in rows.values() if row[-1] != "—"]
    return f"Marked borderline: {sum('borderline' in v for v in tested)} of the {len(tested)} verdicts."


def test_the_table_functions_refuse_two_machines_unless_allowed(tmp_path, monkeypatch):
    """compare and write_comparison refuse runs of two arithmetics unless told otherwise (the default),
    write nothing then, and pass the allowance and the metrics named on."""
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    refs = corpus(30, 21)
    indices = bootstrap_samples(len(refs), samples=50)
    dirs = [tmp_path / "sinusoidal", tmp_path / "rope"]
    for i, folder in enumerate(dirs):
        write_evaluated_run(folder, to_dict(load_config(None)), folder.name, 1, degrade(refs, 0.2 + 0.1 * i, i), refs,
                            indices)
    manifest = json.loads((dirs[1] / "manifest.json").read_text(encoding="utf-8"))
    (dirs[1] / "manifest.json").write_text(json.dumps({**manifest, "cpu": "AMD EPYC"}), encoding="utf-8")
    out = tmp_path / "table" / "comparison_test.md"
    with pytest.raises(UserError, match=r"ran in different arithmetic \(cpu: "):
        compare(dirs, "test")
    with pytest.raises(UserError, match=r"ran in different arithmetic \(cpu: "):
        write_comparison(dirs, "test", out)
    assert not out.parent.exists()  # nothing half-written
    written, _ = write_comparison(dirs, "test", out, metrics=["chrf"], allow_mixed_arithmetic=True)
    text = written.read_text(encoding="utf-8")
    assert "| chrF |" in text.splitlines()[0] and "TER" not in text.splitlines()[0]  # the metric named, not the four
    assert "Arithmetic mixed, allowed for this table" in text.splitlines()[-1]


def test_a_table_of_joined_sentences_names_where_its_schemes_saturate(tmp_path, monkeypatch):
    """On k-sentence inputs (``<set>_concat<k>``) the caption names each row whose scheme stops telling
    positions apart, with the limit its own config set; a plain test set's caption does not."""
    refs = corpus(40, 4)
    indices = bootstrap_samples(len(refs), samples=100)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=100))
    dirs = [*one_seed_runs(tmp_path, refs, indices).values(), tmp_path / "t5"]
    write_evaluated_run(dirs[-1], to_dict(load_config(None, ["model.positional.t5.max_distance=40"])), "t5", 1,
                        degrade(refs, 0.3, 77), refs, indices)
    for d in dirs:
        shutil.copytree(d / "eval" / "test", d / "eval" / "test_concat2")
        record = json.loads((d / "eval" / "test_concat2" / "results.json").read_text(encoding="utf-8"))
        (d / "eval" / "test_concat2" / "results.json").write_text(json.dumps({**record, "testset": "test_concat2"}),
                                                                   encoding="utf-8")
    assert "saturates" not in compare(dirs, "test")[0]
    assert compare(dirs, "test_concat2")[0].endswith(
        f"{ARITHMETIC_NOTE} Where a scheme saturates (as trained; long inputs go past it): `t5` distances of 40 and "
        "more share the last bucket.\n")


def test_write_comparison_writes_the_markdown_and_the_csv(tmp_path, monkeypatch):
    from scoring.compare import write_comparison

    refs = corpus(30, 5)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    dirs = one_seed_runs(tmp_path / "runs", refs, bootstrap_samples(len(refs), samples=50))
    markdown, table_csv = compare(list(dirs.values()), "test", baseline=dirs["alibi"])
    paths = write_comparison(list(dirs.values()), "test", tmp_path / "out" / "table.md", baseline=dirs["alibi"])
    assert paths == (tmp_path / "out" / "table.md", tmp_path / "out" / "table.csv")
    assert paths[0].read_bytes() == markdown.encode() and paths[1].read_bytes() == table_csv.encode()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["table.csv", "table.md"]


def test_a_table_refuses_runs_it_cannot_compare_in_one_line(tmp_path):
    from scoring.evaluated import load_evaluated

    refs = corpus(20, 6)
    indices = bootstrap_samples(len(refs), samples=20)
    dirs = one_seed_runs(tmp_path / "a", refs, indices)
    other = tmp_path / "beam8"
    write_evaluated_run(other, to_dict(load_config(None)), "t5", 1, refs, refs, indices,
                        decode={"beam": 8, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "stopping": "first_k",
                                "batch_size": 64, "cut_sources": 0})
    beam6 = tmp_path / "beam6"
    write_evaluated_run(beam6, to_dict(load_config(None)), "t5", 2, refs, refs, indices,
                        decode={"beam": 6, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "stopping": "first_k",
                                "batch_size": 64, "cut_sources": 0})
    with pytest.raises(UserError, match="decoded differently"):  # two rules are already one too many
        compare([*dirs.values(), other], "test")
    with pytest.raises(UserError) as err:
        compare([*dirs.values(), other, beam6], "test")
    assert str(err.value).startswith(f"{dirs['sinusoidal']} and {other} were decoded differently on 'test' (")
    assert str(err.value).endswith("); a table must not mix them: evaluate both with the same settings "
                                   "(test.py --run DIR)") and '"beam": 8' in str(err.value)
    shifted = tmp_path / "shifted"
    write_evaluated_run(shifted, to_dict(load_config(None)), "t5", 1, refs[1:] + refs[:1], refs[1:] + refs[:1], indices)
    with pytest.raises(UserError) as err:
        compare([*dirs.values(), shifted], "test")
    assert str(err.value) == f"{shifted} and {dirs['sinusoidal']} were scored on different references for 'test'"
    with pytest.raises(UserError) as err:
        load_evaluated(dirs["rope"], "valid")
    assert str(err.value) == (f"{dirs['rope']} has no results for test set 'valid', and as an archived run (no "
                              f"tokenizer, no checkpoints) it cannot be tested again: its test sets are test")
    (dirs["rope"] / "tokenizer").mkdir()  # a trained run's: tested again, the set named
    with pytest.raises(UserError) as err:
        load_evaluated(dirs["rope"], "valid")
    assert str(err.value).endswith(f"(run: python -m nmt test --run {dirs['rope']} --split valid)")
    (dirs["rope"] / "tokenizer").rmdir()
    (dirs["rope"] / "config.yaml").unlink()
    with pytest.raises(UserError) as err:
        load_evaluated(dirs["rope"], "test")
    assert str(err.value) == f"{dirs['rope']} is not a run directory (no config.yaml)"


def test_a_loaded_run_carries_its_seed_parameters_and_best_validation_loss(tmp_path):
    from scoring.evaluated import load_evaluated

    refs = corpus(10, 7)
    write_evaluated_run(tmp_path / "r", to_dict(load_config(None)), "xpos", 3, refs, refs,
                        bootstrap_samples(10, samples=10), parameters=99, valid_losses=(3.0, 2.2, 2.7))
    run = load_evaluated(tmp_path / "r", "test")
    assert (run.run_dir, run.scheme, run.seed, run.parameters, run.valid_loss) == (tmp_path / "r", "xpos", 3, 99, 2.2)
    assert run.hyps == run.refs == refs and run.record.bleu == pytest.approx(100.0)
    write_evaluated_run(tmp_path / "s", to_dict(load_config(None)), "xpos", 4, refs, refs, bootstrap_samples(10, samples=10))
    again = load_evaluated(tmp_path / "s", "test")
    assert again.valid_loss is None and again.parameters is None and again.group == run.group  # seeds share a row


def test_another_draw_of_the_sentences_keeps_every_verdict_that_is_not_borderline():
    """A table's verdicts under two draws of its 1,000 sentence resamples (one seed a row, so the
    sentences are the only draw): each verdict not marked borderline in a draw is the same in the
    other, and the p-values do move between the draws (else the check would be empty)."""
    from scoring.significance import versus_baseline

    refs = corpus(60, 21)
    baseline = degrade(refs, 0.3, 1)
    systems = {share: degrade(refs, share, 10 + i) for i, share in enumerate((0.05, 0.2, 0.26, 0.29, 0.3, 0.33, 0.45))}
    bleu = {share: sacrebleu.corpus_bleu(h, [refs]).score for share, h in systems.items()}
    base = sacrebleu.corpus_bleu(baseline, [refs]).score
    draws = [{share: versus_baseline([Scored.of(h, refs)], [Scored.of(baseline, refs)], Draws(len(refs), 1000, seed),
                                     ([bleu[share]], [base]), pooled=None)
              for share, h in systems.items()} for seed in (101, 202)]
    for share in systems:
        said1, said2 = draws[0][share][2], draws[1][share][2]
        if "borderline" not in said1 and "borderline" not in said2:
            assert said1 == said2, share
    assert any(draws[0][share][0] != draws[1][share][0] for share in systems)
    assert any("borderline" in said for draw in draws for _, _, said in draw.values())  # the mark is exercised
    assert {said.startswith("yes") for _, _, said in draws[0].values()} == {True, False}  # both verdicts drawn


def test_verdict_and_pooled_spread_at_their_boundaries():
    from scoring.significance import pooled_std, versus_baseline

    assert verdict(0.05, delta=2.0, spread=1.0) == "no" and verdict(0.0499, delta=2.0, spread=1.0) == "yes"
    assert verdict(0.01, delta=1.0, spread=1.0) == "no" and verdict(0.01, delta=-1.0001, spread=1.0) == "yes"
    assert verdict(0.05, delta=5.0, spread=None) == "no (one seed)" and verdict(0.0, 0.0, None) == "yes (one seed)"
    assert pooled_std([[1.0, 2.0, 3.0], [5.0], [2.0, 4.0]]) == pytest.approx(math.sqrt((1.0 + 2.0) / 2))
    assert pooled_std([[1.0], [2.0]]) is None and pooled_std([]) is None
    refs = corpus(30, 8)
    good, bad = Scored.of(degrade(refs, 0.05, 1), refs), Scored.of(degrade(refs, 0.5, 2), refs)
    draws = Draws(len(refs), samples=1000)  # p 0 then lies 25 errors from 0.05: no verdict borderline
    # two seeds each: the larger of the two rows' seed spreads decides, not the pooled one
    p, error, said = versus_baseline([good, good], [bad, bad], draws, ([60.0, 70.0], [58.0, 58.5]), pooled=0.1)
    assert p < 0.05 and said == "no"  # delta 6.75: above the baseline's std 0.35, below the system's 7.07
    assert error == pytest.approx(mc_se(p, 1000))
    assert versus_baseline([good, good], [bad, bad], draws, ([60.0, 61.0], [58.0, 58.5]), pooled=9.0)[2] == "yes"
    # one seed each: the pooled spread of the table decides, or with none, p alone (marked)
    assert versus_baseline([good], [bad], draws, ([60.0], [50.0]), pooled=20.0)[2] == "no"
    assert versus_baseline([good], [bad], draws, ([60.0], [50.0]), pooled=None)[2] == "yes (one seed)"


# ---------------------------------------------------------------- reported numbers against their definitions


def ngram_bleu4(hyps: list, refs: list) -> float:
    """Corpus BLEU-4 as NLTK defines it without smoothing, by hand: clipped n-gram matches over
    hypothesis n-grams for n = 1..4 summed over the corpus, geometric mean, brevity penalty
    exp(1 - r/c) when the hypotheses are shorter; 0 when some order has no match. As in NLTK, a
    sentence shorter than n counts one n-gram (none matched) in the denominator. Works on
    sequences of words or of characters."""
    matched, total, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for h, r in zip(hyps, refs):
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(1, 5):
            hc = collections.Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rc = collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            matched[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            total[n - 1] += max(len(h) - n + 1, 1)  # NLTK counts at least 1 per sentence
    if min(matched) == 0:
        return 0.0
    penalty = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return penalty * math.exp(sum(math.log(m / t) for m, t in zip(matched, total)) / 4)


def test_metric_functions_against_their_libraries_and_definitions():
    """chrF is sacrebleu's, NLTK BLEU-4 is the hand formula on 13a-tokenised words (and nltk's
    own), the seed project's figure is the same formula on raw characters (0-1 scale)."""
    from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    refs = [s.capitalize() + "." for s in corpus(30, 4)] + ["a b"]
    hyps = [s.capitalize() + "." for s in degrade(refs[:-1], 0.3, 5)] + ["a"]  # one shorter than 2 words
    assert corpus_bleu(hyps, refs).value == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert corpus_chrf(hyps, refs).value == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    tok = Tokenizer13a()
    words_h, words_r = [tok(h).split() for h in hyps], [tok(r).split() for r in refs]
    assert nltk_bleu4(hyps, refs) == pytest.approx(100 * ngram_bleu4(words_h, words_r))
    assert nltk_bleu4(hyps, refs) == pytest.approx(100 * nltk_corpus_bleu([[r] for r in words_r], words_h))
    assert 0 < seed_char_bleu4(hyps, refs) < 1
    assert seed_char_bleu4(hyps, refs) == pytest.approx(ngram_bleu4(hyps, refs))
    whole = refs[:-1]  # without the 3-character sentence, which counts one unmatched 4-gram even when exact
    assert seed_char_bleu4(whole, whole) == pytest.approx(1.0) and nltk_bleu4(whole, whole) == pytest.approx(100.0)
    # a shorter output pays the brevity penalty
    cut = [" ".join(r.split()[:-1]) for r in refs]
    assert nltk_bleu4(cut, refs) == pytest.approx(100 * ngram_bleu4([tok(h).split() for h in cut], words_r))


def test_an_output_with_no_matching_four_gram_scores_zero_without_nltks_warning():
    """NLTK's unsmoothed BLEU is 0 when an order has no match, and it says so in a long warning per
    call; the column's 0 is its defined value, so no warning reaches a study's output."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        assert nltk_bleu4(["one two three"], ["three two one"]) == pytest.approx(0.0, abs=1e-9)
        assert seed_char_bleu4(["abc"], ["xyz"]) == pytest.approx(0.0, abs=1e-9)
    from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu

    with pytest.warns(UserWarning, match="0 counts"):  # nltk itself warns: the test would see one leak
        nltk_corpus_bleu([[["three", "two", "one"]]], [["one", "two", "three"]])


def test_reported_numbers_against_their_libraries_and_definitions(runs):
    """results.json of an evaluated run: chrF is sacrebleu's, NLTK BLEU-4 is the hand formula on
    13a-tokenised words (and nltk's own), the seed project's figure is the same formula on raw
    characters (0-1 scale), and the interval is the explicit percentile bootstrap."""
    from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from nmt import evaluate as test_cli

    test_cli.main(["--run", str(runs["sin1"])])
    folder = runs["sin1"] / "eval" / "test"
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    hyps = (folder / "hyps.txt").read_text(encoding="utf-8").splitlines()
    refs = (folder / "refs.txt").read_text(encoding="utf-8").splitlines()
    assert results["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert results["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    tok = Tokenizer13a()
    words_h, words_r = [tok(h).split() for h in hyps], [tok(r).split() for r in refs]
    assert results["nltk_bleu4"] == pytest.approx(100 * ngram_bleu4(words_h, words_r))
    assert results["nltk_bleu4"] == pytest.approx(100 * nltk_corpus_bleu([[r] for r in words_r], words_h))
    assert 0 < results["seed_char_bleu4"] < 1
    assert results["seed_char_bleu4"] == pytest.approx(ngram_bleu4(hyps, refs))
    explicit = resampled(hyps, refs, bootstrap_samples(len(refs)))
    assert results["bleu_ci95"] == pytest.approx([np.percentile(explicit, 2.5), np.percentile(explicit, 97.5)])


def test_ties_and_signs_of_the_one_sided_p():
    """p = share of resampled differences without the observed sign; |d| < 1e-9 BLEU is a tie (0),
    which counts against either sign; an observed difference within 1e-9 of 0 counts as >= 0."""
    from scoring.metrics import TIE
    from scoring.metrics import one_sided_p as library_one_sided_p

    d = np.array([-1.0, 0.0, TIE / 2, TIE, 2.0, 3.0, -TIE / 2, -TIE])
    assert library_one_sided_p(d, 1.0) == library_one_sided_p(d, 0.0) == library_one_sided_p(d, -TIE) == 5 / 8  # -1, -TIE, 0 and two ties
    assert library_one_sided_p(d, -1.0) == library_one_sided_p(d, -2 * TIE) == 6 / 8  # 0, two ties, TIE, 2, 3
    assert library_one_sided_p(np.zeros(5), 3.0) == library_one_sided_p(np.zeros(5), -3.0) == 1.0


def test_score_records_and_default_resamples_are_the_libraries_and_the_fixed_stream():
    refs = corpus(30, 9)
    hyps = degrade(refs, 0.3, 3)
    hyps[0] = hyps[0] + " extra words here"
    bleu = sacrebleu.metrics.BLEU()
    score = bleu.corpus_score(hyps, [refs])
    mine = corpus_bleu(hyps, refs)
    assert (mine.value, mine.signature) == (score.score, str(bleu.get_signature()))
    assert mine.length_ratio == pytest.approx(score.sys_len / score.ref_len) and mine.length_ratio > 1
    assert corpus_bleu(["a b"], ["a"]).length_ratio == 2.0
    assert corpus_bleu([""], [""]).length_ratio == 0.0  # no reference token: no division by zero
    chrf = sacrebleu.metrics.CHRF()
    assert (corpus_chrf(hyps, refs).value, corpus_chrf(hyps, refs).signature) == (
        chrf.corpus_score(hyps, [refs]).score, str(chrf.get_signature()))
    default = bootstrap_samples(len(refs))
    assert bleu_confidence_interval(hyps, refs) == bleu_confidence_interval(hyps, refs, default)
    runs = [hyps, degrade(refs, 0.2, 4)]
    assert seed_bleu_interval(runs, refs) == seed_bleu_interval(runs, refs, default)
    assert seed_paired_bootstrap_p(runs, [refs], refs) == seed_paired_bootstrap_p(runs, [refs], refs, default)
    with pytest.raises(ValueError, match=r"^paired bootstrap needs the same sentences for both systems$"):
        seed_paired_bootstrap_p([hyps[1:]], [hyps], refs)
    stats = sentence_bleu_stats(hyps, refs)
    assert stats.dtype == np.int64 and stats.shape == (30, 10)


def test_bleu_by_length_is_sacrebleu_on_each_bucket_of_source_words():
    """Buckets 1-10, 11-20, 21-30, 31-40, 41-60, 61+ source words, both ends inclusive; empty
    buckets left out; the last has no upper end."""
    from scoring.metrics import bleu_by_length

    lengths = [1, 10, 10, 11, 20, 21, 30, 61, 75, 200]
    sources = [" ".join(["w"] * n) for n in lengths]
    refs = corpus(len(lengths), 10)
    hyps = degrade(refs, 0.4, 5)
    buckets = [(1, 10, None), (11, 20, None), (21, 30, None), (61, None, None)]
    want = []
    for lo, hi, _ in buckets:
        idx = [i for i, n in enumerate(lengths) if lo <= n and (hi is None or n <= hi)]
        want.append({"min_words": lo, "max_words": hi, "n": len(idx),
                     "bleu": sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score})
    assert bleu_by_length(sources, hyps, refs) == want
    assert [b["n"] for b in want] == [3, 2, 2, 3]


def test_metrics_choose_and_order_the_metric_columns_and_an_unknown_one_is_one_line(tmp_path, monkeypatch):
    refs = corpus(30, 6)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    dirs = one_seed_runs(tmp_path, refs, bootstrap_samples(len(refs), samples=50))
    markdown, _ = compare(list(dirs.values()), "test", metrics=["ter", "chrf"])
    lines = [line.strip("| ").split(" | ") for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0][6:] == ["TER", "chrF", "p vs sinusoidal", "p MC SE", "significant"]
    for row in lines[1:]:
        hyps = read(dirs[row[0]] / "eval" / "test" / "hyps.txt")
        assert row[6:8] == [f"{sacrebleu.metrics.TER().corpus_score(hyps, [refs]).score:.2f}",
                            f"{sacrebleu.corpus_chrf(hyps, [refs]).score:.2f}"]
    assert "chrF++" not in markdown and "BLEU-4 (nltk)" not in markdown
    with pytest.raises(UserError) as err:
        compare(list(dirs.values()), "test", metrics=["chrf", "meteor"])
    assert str(err.value) == "unknown metric 'meteor' (known: chrf, bleu4-nltk, chrf++, ter)"


def test_a_metric_is_one_function_and_one_registry_line(tmp_path, monkeypatch):
    """A new column over every archive without retraining: the registry line is all it takes."""
    from scoring.table_metrics import METRICS, TableMetric

    refs = corpus(30, 7)
    monkeypatch.setattr("scoring.compare.Draws", lambda n: Draws(n, samples=50))
    dirs = one_seed_runs(tmp_path, refs, bootstrap_samples(len(refs), samples=50))
    monkeypatch.setitem(METRICS, "words", TableMetric(
        "words per hypothesis", lambda h, r: sum(len(x.split()) for x in h) / len(h), "mean hypothesis length",
        "words 1"))
    markdown, _ = compare(list(dirs.values()), "test", metrics=["words"])
    lines = [line.strip("| ").split(" | ") for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0][6] == "words per hypothesis" and markdown.rstrip().endswith(f"words per hypothesis: mean hypothesis length. {ARITHMETIC_NOTE}")
    for row in lines[1:]:
        hyps = read(dirs[row[0]] / "eval" / "test" / "hyps.txt")
        assert row[6] == f"{statistics.mean(len(h.split()) for h in hyps):.2f}"
