"""What the pictures promise a reader: a colour per run, BLEU points that are not drawn as lines
through two validations, labelled axes on every grid of heads."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from analysis import pictures  # noqa: E402


@pytest.mark.parametrize("n", [16, 20])
def test_no_two_of_up_to_twenty_series_share_a_colour(n):
    colors = [tuple(style["color"]) for style in pictures.series_styles(n)]
    assert len(set(colors)) == n
    assert all(style["linestyle"] == "-" for style in pictures.series_styles(n))
    past = pictures.series_styles(24)[20:]  # past 20: the colours again, dashed
    assert all(style["linestyle"] == "--" for style in past)
    styles = pictures.series_styles(24)
    assert len({(tuple(s["color"]), s["linestyle"]) for s in styles}) == 24


def capture(monkeypatch) -> list:
    figures = []
    monkeypatch.setattr(pictures, "_save", lambda fig, path: figures.append(fig) or path)
    return figures


def test_few_validations_are_markers_and_many_are_lines(monkeypatch, tmp_path):
    figures = capture(monkeypatch)
    series = {"two": {"valid BLEU": ([150, 300], [20.0, 30.0])},
              "ten": {"valid BLEU": (list(range(30, 301, 30)), [float(i) for i in range(10)])}}
    pictures.curves(series, "t", tmp_path / "c.png")
    bleu = figures[0].axes[1]
    lines = {line.get_label(): line for line in bleu.lines}
    assert lines["two"].get_linestyle() == "None" and lines["two"].get_marker() == "o"
    assert lines["ten"].get_linestyle() == "-"


def test_every_grid_of_heads_names_its_axes(monkeypatch, tmp_path):
    figures = capture(monkeypatch)
    weights = np.random.default_rng(0).random((6, 3, 4))  # 6 heads: two rows of four, the last two panels off
    pictures.attention_grid(weights, ["a", "b", "c"], ["w", "x", "y", "z"], "t", tmp_path / "g.png")
    axes = [ax for ax in figures[0].axes if ax.get_title().startswith("head")]
    assert len(axes) == 6
    assert [ax.get_ylabel() for ax in axes] == ["query", "", "", "", "query", ""]
    # each column's lowest panel says "key": heads 4, 5 (second row) and 2, 3 (first row, nothing below)
    assert [ax.get_xlabel() for ax in axes] == ["", "", "key", "key", "key", "key"]
