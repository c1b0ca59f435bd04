"""Where the suite's own files are: ``ROOT``, the folder holding the packages, ``configs/``,
``studies/`` and ``report/`` (a checkout, or the folder ``pip install .`` put the packages in),
defined once."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
