"""Numbers behind the pictures: attention statistics and positional-encoding profiles.

Attention statistics (per layer and head): the mean entropy of the attention rows (nats) and the
mean distance of the attention mass from the diagonal, sum_j p_ij |i - j| averaged over rows;
for cross-attention from the length-scaled diagonal |i * S / T - j| (S source, T target length).

Distance profiles (how the score contributed by position varies with the offset k - q):
- sinusoidal / learnable: PE(q) . PE(q + d) averaged over q (dot products of the encodings);
- rope / xpos: the expected rotated score for a constant query and key, sum_i cos(d theta_i)
  (times zeta_i^(-d/B) for xPos), normalised to 1 at d = 0 (RoFormer §3.4.3's long-term decay);
- alibi / t5 / fire: the additive bias of each head;
- xl: the content-independent term v . W_R R_{-d} of each head;
- shaw / nezha / deberta (content-dependent): cosine similarity of the relative key embedding at
  offset d with the one at offset 0 (the position signal a query can read).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from models.positional import build_positional
from models.positional.base import PositionalEncoding
from utils.config import ModelConfig


def attention_stats(weights: torch.Tensor, cross: bool = False) -> list[dict]:
    """weights (H, Tq, Tk) of one layer -> per head {head, entropy, diagonal_distance}."""
    h, tq, tk = weights.shape
    p = weights.float().clamp_min(1e-12)
    entropy = -(p * p.log()).sum(-1).mean(-1)  # (H,)
    rows = torch.arange(tq, dtype=torch.float32)[:, None]
    cols = torch.arange(tk, dtype=torch.float32)[None, :]
    diagonal = rows * (tk / tq) if cross else rows
    distance = (weights.float() * (diagonal - cols).abs()).sum(-1).mean(-1)  # (H,)
    return [{"head": i, "entropy": float(entropy[i]), "diagonal_distance": float(distance[i])} for i in range(h)]


def _pe(cfg: ModelConfig, kind: str, module: PositionalEncoding | None) -> PositionalEncoding:
    return module if module is not None else build_positional(cfg, kind)


def _parts(pe: PositionalEncoding) -> list[PositionalEncoding]:
    return list(pe.parts) if hasattr(pe, "parts") else [pe]


def absolute_table(pe: PositionalEncoding, n_positions: int) -> np.ndarray | None:
    """(n_positions, D) encoding added to the embeddings, or None for schemes that add nothing."""
    x = torch.zeros(1, n_positions, pe.d_model)
    with torch.no_grad():
        table = pe.embed(x, torch.arange(n_positions))[0]
    return None if torch.count_nonzero(table) == 0 else table.numpy()


@torch.no_grad()
def distance_profile(pe: PositionalEncoding, name: str, max_distance: int = 64, query: int = 64) -> tuple[np.ndarray, np.ndarray, str]:
    """(offsets (L,), values (H or 1, L), what the values are) for one scheme; see the module docstring.

    Offsets are key minus query, from -max_distance to max_distance (query at position ``query``).
    """
    offsets = torch.arange(-max_distance, max_distance + 1)
    keys = (query + offsets).clamp(min=0)
    q_pos = torch.tensor([query])
    if name in ("sinusoidal", "learnable"):
        table = torch.as_tensor(absolute_table(pe, query + max_distance + 1 + max_distance))
        base = torch.arange(max_distance, max_distance + 16)  # average over 16 query positions
        values = torch.stack([(table[base] * table[base + d]).sum(-1).mean() for d in offsets.tolist()])
        return offsets.numpy(), values[None].numpy(), "PE(q) · PE(q + d)"
    if name in ("rope", "xpos"):
        ones = torch.ones(1, 1, 1, pe.d_head)
        q, _ = pe.rotate(ones, ones[..., :0, :], q_pos, keys[:0])
        _, k = pe.rotate(ones[..., :0, :], ones.expand(1, 1, len(keys), pe.d_head).contiguous(), q_pos[:0], keys)
        scores = (q * k).sum(-1)[0, 0] / pe.d_head
        return offsets.numpy(), scores[None].numpy(), "rotated q · k for constant q, k (1 at d = 0)"
    if name in ("alibi", "t5", "fire"):
        bias = pe.score_bias(torch.zeros(1, pe.n_heads, 1, pe.d_head), torch.zeros(1, pe.n_heads, len(keys), pe.d_head),
                             q_pos, keys)
        return offsets.numpy(), bias[0, :, 0].numpy(), "additive logit bias per head"
    if name == "xl":
        zeros_q = torch.zeros(1, pe.n_heads, 1, pe.d_head)
        bias = pe.score_bias(zeros_q, torch.zeros(1, pe.n_heads, len(keys), pe.d_head), q_pos, keys)
        return offsets.numpy(), bias[0, :, 0].numpy(), "global position term v · W_R R per head"
    if name in ("shaw", "nezha"):
        idx = pe._index(q_pos, keys)[0]
        table = pe.key_table[idx]
        centre = pe.key_table[pe.max_distance]
        sim = torch.nn.functional.cosine_similarity(table, centre[None], dim=-1)
        return offsets.numpy(), sim[None].numpy(), "cosine(a^K(d), a^K(0))"
    if name == "deberta":
        k_r = pe._heads(pe.w_kr(pe.table))  # (H, 2k, Dh)
        idx = pe._delta(q_pos, keys)[0]
        sim = torch.nn.functional.cosine_similarity(k_r[:, idx], k_r[:, pe.span][:, None], dim=-1)
        return offsets.numpy(), sim.numpy(), "cosine(K_r(delta), K_r(0)) per head"
    return offsets.numpy(), np.zeros((1, len(offsets))), "no positional term"


def pca_2d(table: np.ndarray) -> np.ndarray:
    """(N, D) -> (N, 2) projection on the two leading principal components."""
    centred = table - table.mean(0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def entropy_bound(n: int) -> float:
    """Entropy of uniform attention over n keys (the largest possible), for reference."""
    return math.log(max(n, 1))
