"""What a GPU call carries that the GPU machine lacks (``python -m nmt gpu prep``, ``make gpu-prep``):
``.gpu/wheels/`` — pytorch-ignite, nltk and submitit for its CPython 3.12 on manylinux x86_64 (pure
Python wheels; their own needs are on the machine's image) — and ``.gpu/data/multi30k-fr-en/``, a
copy of the data. ``.gpu`` is git-ignored: name it in the call's carry. ``gpu/wave.sh``
installs the wheels and points MULTI30K_DIR at the data there.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from utils.errors import UserError
from utils.paths import ROOT

WHEELS = ("pytorch-ignite", "nltk", "submitit")  # imported by the runs, absent from the GPU image
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
SHARED_DATA = ROOT.parent / "shared" / "data" / "multi30k-fr-en"


def download_command(folder: Path) -> list[str]:
    """pip's download of the wheels for the GPU machine's Python (3.12, x86_64), nothing else."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    return [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(folder), *WHEELS]


def prepare(folder: Path, data: Path | None = None) -> list[str]:
    """Fill ``folder`` (wheels/, data/multi30k-fr-en/); returns one line per thing in it."""
    data = data or Path(os.environ.get("MULTI30K_DIR") or SHARED_DATA)
    if not data.is_dir():
        raise UserError(f"no Multi30k folder at {data} (set MULTI30K_DIR or --data)")
    wheels = folder / "wheels"
    if wheels.is_dir():
        shutil.rmtree(wheels)  # one version of each: two would stop the install there
    wheels.mkdir(parents=True)
    done = subprocess.run(download_command(wheels), capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise UserError(f"pip could not download {', '.join(WHEELS)} for CPython 3.12: {reason}")
    copy = folder / "data" / "multi30k-fr-en"
    if copy.is_dir():
        shutil.rmtree(copy)
    shutil.copytree(data, copy)
    return [f"{path.relative_to(folder.parent)} ({path.stat().st_size / 1024:.0f} kB)"
            for path in [*sorted(wheels.iterdir()), *sorted(copy.iterdir())]]
