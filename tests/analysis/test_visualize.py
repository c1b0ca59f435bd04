"""visualize.py: every subcommand writes non-blank pictures (pixel variance) from tiny runs."""
from __future__ import annotations

import json

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest

from analysis.results import run_label
from nmt import evaluate as test_cli
from nmt import visualize
from utils.errors import UserError


def assert_not_blank(path):
    pixels = matplotlib.image.imread(str(path))
    assert pixels.ndim == 3 and pixels[..., :3].std() > 0.02, path


def test_attention_maps_and_their_numbers(runs, tmp_path, capsys):
    visualize.main(["attention", "--run", str(runs["sin1"]), "--text", "Le chat regarde la femme.",
                    "--out", str(tmp_path)])
    pngs = sorted(tmp_path.glob("*.png"))
    names = {p.name for p in pngs}
    for kind in ("encoder", "decoder", "cross"):
        assert {f"attention_{kind}_layer0_heads.png", f"attention_{kind}_layer0_mean.png"} <= names
    for p in pngs:
        assert_not_blank(p)
    stats = json.loads((tmp_path / "attention_stats.json").read_text())
    assert stats["translation"] in capsys.readouterr().out
    heads = stats["heads"]
    assert len(heads) == 3 * 1 * 2  # kinds x layers x heads
    n_keys = {"encoder": len(stats["source_tokens"]), "cross": len(stats["source_tokens"]),
              "decoder": len(stats["target_tokens"])}
    for h in heads:
        assert 0 <= h["entropy"] <= np.log(n_keys[h["kind"]]) + 1e-6  # at most uniform attention
        assert 0 <= h["diagonal_distance"] < n_keys[h["kind"]]


def test_positional_pictures_without_and_with_a_run(runs, tmp_path):
    visualize.main(["pe", "all", "--out", str(tmp_path / "all"), "--positions", "64", "--max-distance", "32"])
    files = sorted((tmp_path / "all").glob("*.png"))
    names = {p.name for p in files}
    for scheme in ("sinusoidal", "learnable", "rope", "alibi", "t5", "shaw", "xl", "deberta", "nezha", "xpos", "fire",
                   "shape", "cape", "kerple", "randomized"):
        assert f"pe_{scheme}_encoder_by_distance.png" in names, scheme
    # shape and cape are drawn as they encode at evaluation: the sinusoidal table itself
    for scheme in ("shape", "cape"):
        assert (tmp_path / "all" / f"pe_{scheme}_encoder_table.png").is_file(), scheme
    assert {"pe_sinusoidal_encoder_table.png", "pe_learnable_encoder_pca.png"} <= names
    for p in files:
        if "none" not in p.name:
            assert_not_blank(p)
    visualize.main(["pe", "learnable", "--run", str(runs["learn1"]), "--out", str(tmp_path / "run"),
                    "--format", "svg"])
    svg = tmp_path / "run" / "pe_learnable_encoder_pca.svg"
    assert svg.is_file() and "<svg" in svg.read_text()[:500]
    with pytest.raises(UserError, match="trained with 'learnable'"):
        visualize.main(["pe", "rope", "--run", str(runs["learn1"]), "--out", str(tmp_path / "x")])


def test_curves_and_bleu_by_length(runs, tmp_path):
    visualize.main(["curves", str(runs["sin1"]), str(runs["rope1"]), "--out", str(tmp_path)])
    [curves] = tmp_path.glob("curves_*.png")
    assert_not_blank(curves)
    for name in ("sin1", "rope1"):
        test_cli.main(["--run", str(runs[name])])
    visualize.main(["length", str(runs["sin1"]), str(runs["rope1"]), "--out", str(tmp_path)])
    [picture] = tmp_path.glob("bleu_by_length_*.png")
    assert_not_blank(picture)
    [table] = tmp_path.glob("bleu_by_length_*.md")
    assert {line.split(" | ")[0].strip("| ") for line in table.read_text().splitlines()[2:] if line.startswith("| ")} == {
        "sinusoidal", "rope"}  # rows named by their schemes
    # --folder-labels: by the runs' folders, as a study's archive names its rows
    visualize.main(["length", str(runs["sin1"]), str(runs["rope1"]), "--folder-labels", "--out", str(tmp_path / "f")])
    [table] = (tmp_path / "f").glob("bleu_by_length_*.md")
    assert {line.split(" | ")[0].strip("| ") for line in table.read_text().splitlines()[2:] if line.startswith("| ")} == {
        "sin1", "rope1"}


def test_attention_stats_against_hand_computed_cases():
    import torch

    from analysis.attention import attention_stats

    n = 5
    identity = torch.eye(n)[None]
    uniform = torch.full((1, n, n), 1.0 / n)
    [diag] = attention_stats(identity)
    assert diag["entropy"] == pytest.approx(0.0, abs=1e-6) and diag["diagonal_distance"] == 0.0
    [flat] = attention_stats(uniform)
    assert flat["entropy"] == pytest.approx(np.log(n), abs=1e-5)
    assert flat["diagonal_distance"] == pytest.approx(np.mean([np.mean([abs(i - j) for j in range(n)]) for i in range(n)]))
    # cross-attention: a 2-token target over a 4-token source, each row on the scaled diagonal
    scaled = torch.zeros(1, 2, 4)
    scaled[0, 0, 0] = scaled[0, 1, 2] = 1.0
    assert attention_stats(scaled, cross=True)[0]["diagonal_distance"] == pytest.approx(0.0)


def test_run_labels_name_the_scheme_once(runs, tmp_path):
    import shutil

    assert run_label(runs["rope1"]) == "rope1 (rope)"
    named_after_scheme = tmp_path / "rope"
    named_after_scheme.mkdir()
    shutil.copy2(runs["rope1"] / "config.yaml", named_after_scheme / "config.yaml")
    assert run_label(named_after_scheme) == "rope"


def test_fourteen_schemes_get_fourteen_distinguishable_lines(tmp_path, monkeypatch):
    """The demo compares 14 schemes; matplotlib's colour cycle has 10 colours, so before, two
    schemes were drawn alike in the curves and in the BLEU-by-length picture."""
    import analysis.pictures as pictures

    figures = []
    monkeypatch.setattr(pictures, "_save", lambda fig, path: figures.append(fig) or path)
    labels = [f"scheme{i}" for i in range(14)]
    x = [5.0, 10.0, 20.0]
    pictures.length_curves({k: {"x": x, "bleu": np.ones((2, 3)) * i, "ratio": np.ones((1, 3))}
                            for i, k in enumerate(labels)}, "t", tmp_path / "l.png", training_max=12)
    pictures.curves({k: {"train loss": ([1, 2], [3.0, 2.0]), "valid loss": ([2], [2.5]), "valid BLEU": ([2], [9.0])}
                     for k in labels}, "t", tmp_path / "c.png")
    for fig in figures:
        for ax in fig.axes:
            drawn = [line for line in ax.get_lines() if line.get_label().startswith("scheme")]
            looks = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle(), line.get_marker())
                     for line in drawn if not line.get_label().endswith(" train")}
            assert len(looks) == 14, ax.get_ylabel()


def test_validation_panels_put_each_scheme_beside_the_references_mean(tmp_path, monkeypatch):
    """One panel per scheme (its seeds' curves), sinusoidal's mean in each, best last BLEU first; drawn
    for real, then the same call's inputs checked against values worked out here."""
    import yaml

    from analysis import pictures
    from analysis.results import validation_panels
    from experiment.config import load_config, to_dict

    curves = {("sinusoidal", 1): [10.0, 20.0, 30.0], ("sinusoidal", 2): [12.0, 22.0, 28.0],
              ("rope", 1): [15.0, 30.0, 40.0], ("none", 1): [5.0, 8.0, 9.0]}
    dirs = []
    for (scheme, seed), bleus in curves.items():
        run = tmp_path / f"{scheme}-{seed}"
        run.mkdir()
        tree = to_dict(load_config(None))
        tree["model"]["positional"]["name"], tree["seed"] = scheme, seed
        (run / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
        points = [{"kind": "train", "step": 50, "loss": 3.0}]
        points += [{"kind": "valid", "step": 100 * (i + 1), "loss": 2.0, "bleu": b} for i, b in enumerate(bleus)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points), encoding="utf-8")
        dirs.append(run)
    picture = validation_panels(dirs, tmp_path / "out", mark=250)
    assert picture.name == "validation_by_scheme.png"
    assert_not_blank(picture)
    seen = {}
    monkeypatch.setattr(pictures, "curve_panels", lambda panels, reference, title, path, mark: seen.update(
        panels=panels, reference=reference, mark=mark) or path)
    validation_panels(dirs, tmp_path / "out", mark=250)
    assert list(seen["panels"]) == ["rope", "sinusoidal", "none"]  # by last validation BLEU, seeds averaged
    assert seen["panels"]["sinusoidal"] == [([100, 200, 300], [10.0, 20.0, 30.0]), ([100, 200, 300], [12.0, 22.0, 28.0])]
    assert seen["reference"] == ("sinusoidal", [100, 200, 300], [11.0, 21.0, 29.0]) and seen["mark"] == 250
    with pytest.raises(UserError, match="no run of the reference scheme 'sinusoidal'"):
        validation_panels(dirs[2:], tmp_path / "out")
