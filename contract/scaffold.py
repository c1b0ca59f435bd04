"""``nmt scheme new NAME --kind bias|rotary|embedding``: a plugin scheme file to fill in, and its test.

Each kind's file holds the scheme's card, its options, a docstring stating the shapes of the hook it
fills, and a working body that is a stated neutral default — so a researcher starts from a scheme that
keeps the contract (``contract.kit``) and changes one hook at a time:

- ``bias``: a logit bias −m_h·|j−i| with a learned slope per head, m_h starting at ``init_slope`` (0: no
  positional signal at the start, NoPE; the model learns how much distance matters);
- ``rotary``: queries and keys rotated by position × θ_i, θ_i = base^(−2i/Dh) (RoPE's arithmetic, written
  out to be changed);
- ``embedding``: a learned table added to the token embeddings, starting at zero (NoPE at the start).

The test file runs every check of the kit on the scheme (``python -m pytest test_NAME.py`` from the
suite's root). The study file (``NAME-study.yaml``) compares it with sinusoidal and RoPE on the built-in
grammar over three seeds, its family of two hypotheses declared when the file is written — before any
run, so its significance table is confirmatory (``python -m nmt study NAME-study.yaml``).
"""
from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from models.positional import SCHEMES
from models.positional.plugins import NAME_PATTERN
from utils.errors import UserError
from utils.io import atomic_write_text
from utils.paths import ROOT

Kind = Literal["bias", "rotary", "embedding"]
KINDS: tuple[str, ...] = ("bias", "rotary", "embedding")

_HEADER = '''"""{name}: {summary}

Fill in the hook below (its docstring gives the shapes), the card (what docs/schemes.md and the report
say of the scheme) and the options (the config section model.positional.{name}). Check it with
``python -m nmt scheme check {file}`` and compare it in a study that names this file under ``plugins``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional import PositionalEncoding, SchemeCard{imports}
'''

_BODIES = {
    "bias": '''

@dataclass
class Options:
    """model.positional.{name}"""

    init_slope: float = 0.0  # m_h at initialisation, every head (0: no positional signal at the start)


class {cls}(PositionalEncoding):
    """bias[h, i, j] = -m_h |j - i| with m_h learned per head (from ``init_slope``). In the decoder the causal
    mask hides j > i; in the encoder and cross-attention the distance is symmetric."""

    Options = Options
    card = SchemeCard(
        summary="-m_h·|j−i| logit bias, m_h learned per head (a template: replace with your scheme)",
        paper="Your Name 2026",  # "Authors Year" (a built-in card names its key in reporting/works.yaml instead)
        relative=True,  # the bias reads positions only through j - i: the kit checks shift invariance
    )
    bias_from_positions = True  # score_bias reads positions (and parameters), never q or k: FlexAttention adds it

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        options = cfg.positional.options("{name}")
        self.slopes = torch.nn.Parameter(torch.full((cfg.n_heads,), float(options.init_slope)))

    def score_bias(self, q, k, q_pos, k_pos):
        """q_pos: (Tq,), k_pos: (Tk,) positions -> (1, H, Tq, Tk) added to the attention logits."""
        distance = (k_pos[None, :] - q_pos[:, None]).abs().to(self.slopes.dtype)  # (Tq, Tk)
        return (-self.slopes[:, None, None] * distance)[None]
''',
    "rotary": '''

@dataclass
class Options:
    """model.positional.{name}"""

    base: float = 10000.0  # θ_i = base^(-2i/Dh)


class {cls}(PositionalEncoding):
    """q and k rotated in planes (2i, 2i+1) by the angle position × θ_i, θ_i = base^(-2i/Dh): the logit of
    query i and key j then depends on their positions through j - i only."""

    Options = Options
    card = SchemeCard(
        summary="queries and keys rotated by position × θ_i (a template: replace with your scheme)",
        paper="Your Name 2026",
        relative=True,
    )

    @classmethod
    def check_config(cls, cfg) -> None:
        """Refuse a head width the rotations cannot pair (the config names the key)."""
        if (cfg.d_model // cfg.n_heads) % 2:
            raise InvalidValue("d_model", "a multiple of 2 x model.n_heads (rotations pair the head's dimensions)",
                               cfg.d_model)

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        base = cfg.positional.options("{name}").base
        inv_freq = base ** (-torch.arange(0, self.d_head, 2, dtype=torch.float32) / self.d_head)  # (Dh/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # rebuilt from the config, never saved

    def rotate(self, q, k, q_pos, k_pos):
        """q: (B, H, Tq, Dh), k: (B, H, Tk, Dh), q_pos: (Tq,), k_pos: (Tk,) -> q and k rotated, same shapes."""
        return self._rotated(q, q_pos), self._rotated(k, k_pos)

    def _rotated(self, x, pos):
        angles = pos.to(torch.float32)[:, None] * self.inv_freq[None, :]  # (T, Dh/2)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2].float(), x[..., 1::2].float()
        turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (B, H, T, Dh/2, 2)
        return turned.flatten(-2).to(x.dtype)
''',
    "embedding": '''

@dataclass
class Options:
    """model.positional.{name}"""

    init_std: float = 0.0  # the table's initial standard deviation (0: zeros, no positional signal at the start)


class {cls}(PositionalEncoding):
    """x + P[pos]: a learned table P of model.positional.max_positions rows added to the scaled token
    embeddings below the first layer."""

    Options = Options
    card = SchemeCard(
        summary="learned table added to the embeddings (a template: replace with your scheme)",
        paper="Your Name 2026",
        cross_attention="absent",  # it only adds to the embeddings: nothing to do in cross-attention
    )

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.table = torch.nn.Parameter(torch.randn(cfg.positional.max_positions, cfg.d_model)
                                        * cfg.positional.options("{name}").init_std)

    def embed(self, x, pos):
        """x: (B, T, D) scaled token embeddings, pos: (T,) -> (B, T, D)."""
        return x + self.table[pos].to(x.dtype)

    @property
    def position_limit(self):
        return self.table.shape[0]  # positions past the table are refused before the model builds them
''',
}

_FOOTER = '''

SCHEMES = {{"{name}": {cls}}}  # what the suite registers from this file
'''

_TEST = '''"""The contract kit (contract/kit.py) on the plugin scheme {name}: run from the suite's root,
``python -m pytest {test_path}``."""
from pathlib import Path

import pytest

from contract.kit import CHECKS, run_checks
from models.positional.plugins import load_file

load_file(Path(__file__).resolve().parent / "{file_name}")


@pytest.mark.parametrize("check", list(CHECKS))
def test_contract(check):
    (outcome,) = run_checks("{name}", (), [check])
    assert outcome.passed is not False, outcome.line()
'''


_STUDY = """# {name} against sinusoidal and RoPE on the built-in grammar, three seeds each (docs/studies.md):
#   python -m nmt study {study_path}
# The family below was declared when this file was written, before any run: its table is confirmatory.
config: {config}
plugins: [{file_name}]
schemes: [sinusoidal, rope, {name}]
seeds: [1, 2, 3]
out: runs/{name}-study
archive: {archive}
families:
  {name}-vs-baselines: {{pairs: [{name} vs sinusoidal, {name} vs rope], declared: {declared}}}
"""



def _from_root(path: Path) -> str:
    """``path`` as a study names ``out`` and ``archive``: relative to the repository root where it lies under it."""
    path = path.resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Positional"


def scheme_source(name: str, kind: Kind) -> str:
    """The plugin file's text for a scheme ``name`` of ``kind``."""
    body = _BODIES[kind].format(name=name, cls=class_name(name))
    summary = {"bias": "a logit bias of relative distance", "rotary": "a rotation of queries and keys",
               "embedding": "a learned table added to the embeddings"}[kind]
    imports = "\nfrom utils.config import InvalidValue" if kind == "rotary" else ""
    return (_HEADER.format(name=name, summary=summary, file=f"{name}.py", imports=imports) + body
            + _FOOTER.format(name=name, cls=class_name(name)))


def write_scheme(name: str, kind: Kind, folder: Path) -> tuple[Path, Path, Path]:
    """Write ``folder/NAME.py``, ``folder/test_NAME.py`` and ``folder/NAME-study.yaml``; refuses a name the
    registry or the pattern does not allow and files that exist (nothing is overwritten)."""
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(f"scheme name {name!r} must be lowercase letters, digits and _, starting with a letter")
    if name in SCHEMES:
        raise UserError(f"scheme name '{name}' is taken by a registered scheme; choose another")
    if kind not in KINDS:
        raise UserError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    scheme, test, study = (Path(folder) / f"{name}.py", Path(folder) / f"test_{name}.py",
                           Path(folder) / f"{name}-study.yaml")
    existing = [p for p in (scheme, test, study) if p.exists()]
    if existing:
        raise UserError(f"{existing[0]} exists; nothing was written (choose another name or folder)")
    Path(folder).mkdir(parents=True, exist_ok=True)
    atomic_write_text(scheme, scheme_source(name, kind))
    atomic_write_text(test, _TEST.format(name=name, file_name=scheme.name, test_path=test))
    config = os.path.relpath(ROOT / "configs" / "synthetic" / "base.yaml", Path(folder).resolve())
    declared = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    atomic_write_text(study, _STUDY.format(name=name, study_path=study, config=Path(config).as_posix(),
                                           file_name=scheme.name, archive=_from_root(Path(folder) / f"{name}-archive"),
                                           declared=declared))
    return scheme, test, study
