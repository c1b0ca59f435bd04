"""Decoding settings, resolved once at the command boundary into one value."""
from __future__ import annotations

from dataclasses import dataclass

from utils.config import DecodeConfig
from utils.errors import UserError


@dataclass(frozen=True)
class DecodeSettings:
    """How to translate: ``beam`` 1 is greedy search; ``nbest`` hypotheses per sentence
    (1 <= nbest <= beam); GNMT length penalty alpha; output length limit
    ``max_len_a * source_length + max_len_b``; ``batch_size`` sentences decoded at once."""

    beam: int = 5
    nbest: int = 1
    len_penalty: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise UserError(f"the beam size must be at least 1 (got {self.beam}; 1 is greedy search)")
        if not 1 <= self.nbest <= self.beam:
            raise UserError(f"nbest must be between 1 and the beam size {self.beam} (got {self.nbest})")
        if self.batch_size < 1:
            raise UserError(f"the decoding batch size must be at least 1 (got {self.batch_size})")
        if self.max_len_a < 0 or self.max_len_b < 0 or (self.max_len_a == 0 and self.max_len_b == 0):
            raise UserError(f"the output length limit {self.max_len_a} * source length + {self.max_len_b} "
                            f"must be positive")


def resolve_settings(cfg: DecodeConfig, beam: int | None = None, nbest: int = 1, batch_size: int | None = None,
                     greedy: bool = False) -> DecodeSettings:
    """The config's ``decode`` section with command-line values on top (None: keep the config's).

    ``greedy`` is beam 1. Invalid values (beam < 1, nbest outside 1..beam, batch size < 1) are
    one-line ``UserError``s.
    """
    if greedy and beam not in (None, 1):
        raise UserError("--greedy and --beam go separately (greedy search is beam 1)")
    return DecodeSettings(beam=1 if greedy else (cfg.beam if beam is None else beam), nbest=nbest,
                          len_penalty=cfg.len_penalty, max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b,
                          batch_size=cfg.batch_size if batch_size is None else batch_size)
