"""Pictures of positional encodings: for each scheme and stack, its distance profile (what
``models.positional.distance_profile`` returns: how the score it contributes varies with the
offset key - query), and for schemes that add to the embeddings the table of position vectors
and its PCA map. Untrained (the config's dimensions) or with a trained run's parameters."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from analysis import pictures
from analysis.results import slug
from experiment.config import load_config
from experiment.run_dir import load_run_config
from experiment.trained import load_run
from models.positional import SCHEMES, build_positional, components, distance_profile, embedding_table, scheme_names
from utils.errors import UserError

KINDS = ("encoder", "decoder")


def pca_2d(table: np.ndarray) -> np.ndarray:
    """(N, D) -> (N, 2) projection on the two leading principal components."""
    centred = table - table.mean(0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def pe_pictures(names: list[str], out: Path | None = None, run_dir: Path | None = None, checkpoint: str = "best",
                positions: int = 128, max_distance: int = 64, fmt: str = "png") -> list[Path]:
    """Draw each scheme in ``names`` (``["all"]``: every registered scheme; ``a+b`` combinations
    draw each part). With ``run_dir`` the run's trained modules are drawn (its scheme only);
    otherwise fresh ones with the default config's dimensions. Default ``out``: DIR/pictures for a
    run, runs/pictures otherwise."""
    names = list(SCHEMES) if names == ["all"] else names
    for name in names:
        scheme_names(name)  # unknown names: one-line error
    if run_dir is not None:
        run = load_run(run_dir, checkpoint)
        trained = run.cfg.model.positional.name
        for name in names:
            if name != trained:
                raise UserError(f"--run {run_dir} was trained with '{trained}', not '{name}'")
        model_cfg, source = run.cfg.model, f"{run.run_dir.name}, trained"
        modules = {"encoder": run.model.encoder_pe, "decoder": run.model.decoder_pe}
        out = Path(out or run.run_dir / "pictures")
    else:
        model_cfg, source, modules = load_config(None).model, "untrained", None
        out = Path(out or "runs/pictures")
    written = []
    for name in names:
        cfg = replace(model_cfg, positional=replace(model_cfg.positional, name=name))
        part_names = [n for n in scheme_names(name) if n != "none"] or ["none"]
        for kind in KINDS:
            # evaluation behaviour: shape, cape and randomized draw random positions only in training
            module = (modules[kind] if modules else build_positional(cfg, kind)).eval()
            for part, part_name in zip(components(module), part_names):
                written += _draw(part, part_name, kind, f"{part_name} ({kind}, {source}, d_model {cfg.d_model}, "
                                 f"{cfg.n_heads} heads)", out, positions, max_distance, fmt)
    return written


def trained_pe_pictures(run_dirs: list[Path], out: Path, fmt: str = "png") -> list[Path]:
    """Each run's own trained encoding, at its model's dimensions (a study's ``pictures/pe/``: one run
    of each scheme it trained, not every registered scheme at another model's size)."""
    written = []
    for run_dir in run_dirs:
        written += pe_pictures([load_run_config(run_dir).model.positional.name], out, run_dir=run_dir, fmt=fmt)
    return written


def _draw(part, part_name: str, kind: str, tag: str, out: Path, positions: int, max_distance: int,
          fmt: str) -> list[Path]:
    profile = distance_profile(part, max_distance)
    written = [pictures.distance_profile_plot(
        profile.offsets.numpy(), profile.values.numpy(), profile.label,
        f"{tag}: score contribution by relative position", out / f"pe_{slug(part_name)}_{kind}_by_distance.{fmt}")]
    # An embedding table is drawn for the encoder, and for the decoder too when it is learned
    # (the decoder's own parameters); a fixed table is the same in both stacks.
    if kind == "encoder" or any(True for _ in part.parameters()):
        table = embedding_table(part, positions)
        if table is not None:
            table = table.numpy()
            written.append(
                pictures.position_heatmap(
                    table,
                    f"{tag}: encoding of positions 0–{positions - 1}",
                    out / f"pe_{slug(part_name)}_{kind}_table.{fmt}",
                )
            )
            written.append(
                pictures.pca_map(
                    pca_2d(table),
                    f"{tag}: PCA map of the position vectors",
                    out / f"pe_{slug(part_name)}_{kind}_pca.{fmt}",
                )
            )
    return written
