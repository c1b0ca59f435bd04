"""T5 relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning", §2.1)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from utils.config import require


@dataclass
class T5Options:
    """``model.positional.t5``."""

    num_buckets: int = 32  # relative-position buckets (half exact, half log-spaced)
    max_distance: int = 128  # distances from here on share the last bucket

    def __post_init__(self) -> None:
        # bidirectional attention halves the buckets, and half of those are exact: at least one
        require(self.num_buckets >= 4, "num_buckets", "at least 4", self.num_buckets)
        require(self.max_distance > self.num_buckets // 2, "max_distance",
                f"greater than num_buckets / 2 ({self.num_buckets // 2}, the exact buckets)", self.max_distance)


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool,
                             num_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of relative_position = key_position - query_position (a LongTensor).

    Bidirectional: half the buckets for keys after the query. Within a direction, half of the
    buckets hold exact distances 0..max_exact-1, the rest log-spaced distances up to
    max_distance; farther distances share the last bucket. Unidirectional (causal): keys after
    the query fall into bucket 0.
    """
    n = -relative_position  # query minus key: positive for keys in the past
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    scaled = torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (scaled * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


class T5Positional(PositionalEncoding):
    """bias[h, i, j] = b[bucket(j - i), h]: one learned scalar per bucket and head, shared by all
    layers of a stack; bidirectional buckets in the encoder, causal ones in the decoder.

    Deviation: T5 drops the 1/sqrt(d) logit scale (folded into its init); we keep it and add
    the bias after scaling, like every other scheme here.
    """

    card = SchemeCard(
        title="T5's buckets",
        relative=True,
        summary="learned bias per log-bucket and head, bidirectional in the encoder, causal in the decoder",
        paper="raffel",
        export_form="relative_attention_bias",
        saturation=lambda cfg: f"distances of {cfg.positional.t5.max_distance} and more share the last bucket",
    )
    bias_from_positions = True  # FlexAttention adds it from its (H, Tq, Tk) table

    Options = T5Options

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.num_buckets = cfg.positional.t5.num_buckets
        self.max_distance = cfg.positional.t5.max_distance
        self.bias = nn.Embedding(self.num_buckets, cfg.n_heads)
        nn.init.normal_(self.bias.weight, 0.0, 0.02)

    def score_bias(self, q, k, q_pos, k_pos):
        buckets = relative_position_bucket(relative_positions(q_pos, k_pos), self.bidirectional,
                                           self.num_buckets, self.max_distance)
        return self.bias(buckets).permute(2, 0, 1)[None]  # (1, H, Tq, Tk)
