"""Checkpoints: safe loading (weights_only=True), RNG state, rotation, averaging (written with
``utils.io.atomic_torch_save``).

A training checkpoint is a dict of plain containers and tensors (so ``weights_only`` loading
works): ``model``, ``optimizer``, ``scheduler``, ``scaler``, ``trainer`` (ignite engine state),
``rng`` (torch, CUDA, numpy, python), ``early_stopping`` and ``best``. Inference needs ``model``
only; the config lives beside it in the run directory.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import torch

from models.config import TEST_TIME_SECTIONS
from utils.errors import UserError


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint written by this project (``weights_only=True``: no pickled code)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    if path.stat().st_size == 0:
        raise UserError(f"not a checkpoint: {path} (an empty file)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # corrupt file, not a checkpoint, unsafe pickle
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UserError(f"not a checkpoint: {path} ({reason[:200]})") from None
    if not isinstance(state, dict):
        raise UserError(f"not a checkpoint: {path} (holds a {type(state).__name__}, not this project's dict)")
    return state


def rng_state() -> dict:
    """Every RNG state as weights_only-loadable data."""
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "python": _to_lists(random.getstate()),
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    random.setstate(_to_tuples(state["python"]))


def _to_lists(x):
    return [_to_lists(v) for v in x] if isinstance(x, tuple) else x


def _to_tuples(x):
    return tuple(_to_tuples(v) for v in x) if isinstance(x, list) else x


STEP_FILE = re.compile(r"^step_(\d+)\.pt$")


def step_checkpoint_name(step: int) -> str:
    """The file name of the checkpoint kept at update ``step`` (``STEP_FILE`` reads it back)."""
    return f"step_{step:08d}.pt"


def step_checkpoints(folder: Path) -> list[Path]:
    """``step_<N>.pt`` files of a checkpoint folder, oldest step first."""
    found = [(int(m.group(1)), p) for p in Path(folder).glob("step_*.pt") if (m := STEP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def keep_last(folder: Path, k: int) -> None:
    """Delete all but the newest k ``step_<N>.pt`` files."""
    for path in step_checkpoints(folder)[:-k] if k > 0 else step_checkpoints(folder):
        path.unlink(missing_ok=True)


def average_checkpoints(paths: list[Path]) -> dict:
    """Element-wise mean of the ``model`` weights of several checkpoints (fairseq's averaging).

    Returns a checkpoint holding only ``model`` (and ``averaged_from``); integer buffers are
    taken from the last checkpoint.
    """
    if not paths:
        raise UserError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        model = load_checkpoint(path)["model"]
        if total and model.keys() != total.keys():
            raise UserError(f"checkpoint {path} holds different parameters than {paths[0]}")
        for name, tensor in model.items():
            if tensor.is_floating_point():
                total[name] = total.get(name, 0) + tensor.double()
            else:
                total[name] = tensor
    averaged = {n: (t / len(paths)).to(torch.float32) if t.is_floating_point() else t for n, t in total.items()}
    last = load_checkpoint(paths[-1])
    return {"model": averaged, "averaged_from": [str(p) for p in paths],
            **{k: last[k] for k in ("model_config", "vocab") if k in last}}


def check_fits(state: dict, model_config: dict, vocab: list[int], path: Path, config_path: Path) -> None:
    """Refuse weights made for another model: the checkpoint records its model section and
    vocabulary sizes (checkpoints written before it did are checked by shape only, on loading). The
    test-time settings (``models.config.TEST_TIME_SECTIONS``) may differ: they change no weight."""
    if "model_config" not in state:
        return
    theirs, ours = _flat(state["model_config"]), _flat(model_config)
    weights_alike = tuple(f"{section}." for section in TEST_TIME_SECTIONS)  # test-time settings: same weights
    differ = [f"model.{key} {theirs.get(key)!r} in the checkpoint, {ours.get(key)!r} in the run"
              for key in sorted(set(theirs) | set(ours))
              if theirs.get(key) != ours.get(key) and not key.startswith(weights_alike)]
    if list(state.get("vocab", vocab)) != list(vocab):
        differ.append(f"vocabulary sizes {list(state['vocab'])} in the checkpoint, {list(vocab)} in the run")
    if differ:
        raise UserError(f"{path} belongs to another model than {config_path}: " + "; ".join(differ[:4]))


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
