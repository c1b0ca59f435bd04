"""Which engine decodes a command's translations: this project's PyTorch search or CTranslate2.

``--engine auto`` (the default of ``translate`` and ``test``) takes CTranslate2 only where it
prints what the PyTorch engine prints: greedy search (beam 1) of a run whose scheme exports, with
the package installed and the export writable. Beam search stays on PyTorch under auto: CTranslate2
normalises a hypothesis's score by L^alpha (ours by GNMT's ((5 + L) / 6)^alpha) and has its own
stopping rule, so its beams can differ. ``--engine ctranslate2`` asks for it whatever the search,
``--engine torch`` never uses it. Each choice comes with the reason a command prints on stderr.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch

from experiment.decode_config import ENGINES, DecodeConfig
from experiment.trained import TrainedRun
from search.translate import Engine
from utils.errors import UserError


@dataclass
class EngineChoice:
    """``name`` (torch or ctranslate2), the engine to pass to ``translate`` (None: PyTorch) and
    why it was chosen."""

    name: str
    engine: Engine | None
    reason: str

    def line(self) -> str:
        """What a command prints on stderr."""
        return f"engine: {self.name} ({self.reason})"


def _ctranslate2_engine(run: TrainedRun, device: torch.device, compute_type: str, threads: int) -> Engine:
    from search.ctranslate2 import CTranslate2Translator, check_exportable, exported_model

    check_exportable(run.cfg.model)
    return CTranslate2Translator(exported_model(run), run.tokenizer, device.type, compute_type, threads)


def choose_engine(run: TrainedRun, settings: DecodeConfig, requested: str = "auto",
                  device: torch.device | str = "cpu", compute_type: str = "float32", threads: int = 1) -> EngineChoice:
    """The engine for ``run`` decoding with ``settings`` (``requested``: one of ``ENGINES``).
    An explicit ``ctranslate2`` that cannot be had is a one-line ``UserError``; auto falls back to
    PyTorch and says why."""
    device = torch.device(device)
    if requested not in ENGINES:
        raise UserError(f"unknown engine '{requested}' (one of {', '.join(ENGINES)})")
    if requested == "torch":
        return EngineChoice("torch", None, "asked for")
    if requested == "ctranslate2":
        return EngineChoice("ctranslate2", _ctranslate2_engine(run, device, compute_type, threads), "asked for")
    if settings.beam > 1:
        return EngineChoice("torch", None, "auto: beam search, whose length normalisation and stopping differ "
                                           "in CTranslate2")
    if importlib.util.find_spec("ctranslate2") is None:
        return EngineChoice("torch", None, "auto: the ctranslate2 package is not installed")
    if device.type not in ("cpu", "cuda"):
        return EngineChoice("torch", None, f"auto: CTranslate2 does not run on {device.type}")
    try:
        engine = _ctranslate2_engine(run, device, compute_type, threads)
    except UserError as err:  # the scheme does not export, or the export cannot be written
        return EngineChoice("torch", None, f"auto: {err}")
    return EngineChoice("ctranslate2", engine, "auto: greedy search of an exportable scheme, same output as torch")
