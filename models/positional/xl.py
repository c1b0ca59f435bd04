"""Transformer-XL relative attention (Dai et al. 2019, "Transformer-XL", §3.3; also XLNet)."""
from __future__ import annotations

import torch
from torch import nn

from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from models.positional.sinusoidal import sinusoidal_at


class TransformerXLPositional(PositionalEncoding):
    """A_ij = q_i.k_j + q_i.W_R R_{i-j} + u.k_j + v.W_R R_{i-j}   (all / sqrt(Dh)),

    R the sinusoidal encoding of the distance i - j (query minus key, negative in the
    bidirectional encoder), W_R a (D, D) projection split into heads, u and v per-head global
    biases. The first term is ordinary attention; this module returns the other three.
    Deviation: W_R is shared by the layers of a stack (the paper has one per layer; u, v are
    shared in the paper too).
    """

    card = SchemeCard(
        title="Transformer-XL's relative terms",
        relative=True,
        summary="sinusoidal relative R with W_R and global u, v biases",
        paper="dai",
        profile_label="global position term v · W_R R per head",
    )

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.w_r = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        nn.init.xavier_uniform_(self.w_r.weight)
        self.u = nn.Parameter(torch.zeros(cfg.n_heads, self.d_head))
        self.v = nn.Parameter(torch.zeros(cfg.n_heads, self.d_head))

    def score_bias(self, q, k, q_pos, k_pos):
        distance = -relative_positions(q_pos, k_pos)  # (Tq, Tk): i - j
        # Positions are contiguous ranges (the interface's contract), so the distances are the
        # Tq + Tk - 1 integers from q_pos[0] - k_pos[-1] on: every distance once, found without
        # reading the positions on the host.
        lo = q_pos[:1] - k_pos[-1:]  # (1,)
        span = lo + torch.arange(len(q_pos) + len(k_pos) - 1, device=q.device)
        r = self.w_r(sinusoidal_at(span, self.d_model).to(device=q.device, dtype=q.dtype))
        r = r.view(len(span), self.n_heads, self.d_head).transpose(0, 1)  # (H, L, Dh)
        position = torch.matmul(q + self.v[:, None, :].to(q.dtype), r.transpose(-1, -2))  # (B,H,Tq,L)
        b, h, tq, _ = position.shape
        position = position.gather(-1, (distance - lo).expand(b, h, tq, -1))  # (B, H, Tq, Tk)
        content = torch.matmul(k, self.u[:, :, None].to(k.dtype)).transpose(-1, -2)  # (B, H, 1, Tk)
        return (position + content) * self.d_head ** -0.5
