"""Decoding settings, resolved once at the command boundary into one value."""
from __future__ import annotations

from dataclasses import dataclass

from utils.config import DecodeConfig
from utils.errors import UserError


@dataclass(frozen=True)
class DecodeSettings:
    """How to translate: ``beam`` 1 is greedy search; ``nbest`` hypotheses per sentence
    (1 <= nbest <= beam); GNMT length penalty alpha; output length limit
    ``max_len_a * source_length + max_len_b``; ``batch_size`` sentences decoded at once; beam
    search's ``stopping`` rule (``exact`` or ``first_k``: ``search.beam``)."""

    beam: int = 5
    nbest: int = 1
    len_penalty: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64
    stopping: str = "exact"

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise UserError(f"the beam size must be at least 1 (got {self.beam}; 1 is greedy search)")
        if not 1 <= self.nbest <= self.beam:
            raise UserError(f"nbest must be between 1 and the beam size {self.beam} (got {self.nbest})")
        if self.batch_size < 1:
            raise UserError(f"the decoding batch size must be at least 1 (got {self.batch_size})")
        if self.stopping not in ("exact", "first_k"):
            raise UserError(f"unknown stopping rule '{self.stopping}' (exact or first_k)")
        if self.max_len_a < 0 or self.max_len_b < 0 or (self.max_len_a == 0 and self.max_len_b == 0):
            raise UserError(f"the output length limit {self.max_len_a} * source length + {self.max_len_b} "
                            f"must be positive")


def resolve_settings(cfg: DecodeConfig, beam: int | None = None, nbest: int = 1, batch_size: int | None = None,
                     greedy: bool = False, stopping: str | None = None) -> DecodeSettings:
    """The config's ``decode`` section with command-line values on top (None: keep the config's).

    ``greedy`` is beam 1. Invalid values (beam < 1, nbest outside 1..beam, batch size < 1) are
    one-line ``UserError``s.
    """
    if greedy and beam not in (None, 1):
        raise UserError("--greedy and --beam go separately (greedy search is beam 1)")
    return DecodeSettings(beam=1 if greedy else (cfg.beam if beam is None else beam), nbest=nbest,
                          len_penalty=cfg.len_penalty, max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b,
                          batch_size=cfg.batch_size if batch_size is None else batch_size,
                          stopping=cfg.stopping if stopping is None else stopping)


def decode_record(settings: DecodeSettings, cut_sources: int) -> dict:
    """The ``decode`` object of results.json: how the hypotheses were found."""
    return {"beam": settings.beam, "len_penalty": settings.len_penalty, "max_len_a": settings.max_len_a,
            "max_len_b": settings.max_len_b, "stopping": settings.stopping, "batch_size": settings.batch_size,
            "cut_sources": cut_sources}


def decoding_rule(record: dict) -> dict:
    """What in a ``decode`` record decides the hypotheses (not the batch size). Records written
    before ``stopping`` existed (2026-11-24) come from fairseq's rule, ``first_k``."""
    return {"beam": record["beam"], "len_penalty": record["len_penalty"], "max_len_a": record["max_len_a"],
            "max_len_b": record["max_len_b"],
            "stopping": None if record["beam"] == 1 else record.get("stopping", "first_k")}  # greedy: no rule
