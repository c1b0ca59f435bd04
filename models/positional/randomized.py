"""Randomized positional encodings (Ruoss et al. 2023, ACL, "Randomized Positional Encodings
Boost Length Generalization of Transformers")."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard
from models.positional.profile import scheme_profile
from models.positional.registry import SCHEMES  # filled by the package before any scheme is built
from utils.config import require

# Bases that make no sense under random positions (no positions at all — fox and cope read none —
# or positions already randomised), and xl, whose relative table relies on contiguous positions.
UNSUITABLE_BASES = ("none", "randomized", "shape", "cape", "xl", "fox", "cope")


@dataclass
class RandomizedOptions:
    """``model.positional.randomized``."""

    base: str = "sinusoidal"  # the scheme that reads the positions (one registry name)
    max_length: int = 128  # L: training positions are a sorted random subset of 0..L-1

    def __post_init__(self) -> None:
        require(self.max_length >= 1, "max_length", "at least 1", self.max_length)


class RandomizedPositional(PositionalEncoding):
    """A base scheme (``base``: sinusoidal, rope, alibi, ...) whose positions are, in training, a
    sorted sample without replacement of T positions out of 0..L-1 (T: the batch's length), and
    at evaluation and decoding 0..n-1 (exactly the base).

    The model then sees, in training, the order of its tokens but not their spacing, and
    positions up to L - 1 however short its training sentences are: at test time a longer
    sentence uses positions it has already seen. L should exceed the longest test sequence (the
    paper uses L = 2048 for test lengths up to 500); if a training batch is longer than L the
    sample is taken from 0..T-1 (no randomisation for that batch).

    One sample per batch and per stack, shared by the batch's sequences and by all layers of the
    stack (as the authors' implementation draws one subset per call); the encoder and the
    decoder draw independently. The draw happens once per forward pass, in ``training_positions``,
    which the model calls before the stack's first hook. Cross-attention: source and target
    positions are drawn apart, so their offsets mean nothing; ``cross_attention: true`` is
    refused. Draws come from the default generator of the batch's device (seeded by the run,
    restored on resume).
    """

    card = SchemeCard(
        title="randomized positions",
        summary=("a base scheme (`randomized.base`: sinusoidal, rope, alibi, …) read at a sorted random subset of "
        "0..`max_length`−1 in training, at 0..n−1 at evaluation"),
        paper="ruoss",
        acts_on="the base's",
        export_form="base",
        cross_attention="refused",
        saturation=lambda cfg: f"training draws positions from 0 to {cfg.positional.randomized.max_length - 1} only",
        evaluates_as=lambda cfg: cfg.positional.randomized.base,
        profile=lambda pe, max_distance, query: scheme_profile(pe.base, max_distance, query),
    )

    Options = RandomizedOptions

    @classmethod
    def check_config(cls, cfg) -> None:
        options = cfg.positional.randomized
        suitable = [name for name in SCHEMES if name not in UNSUITABLE_BASES]
        require(options.base in suitable, "positional.randomized.base", f"one of {', '.join(suitable)}",
                options.base)
        require(not cfg.positional.cross_attention, "positional.cross_attention",
                "false with randomized positions (source and target positions are drawn apart)", True)
        base = SCHEMES[options.base]
        base.check_config(cfg)
        if options.base == "learnable":
            require(cfg.positional.max_positions >= options.max_length, "positional.max_positions",
                    f"at least model.positional.randomized.max_length ({options.max_length}) for a "
                    f"learnable base", cfg.positional.max_positions)

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.max_length = cfg.positional.randomized.max_length
        self.base = SCHEMES[cfg.positional.randomized.base](kind, cfg)
        self.has_value_term = self.base.has_value_term
        self.score_scale = self.base.score_scale

    def training_positions(self, pos):
        t = pos.numel()
        chosen = torch.randperm(max(self.max_length, t), device=pos.device)[:t]
        return chosen.sort().values

    def embed(self, x, pos):
        return self.base.embed(x, pos)

    def rotate(self, q, k, q_pos, k_pos):
        return self.base.rotate(q, k, q_pos, k_pos)

    def score_bias(self, q, k, q_pos, k_pos):
        return self.base.score_bias(q, k, q_pos, k_pos)

    def value_term(self, probs, q_pos, k_pos):
        return self.base.value_term(probs, q_pos, k_pos)

    def score_mod(self, q, k, q_pos, k_pos, state):
        return self.base.score_mod(q, k, q_pos, k_pos, state)

    @property
    def position_limit(self):
        return self.base.position_limit

