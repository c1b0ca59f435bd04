"""What a scheme's pictures read off it (``visualize.py pe``, the explorer, gpu-check): the vectors
``embed`` adds and the score it contributes by offset, read off the hooks of a module on the CPU —
or, for the schemes whose score depends on the content (shaw, nezha, deberta), the profile their
card names."""
from __future__ import annotations

import copy

import torch

from models.positional.base import DistanceProfile, PositionalEncoding


@torch.no_grad()
def embedding_table(pe: PositionalEncoding, n_positions: int) -> torch.Tensor | None:
    """(n_positions, D) the vectors ``pe.embed`` adds at positions 0..n-1 (on the host), or None if
    it adds nothing."""
    device = next((b.device for b in pe.buffers()), None)
    x = torch.zeros(1, n_positions, pe.d_model, device=device)
    table = pe.embed(x, torch.arange(n_positions, device=device))[0]
    return None if torch.count_nonzero(table) == 0 else table.float().cpu()


@torch.no_grad()
def distance_profile(pe: PositionalEncoding, max_distance: int = 64, query: int = 64) -> DistanceProfile:
    """The score contribution of ``pe`` by offset d = key - query (query at ``query``), on the host:
    a module on another device (a run loaded on a GPU) is profiled through a CPU copy of itself,
    since the probes are built on the CPU. What it measures: ``scheme_profile``."""
    if any(t.device.type != "cpu" for t in (*pe.parameters(), *pe.buffers())):
        pe = copy.deepcopy(pe).cpu()
    return scheme_profile(pe, max_distance, query)


def scheme_profile(pe: PositionalEncoding, max_distance: int, query: int) -> DistanceProfile:
    """``distance_profile`` of a module on the CPU: its card's profile, or the hooks' (``hook_profile``)."""
    own = type(pe).card.profile
    return (own or hook_profile)(pe, max_distance, query)


@torch.no_grad()
def hook_profile(pe: PositionalEncoding, max_distance: int, query: int) -> DistanceProfile:
    """The profile read off the hooks of a module on the CPU:

    - an embedding (sinusoidal, learnable): PE(q) · PE(q + d), averaged over 16 query positions;
    - a rotation (rope, xpos): the rotated score of a constant query and key, sum_i cos(d theta_i)
      (times the xPos decay), normalised to 1 at d = 0 (RoFormer §3.4.3's long-term decay);
    - a content-independent bias (alibi, t5, fire, xl's global term): the bias of each head;
      a content-dependent one (dape_*, cope, fox): its bias at zero queries, keys and inputs.
    """
    label = type(pe).card.profile_label
    query = max(query, max_distance)  # keys query + d stay >= 0: a contiguous range
    offsets = torch.arange(-max_distance, max_distance + 1)
    keys = query + offsets
    q_pos = torch.tensor([query])
    table = embedding_table(pe, query + 2 * max_distance + 1)
    if table is not None:
        base = torch.arange(max_distance, max_distance + 16)
        values = torch.stack([(table[base] * table[base + d]).sum(-1).mean() for d in offsets.tolist()])
        return DistanceProfile(offsets, values[None], label or "PE(q) · PE(q + d)")
    ones = torch.ones(1, 1, 1, pe.d_head)
    q, _ = pe.rotate(ones, ones[..., :0, :], q_pos, keys[:0])
    _, k = pe.rotate(ones[..., :0, :], ones.expand(1, 1, len(keys), pe.d_head).contiguous(), q_pos[:0], keys)
    if not torch.equal(q, ones):  # a rotating scheme turned the constant query (another shape: per head, or wider)
        scores = (q * k).sum(-1)[0] / pe.d_head  # (1, L), or (H, L) where each head rotates at its own speeds
        return DistanceProfile(offsets, scores, label or "rotated q · k")
    bias = pe.score_bias(torch.zeros(1, pe.n_heads, 1, pe.d_head), torch.zeros(1, pe.n_heads, len(keys), pe.d_head),
                         q_pos, keys)
    state = pe.token_state(torch.zeros(1, len(keys), pe.d_model))
    if state is not None:  # a gated scheme at zero input: its gates' biases alone
        from_state = pe.state_bias(state, keys, keys)[:, :, query - int(keys[0])][:, :, None]
        bias = from_state if bias is None else bias + from_state
    if bias is not None:
        return DistanceProfile(offsets, bias[0, :, 0].float(), label or "additive logit bias per head")
    return DistanceProfile(offsets, torch.zeros(1, len(offsets)), "no positional term")
