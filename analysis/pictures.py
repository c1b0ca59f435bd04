"""Matplotlib figures (headless, Agg): attention maps, PE pictures, curves, BLEU by length.

Every function writes one file and returns its path; titles name the run and the scheme.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from utils.io import atomic_write  # noqa: E402


def _save(fig, path: Path) -> Path:
    """Write the figure atomically (format from the suffix) and close it."""
    try:
        return atomic_write(path, lambda f: fig.savefig(f, format=Path(path).suffix.lstrip("."), dpi=110,
                                                         bbox_inches="tight"), what="picture")
    finally:
        plt.close(fig)


def series_styles(n: int) -> list[dict]:
    """Styles for ``n`` series whose colours two series never share up to 20: matplotlib's tab20, its
    ten dark shades then their light ones (a 16-run picture on the ten default colours drew two schemes
    in one blue); past 20 the colours come again dashed with square markers, then dotted with triangles."""
    tab20 = plt.get_cmap("tab20").colors
    colors = [*tab20[0::2], *tab20[1::2]]
    looks = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    return [{"color": colors[i % len(colors)], "linestyle": looks[i // len(colors) % len(looks)][0],
             "marker": looks[i // len(colors) % len(looks)][1]} for i in range(n)]


FEW_POINTS = 5  # validations below which a run's BLEU is drawn as markers alone


def _legend(fig, ax, n: int) -> None:
    """``ax``'s legend inside it for a few series, beside the figure for many (it would hide the lines)."""
    if n <= 6:
        ax.legend(fontsize=7)
    else:
        fig.legend(*ax.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(0.91, 0.5), fontsize=7)


def _label_axes(ax, rows: list[str], cols: list[str], fontsize: float) -> None:
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=fontsize)


def attention_grid(weights: np.ndarray, rows: list[str], cols: list[str], title: str, path: Path) -> Path:
    """weights (H, Tq, Tk): one heatmap per head in a grid, shared colour scale, token labels."""
    h = weights.shape[0]
    ncols = min(h, 4)
    nrows = math.ceil(h / ncols)
    cell = max(0.16, min(0.35, 9.0 / max(len(cols), 1)))
    fontsize = 7 if max(len(rows), len(cols)) <= 30 else 5.5
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(ncols * (len(cols) * cell + 1.2), nrows * (len(rows) * cell + 1.2)))
    vmax = float(weights.max()) or 1.0
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        image = ax.imshow(weights[i], cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
        _label_axes(ax, rows, cols, fontsize)
        ax.set_title(f"head {i}", fontsize=9)
        if i // ncols == nrows - 1 or i + ncols >= h:  # the lowest panel of its column
            ax.set_xlabel("key", fontsize=8)
        if i % ncols == 0:
            ax.set_ylabel("query", fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def attention_mean(weights: np.ndarray, rows: list[str], cols: list[str], title: str, path: Path) -> Path:
    """The head-averaged map (Tq, Tk) of one layer."""
    cell = max(0.2, min(0.4, 12.0 / max(len(cols), 1)))
    fig, ax = plt.subplots(figsize=(len(cols) * cell + 2.0, len(rows) * cell + 1.5))
    image = ax.imshow(weights.mean(0), cmap="viridis", vmin=0.0, aspect="auto")
    _label_axes(ax, rows, cols, 7 if max(len(rows), len(cols)) <= 30 else 5.5)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    fig.colorbar(image, ax=ax, label="mean attention weight")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def position_heatmap(table: np.ndarray, title: str, path: Path) -> Path:
    """Absolute encoding as a positions x dimensions heatmap."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    limit = float(np.abs(table).max()) or 1.0
    image = ax.imshow(table, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    fig.colorbar(image, ax=ax, label="value")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def distance_profile_plot(offsets: np.ndarray, values: np.ndarray, ylabel: str, title: str, path: Path) -> Path:
    """values (H or 1, L) against the offset key - query."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, row in enumerate(values):
        ax.plot(offsets, row, label=f"head {i}" if len(values) > 1 else None, linewidth=1.4)
    ax.axvline(0, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("relative position (key − query)")
    ax.set_ylabel(ylabel)
    if len(values) > 1:
        ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def pca_map(points: np.ndarray, title: str, path: Path) -> Path:
    """2-D map of position vectors, coloured by position."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    scatter = ax.scatter(points[:, 0], points[:, 1], c=np.arange(len(points)), cmap="plasma", s=12)
    ax.plot(points[:, 0], points[:, 1], color="grey", linewidth=0.4, alpha=0.6)
    fig.colorbar(scatter, ax=ax, label="position")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def curves(series: dict[str, dict[str, tuple[list[int], list[float]]]], title: str, path: Path) -> Path:
    """series[run label][metric] = (steps, values) for metrics train loss / valid loss / valid BLEU."""
    fig, (loss_ax, bleu_ax) = plt.subplots(1, 2, figsize=(12, 4.2))
    for (label, metrics), style in zip(series.items(), series_styles(len(series))):
        if "train loss" in metrics:  # one legend entry per run: the line style says which loss
            loss_ax.plot(*metrics["train loss"], linewidth=1.0, alpha=0.6, color=style["color"],
                         linestyle=style["linestyle"], label=f"_{label} train")
        if "valid loss" in metrics:
            loss_ax.plot(*metrics["valid loss"], markersize=3, **style, label=label)
        if "valid BLEU" in metrics:
            few = len(metrics["valid BLEU"][0]) < FEW_POINTS
            bleu_ax.plot(*metrics["valid BLEU"], markersize=6 if few else 3,
                         **{**style, "linestyle": "none" if few else style["linestyle"]}, label=label)
    loss_ax.set_xlabel("update")
    loss_ax.set_ylabel("loss (label-smoothed)\nthin: training, with markers: validation", fontsize=9)
    loss_ax.grid(alpha=0.3)
    bleu_ax.set_xlabel("update")
    bleu_ax.set_ylabel("validation BLEU (greedy)")
    bleu_ax.grid(alpha=0.3)
    _legend(fig, bleu_ax if bleu_ax.lines else loss_ax, len(series))
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def curve_panels(panels: dict[str, list[tuple[list[int], list[float]]]], reference: tuple[str, list[int], list[float]],
                 title: str, path: Path, mark: int | None = None, ylabel: str = "validation BLEU (greedy)") -> Path:
    """Small multiples: one panel per label with its curves (one per seed: (steps, values)), the
    ``reference`` (name, steps, mean values) in grey in every panel, and a dotted line at update
    ``mark`` where given (a budget the curves have no point at)."""
    n = len(panels)
    cols = min(6, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols, 1.9 * rows + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    name, ref_steps, ref_values = reference
    for ax, (label, curves) in zip(axes.flat, panels.items()):
        ax.plot(ref_steps, ref_values, color="0.6", linewidth=1.2, label=f"{name} (mean)")
        for steps, values in curves:
            ax.plot(steps, values, color="C0", linewidth=0.9, marker="o", markersize=2)
        if mark is not None:
            ax.axvline(mark, color="C3", linestyle=":", linewidth=1.0)
        ax.set_title(label, fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=7)
    for ax in axes[-1, :]:
        ax.set_xlabel("update", fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def length_curves(series: dict[str, dict], title: str, path: Path, training_max: int | None = None) -> Path:
    """BLEU (left) and hypothesis/reference length ratio (right) against source length, a line per
    scheme with a band over seeds (min to max) where it has several.

    series[label] = {"x": mean source length per bucket, "bleu": (seeds, buckets) array,
    "ratio": (seeds, buckets) array}; ``training_max`` draws a line after the longest training source.
    """
    fig, (bleu_ax, ratio_ax) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    for (label, data), style in zip(series.items(), series_styles(len(series))):
        x = np.asarray(data["x"])
        for ax, key in ((bleu_ax, "bleu"), (ratio_ax, "ratio")):
            values = np.asarray(data[key], dtype=float)
            n = values.shape[0]
            ax.plot(x, values.mean(0), markersize=3, linewidth=1.3, **style,
                    label=f"{label} ({n} seeds)" if n > 1 else label)
            if n > 1:
                ax.fill_between(x, values.min(0), values.max(0), color=style["color"], alpha=0.15, linewidth=0)
    for ax in (bleu_ax, ratio_ax):
        if training_max is not None:
            ax.axvline(training_max + 0.5, color="black", linestyle="--", linewidth=1)
            ax.text(training_max + 0.7, ax.get_ylim()[1], f"longer than any training\nsource ({training_max} words) →",
                    fontsize=7, va="top")
        ax.set_xlabel("source length (words, bucket mean)")
        ax.grid(alpha=0.3)
    ratio_ax.axhline(1.0, color="grey", linewidth=0.8)
    bleu_ax.set_ylabel("BLEU")
    ratio_ax.set_ylabel("length ratio hypothesis / reference")
    _legend(fig, bleu_ax, len(series))
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def length_panels(panels: dict[str, dict[str, dict]], baseline: dict | None, baseline_label: str, title: str,
                  path: Path, training_max: int | None = None) -> Path:
    """BLEU (top row) and hypothesis/reference length ratio (bottom row) against source length, a
    column per panel, a line per series (mean over seeds, band from the lowest to the highest seed),
    ``baseline`` (``length_curves``' series form, or None) grey in every panel, a dashed line after
    the longest training source, each column's legend under it. ``panels``: panel title -> {label -> series}."""
    fig, axes = plt.subplots(2, len(panels), figsize=(3.5 * len(panels) + 0.6, 6.4), sharex=True, sharey="row",
                             squeeze=False)
    for column, (name, series) in enumerate(panels.items()):
        for row, key in enumerate(("bleu", "ratio")):
            ax = axes[row][column]
            if baseline is not None:
                values = np.asarray(baseline[key], dtype=float)
                ax.plot(baseline["x"], values.mean(0), color="0.55", linewidth=2.2, alpha=0.8,
                        label=f"{baseline_label} ({values.shape[0]} seeds)" if row == 0 else None)
            for (label, data), style in zip(series.items(), series_styles(len(series))):
                values = np.asarray(data[key], dtype=float)
                ax.plot(data["x"], values.mean(0), markersize=3, linewidth=1.2, **style,
                        label=f"{label} ({values.shape[0]})" if row == 0 else None)
                if values.shape[0] > 1:
                    ax.fill_between(data["x"], values.min(0), values.max(0), color=style["color"], alpha=0.12,
                                    linewidth=0)
            if training_max is not None:
                ax.axvline(training_max + 0.5, color="black", linestyle="--", linewidth=0.9)
            ax.grid(alpha=0.3)
        axes[0][column].set_title(name, fontsize=9)
        # under the column, not over its lines: a panel of ten rows hid the curves it names
        axes[1][column].legend(*axes[0][column].get_legend_handles_labels(), fontsize=6.5, ncol=2, frameon=False,
                               loc="upper center", bbox_to_anchor=(0.5, -0.2), handlelength=2.2, columnspacing=0.8)
        axes[1][column].axhline(1.0, color="grey", linewidth=0.8)
        axes[1][column].set_xlabel("source length (words, bucket mean)", fontsize=7)
    axes[0][0].set_ylabel("BLEU")
    axes[1][0].set_ylabel("length ratio hyp / ref")
    if training_max is not None:
        axes[0][0].text(training_max + 0.7, axes[0][0].get_ylim()[1], "longer than any\ntraining source →",
                        fontsize=6, va="top")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def two_orders(first: dict[str, float], second: dict[str, float], names: tuple[str, str], title: str,
               path: Path) -> Path:
    """One line per scheme (best in ``second`` on top) from its score in ``first`` (open circle) to
    its score in ``second`` (filled): two studies' BLEU of the same schemes, e.g. two budgets."""
    schemes = sorted(set(first) & set(second), key=lambda s: second[s])
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(schemes) + 1.2))
    for y, scheme in enumerate(schemes):
        ax.plot([first[scheme], second[scheme]], [y, y], color="0.6", linewidth=1.2, zorder=1)
    ax.scatter([first[s] for s in schemes], range(len(schemes)), facecolors="white", edgecolors="C0", zorder=2,
               label=names[0])
    ax.scatter([second[s] for s in schemes], range(len(schemes)), color="C1", zorder=3, label=names[1])
    ax.set_yticks(range(len(schemes)), schemes, fontsize=8)
    ax.set_xlabel("BLEU (mean over seeds)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def by_group_size(points: dict, kinds: dict[str, str], panels: tuple[str, ...], title: str, path: Path,
                  baseline: str = "sinusoidal") -> Path:
    """BLEU (top, with each row's 95% interval as a band) and length ratio (bottom) against k, the
    number of test sentences joined into one input: a panel per kind of scheme (``kinds``: row ->
    one of ``panels``; empty panels are left out), a line per row, ``baseline`` in grey in every
    panel. ``points``: row -> its points in increasing k (``scoring.joined.JoinedPoint``)."""
    shown = [p for p in panels if any(kinds[row] == p for row in points)]
    fig, axes = plt.subplots(2, len(shown), figsize=(3.6 * len(shown), 6.2), sharex=True, sharey="row", squeeze=False)
    ks = sorted({p.k for row in points.values() for p in row})
    for column, panel in enumerate(shown):
        top, bottom = axes[0][column], axes[1][column]
        rows = [row for row in sorted(points) if kinds[row] == panel and row != baseline]
        for row, style in zip(rows, series_styles(len(rows))):
            k, bleu = [p.k for p in points[row]], [p.bleu for p in points[row]]
            top.plot(k, bleu, markersize=3, label=row, **style)
            top.fill_between(k, [p.low for p in points[row]], [p.high for p in points[row]], color=style["color"],
                             alpha=0.15, linewidth=0)
            bottom.plot(k, [p.length_ratio for p in points[row]], markersize=3, **style)
        if baseline in points:
            base = points[baseline]
            top.plot([p.k for p in base], [p.bleu for p in base], color="0.5", linestyle="--", label=baseline)
            top.fill_between([p.k for p in base], [p.low for p in base], [p.high for p in base], color="0.5",
                             alpha=0.12, linewidth=0)
            bottom.plot([p.k for p in base], [p.length_ratio for p in base], color="0.5", linestyle="--")
        bottom.axhline(1.0, color="0.3", linewidth=0.8)
        top.set_title(panel, fontsize=10)
        top.legend(fontsize=7, loc="lower left")
        bottom.set_xscale("log", base=2)
        bottom.set_xticks(ks, [str(k) for k in ks])
        bottom.set_xlabel("sentences joined into one input (k)")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("BLEU (mean over seeds, 95% band)")
    axes[1][0].set_ylabel("length ratio (hypothesis / reference)")
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def by_position(points: dict, kinds: dict[str, str], panels: tuple[str, ...], title: str, path: Path,
                baseline: str = "sinusoidal") -> Path:
    """BLEU of each position inside joined inputs: a row of panels per k (``points``: row -> its
    ``scoring.positions.PositionPoint`` list), a column per kind of scheme (``kinds``: row -> one of
    ``panels``; empty ones left out), a line per row over positions 1..k, ``baseline`` grey in each."""
    shown = [p for p in panels if any(kinds[row] == p for row in points)]
    ks = sorted({p.k for row in points.values() for p in row})
    fig, axes = plt.subplots(len(ks), len(shown), figsize=(3.6 * len(shown), 2.8 * len(ks)), sharey=True,
                             squeeze=False)
    for line, k in enumerate(ks):
        for column, panel in enumerate(shown):
            ax = axes[line][column]
            rows = [row for row in sorted(points) if kinds[row] == panel and row != baseline]
            for row, style in zip(rows, series_styles(len(rows))):
                at = [p for p in points[row] if p.k == k]
                ax.plot([p.position for p in at], [p.bleu for p in at], markersize=3, label=row, **style)
            if baseline in points:
                at = [p for p in points[baseline] if p.k == k]
                ax.plot([p.position for p in at], [p.bleu for p in at], color="0.5", linestyle="--", label=baseline)
            ax.set_xticks(range(1, k + 1))
            ax.grid(alpha=0.3)
            if line == 0:
                ax.set_title(panel, fontsize=10)
            if line == len(ks) - 1:
                ax.set_xlabel("position of the sentence in the joined input")
            if column == 0:
                ax.set_ylabel(f"k = {k}: BLEU (mean over seeds)")
            if line == 0:
                ax.legend(fontsize=6, loc="lower left")
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)
