"""Functional relative positions of NEZHA (Wei et al. 2019, "NEZHA: Neural Contextualized
Representation for Chinese Language Understanding", §3.2)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.shaw import ShawOptions, ShawPositional, relative_key_profile
from models.positional.sinusoidal import sinusoidal_at


@dataclass
class NezhaOptions(ShawOptions):
    """``model.positional.nezha``: relative distances clipped to [-max_distance, max_distance] (Shaw's
    options, NEZHA's wider default)."""

    max_distance: int = 64  # relative distances clipped to [-k, k]


class NezhaPositional(ShawPositional):
    """Shaw's key and value terms with fixed tables instead of learned ones:
    a_ij[2k] = sin((j - i) / 10000^(2k/Dh)), a_ij[2k+1] = cos((j - i) / 10000^(2k/Dh)),
    distances clipped to [-max_distance, max_distance] as NEZHA's implementation does.
    No learned positional parameters.
    """

    card = SchemeCard(
        title="NEZHA",
        relative=True,
        summary="Shaw's form with fixed sinusoidal relative tables",
        paper="wei",
        export_form="relative_position",
        profile_label="cosine(a^K(d), a^K(0))",
        saturation=lambda cfg: f"relative distances clip at ±{cfg.positional.nezha.max_distance}",
        profile=relative_key_profile,
    )

    # Shaw's form: the fixed tables are written out as relative key/value tables (inherited)

    Options = NezhaOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg, cfg.positional.nezha)

    def _make_tables(self, n: int, dim: int, values: bool) -> None:
        table = sinusoidal_at(torch.arange(n) - (n - 1) // 2, dim)  # distances -k..k
        self.register_buffer("key_table", table, persistent=False)
        self.register_buffer("value_table", table.clone() if values else None, persistent=False)
