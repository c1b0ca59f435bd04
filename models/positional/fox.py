"""FoX, the Forgetting Transformer's data-dependent decay (Lin, Nikishin, He and Courville 2025,
ICLR, "Forgetting Transformer: Softmax Attention with a Forget Gate", eq. 4-6)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.positional.alibi import alibi_slopes
from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard

FOX_FAMILY = (
    "CABLE (arXiv 2503.08067) adds to the logit of key j the sum over the tokens between key and query of "
    "−softplus(s_t), s_t a learned score of token t: FoX's sum of log σ(w·x_t + b) over the same tokens, since "
    "log σ(x) = −softplus(−x) — the same bias re-parametrised, which FoX's row answers for. GRAPE's additive form "
    "(arXiv 2512.07805) contains FoX (content gates) and ALiBi (gates held constant: the sum is −m_h |j − i|, "
    "tests/models/positional/test_recent_schemes.py)")


class ForgettingPositional(PositionalEncoding):
    """A scalar forget gate per token l and head h from the self-attention layer's input x_l,
    f_l = sigmoid(w_h . x_l + b_h), and the logit bias

        D_ij = sum_{l = j+1 .. i} log f_l    (key j at or before query i: the paper's causal form),

    so a head forgets at a rate its input chooses; with constant gates f = e^(-m_h) it is ALiBi's
    -m_h (i - j). The decoder uses that causal form. In the bidirectional encoder (our extension, as
    the issue of this scheme asks) a second gate set g_l = sigmoid(u_h . x_l + c_h) decays towards
    later keys: D_ij = sum_{l = i .. j-1} log g_l for j > i (the gates of the tokens from the query
    towards the key, the key's own excluded, mirroring the causal sum). Right-padded batches keep
    padding out of every real pair's sum.

    Initialisation (ours): the gates' biases make sigmoid(b_h) = e^(-m_h), ALiBi's slopes, so the
    scheme starts as ALiBi plus content noise from the gate weights (nn.Linear's default).
    The gates are ``token_state`` (B, H, T, 1 or 2 log-gates, float32), cached with the keys; the
    bias comes from their cumulative sums c_i = sum_{l <= i} log f_l as c_i - c_j. Cross-attention:
    refused (the memory has no order for the decoder's tokens to forget along).
    """

    card = SchemeCard(
        title="FoX",
        relative=True,
        summary="Σ log f_l over the tokens between key and query, forget gates f = σ(w·x + b) per head",
        paper="lin",
        deviation=("the paper is causal; the encoder adds a second gate set for keys on the right, sum_{l=i..j-1} "
        "log g_l; the gates' biases start at ALiBi's slopes (sigmoid(b_h) = e^(-m_h))"),
        cross_attention="refused",
        reductions=FOX_FAMILY,
        kind="2024–25",
    )

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.state_width = 2 if self.bidirectional else 1
        self.gate = nn.Linear(cfg.d_model, cfg.n_heads * self.state_width)
        rates = torch.exp(-alibi_slopes(cfg.n_heads)).repeat(self.state_width)  # sigmoid(b) = e^(-m)
        with torch.no_grad():
            self.gate.bias.copy_(torch.log(rates / (1 - rates)))

    def token_state(self, x):
        """x: (B, T, D) -> (B, H, T, G) log-gates (G = 1, or 2 in the encoder: forward, backward)."""
        logits = self.gate(x).float()  # (B, T, G * H)
        b, t, _ = logits.shape
        return F.logsigmoid(logits).view(b, t, self.state_width, self.n_heads).permute(0, 3, 1, 2)

    def score_mod(self, q, k, q_pos, k_pos, state):
        """``state_bias`` inside FlexAttention: the gates' cumulative sums (B, H, Tk) looked up per
        (batch, head, query, key) instead of the (B, H, Tq, Tk) difference."""
        shift = state.shape[-2] - len(q_pos)  # queries are the last Tq keys
        forward = state[..., 0].cumsum(-1)
        backward = state[..., 1].cumsum(-1) - state[..., 1] if self.bidirectional else None

        def add_gates(score, b, h, q_idx, kv_idx):
            bias = forward[b, h, q_idx + shift] - forward[b, h, kv_idx]
            if backward is not None:
                later = backward[b, h, kv_idx] - backward[b, h, q_idx + shift]
                bias = torch.where(k_pos[kv_idx] > q_pos[q_idx], later, bias)
            return score + bias

        return add_gates

    def state_bias(self, state, q_pos, k_pos):
        """state: (B, H, Tk, G) -> (B, H, Tq, Tk) float32; queries are the last Tq keys."""
        tq = len(q_pos)
        forward = state[..., 0].cumsum(-1)  # c_j = sum_{l <= j} log f_l
        bias = forward[..., -tq:, None] - forward[..., None, :]  # c_i - c_j: l in (j, i]
        if self.bidirectional:
            backward = state[..., 1].cumsum(-1) - state[..., 1]  # sum_{l < j} log g_l
            later = backward[..., None, :] - backward[..., -tq:, None]  # l in [i, j)
            bias = torch.where(relative_positions(q_pos, k_pos) > 0, later, bias)
        return bias
