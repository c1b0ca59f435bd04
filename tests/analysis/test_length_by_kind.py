"""The length study's figures (``analysis.results.length_by_kind``): each row's BLEU per source-length
bucket and seed is sacreBLEU on that bucket's sentences of that run; the plain rows are drawn in the
panel of their scheme's kind with sinusoidal grey in each, the rows decoded under test-time settings
in a panel per row beside their plain line. Tiny evaluated runs written here."""
from __future__ import annotations

import json
import random

import pytest
import sacrebleu

from analysis import pictures
from analysis.results import length_by_kind, length_series
from experiment.config import load_config, to_dict
from scoring.metrics import bootstrap_samples
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run

RUNS = [("sinusoidal", 1, None), ("sinusoidal", 2, None), ("rope", 1, None), ("rope", 2, None), ("alibi", 1, None),
        ("rope", 1, "pi"), ("rope", 2, "pi"), ("rope", 1, "oracle"), ("rope", 2, "oracle"), ("alibi", 1, "oracle")]


@pytest.fixture
def runs(tmp_path):
    """Evaluated runs on 90 sentences of 3-20 words (a training maximum of 8 words); each run's
    hypotheses degraded by its own share; a variant's folder is <row>[-seedN]+<variant>."""
    rng = random.Random(3)
    refs = corpus(90, 7)
    sources = [" ".join(["mot"] * rng.randint(3, 20)) for _ in refs]
    config = to_dict(load_config(None, ["data.max_src_words=8"]))
    indices = bootstrap_samples(len(refs), 20)
    folders = []
    for i, (scheme, seed, variant) in enumerate(RUNS):
        name = scheme + ("" if seed == 1 else f"-seed{seed}") + (f"+{variant}" if variant else "")
        folder = tmp_path / "archive" / name
        write_evaluated_run(folder, config, scheme, seed, degrade(refs, 0.1 + 0.04 * i, i), refs, indices)
        (folder / "eval" / "test" / "srcs.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
        if variant:
            record = folder / "eval" / "test" / "results.json"
            record.write_text(json.dumps({**json.loads(record.read_text(encoding="utf-8")), "variant": variant}),
                              encoding="utf-8")
        folders.append(folder)
    return folders, sources


def test_each_seed_and_bucket_is_sacrebleu_on_that_buckets_sentences(runs):
    folders, sources = runs
    found = length_series(folders, ["test"], min_count=15)
    assert found.limit == 8 and all(hi <= 8 or lo > 8 for lo, hi in found.buckets)  # no bucket straddles it
    assert set(found.series) == {"sinusoidal", "rope", "alibi", "rope+pi", "rope+oracle", "alibi+oracle"}
    second_rope = folders[3]  # rope seed 2: the second row of rope's series
    hyps = (second_rope / "eval" / "test" / "hyps.txt").read_text(encoding="utf-8").splitlines()
    refs = (second_rope / "eval" / "test" / "refs.txt").read_text(encoding="utf-8").splitlines()
    for j, (lo, hi) in enumerate(found.buckets):
        idx = [i for i, s in enumerate(sources) if lo <= len(s.split()) <= hi]
        want = sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        assert found.series["rope"]["bleu"][1][j] == pytest.approx(want, abs=1e-9)
    assert len(found.series["alibi"]["bleu"]) == 1 and len(found.series["rope+pi"]["bleu"]) == 2


def test_rows_are_drawn_in_their_kinds_panel_and_settings_beside_their_plain_row(runs, monkeypatch, tmp_path):
    folders, _ = runs
    drawn = []

    def record(panels, baseline, baseline_label, title, path, training_max=None):
        drawn.append((panels, baseline, baseline_label, training_max))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr(pictures, "length_panels", record)
    made = length_by_kind(folders, tmp_path / "out", ["test"], min_count=15)
    assert [p.name for p in made] == ["bleu_by_length_test_by_kind.png", "bleu_by_length_test_settings.png"]
    (kinds, baseline, label, limit), (settings, none, _, _) = drawn
    assert {kind: set(rows) for kind, rows in kinds.items()} == {"rotary": {"rope"}, "relative": {"alibi"}}
    assert label == "sinusoidal" and len(baseline["bleu"]) == 2 and limit == 8 and none is None
    # rope has the most settings (pi, oracle): its panel holds its plain line and each setting's
    assert {row: set(lines) for row, lines in settings.items()} == {"rope": {"as trained", "pi", "oracle"}}


def test_the_figures_are_drawn(runs, tmp_path):
    folders, _ = runs
    for path in length_by_kind(folders, tmp_path / "out", ["test"], min_count=15):
        assert path.is_file() and path.stat().st_size > 10_000
