"""Shared fixtures: the real Multi30k folder (via MULTI30K_DIR) and the repository root."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def multi30k_dir() -> Path:
    """The Multi30k fr-en folder named by MULTI30K_DIR; the test is skipped when it is unset."""
    value = os.environ.get("MULTI30K_DIR")
    if not value:
        pytest.skip("MULTI30K_DIR is not set (point it at shared/data/multi30k-fr-en)")
    path = Path(value)
    if not (path / "train.fr.gz").is_file():
        pytest.fail(f"MULTI30K_DIR={value} does not hold train.fr.gz")
    return path
