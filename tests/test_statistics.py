"""Significance over seeds x sentences, the seed-spread rule, the recipe check and the length study,
against references written here (sacrebleu called directly, explicit resampling loops)."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
import sacrebleu
import yaml

from analysis.results import length_buckets, length_study
from scoring.compare import check_same_recipe, verdict
from scoring.metrics import bootstrap_samples, seed_paired_bootstrap_p
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


def test_runs_of_different_recipes_are_refused(runs, tmp_path):
    # scheme and seed may differ
    check_same_recipe([runs["sin1"], runs["sin2"], runs["rope1"]])
    other = tmp_path / "longer"
    shutil.copytree(runs["sin1"], other, ignore=shutil.ignore_patterns("checkpoints", "logs"))
    cfg = yaml.safe_load((other / "config.yaml").read_text(encoding="utf-8"))
    cfg["train"]["max_steps"] += 1
    (other / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    with pytest.raises(UserError, match=r"different recipes \(.*sin1 and .*longer differ"):
        check_same_recipe([runs["sin1"], runs["rope1"], other])


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
    import test as test_cli

    for name in ("sin1", "rope1"):
        test_cli.main(["--run", str(runs[name])])
    picture, table = length_study([runs["sin1"], runs["rope1"]], tmp_path, min_count=5)
    assert picture.is_file() and picture.stat().st_size > 10_000
    srcs = (runs["sin1"] / "eval" / "test" / "srcs.txt").read_text(encoding="utf-8").splitlines()
    hyps = (runs["sin1"] / "eval" / "test" / "hyps.txt").read_text(encoding="utf-8").splitlines()
    refs = (runs["sin1"] / "eval" / "test" / "refs.txt").read_text(encoding="utf-8").splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")
            for line in table.read_text(encoding="utf-8").splitlines() if line.startswith("| ") and "---" not in line}
    header = rows.pop("scheme")
    assert set(rows) == {"sinusoidal", "rope"} and header[2] == "BLEU ≤ 6 words"  # the tiny config's max_words
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
        (run / "eval" / "test" / "results.json").write_text("{}", encoding="utf-8")
        dirs.append(run)
    _, table = length_study(dirs, tmp_path / "out", min_count=10)
    lines = [line.strip("| ").split(" | ") for line in table.read_text(encoding="utf-8").splitlines()
             if line.startswith("| ") and "---" not in line]
    header, rows = lines[0], {row[0]: row for row in lines[1:]}
    assert header[3:7] == ["BLEU > 6 words", "> 6: 95% CI", "> 6: p vs sinusoidal", "> 6: significant"]
    beyond = [i for i, s in enumerate(sources) if len(s.split()) > 6]
    assert 20 < len(beyond) < 80
    pick = lambda lines: [lines[i] for i in beyond]  # noqa: E731
    indices = bootstrap_samples(len(beyond))
    bleu = sacrebleu.metrics.BLEU()
    resampled = [bleu.corpus_score([pick(hyps["rope1"])[i] for i in row], [[pick(refs)[i] for i in row]]).score
                 for row in indices]
    assert rows["rope"][4] == f"[{np.percentile(resampled, 2.5):.2f}, {np.percentile(resampled, 97.5):.2f}]"
    p = reference_paired_p(pick(hyps["rope1"]), pick(hyps["sin1"]), pick(refs), indices)
    assert rows["rope"][5] == f"{p:.3f}" and p < 0.05 and rows["rope"][6] == "yes (one seed)"
    assert rows["sinusoidal"][5:7] == ["—", "—"]
    assert float(rows["rope"][3]) == pytest.approx(bleu.corpus_score(pick(hyps["rope1"]), [pick(refs)]).score,
                                                   abs=0.005)


def test_rows_of_one_scheme_with_other_settings_are_labelled_by_those_settings(runs, tmp_path):
    from scoring.compare import group_labels

    base = yaml.safe_load((runs["sin1"] / "config.yaml").read_text(encoding="utf-8"))
    variants = {"k20": {"shape": {"max_shift": 20}}, "k100": {"shape": {"max_shift": 100}},
                "k100-lr": {"shape": {"max_shift": 100}, "cape": {"max_global_shift": 1.0}, "lr": 0.5},
                "plain": {}}
    groups = {}
    for name, change in variants.items():
        tree = yaml.safe_load(yaml.safe_dump(base))
        scheme = "sinusoidal" if name == "plain" else "shape"
        tree["model"]["positional"]["name"] = scheme
        tree["model"]["positional"]["shape"]["max_shift"] = change.get("shape", {}).get("max_shift", 100)
        if "cape" in change:  # another scheme's option: not worth naming in a shape row
            tree["model"]["positional"]["cape"]["max_global_shift"] = change["cape"]["max_global_shift"]
        if "lr" in change:
            tree["train"]["lr"] = change["lr"]
        tree["seed"] = len(groups) + 1  # the seed never labels a row
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
        groups[name] = (scheme, tmp_path / name)
    lr = base["train"]["lr"]  # the fixture's own learning rate
    assert group_labels(groups) == {
        "k20": f"shape (model.positional.shape.max_shift=20, train.lr={lr})",
        "k100": f"shape (model.positional.shape.max_shift=100, train.lr={lr})",
        "k100-lr": "shape (model.positional.shape.max_shift=100, train.lr=0.5)",
        "plain": "sinusoidal"}
