"""Independent references for the science tests, written from the papers' formulas.

Each positional scheme's contribution to attention is spelled out here as loops over heads,
queries and keys (or positions and rotated pairs), and attention itself as plain tensor
arithmetic. Nothing here calls a scheme's hooks, the model's attention or their helpers: the
references read only the modules' parameters (learned tables, MLP weights, projections) and the
options of the config. Everything is computed in float64.

Conventions shared with the model (they are what a checkpoint means, not implementation detail):
positions are 0-based; ``d = j - i`` is key minus query; heads split the model dimension into
consecutive slices; a fused projection holds [queries | keys | values] in that order.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

F64 = torch.float64


def t5_bucket(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """Scalar transcription of the T5 bucketing (Raffel et al. 2020, §2.1) of rel = key - query."""
    n = -rel
    offset = 0
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            offset = num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    exact = num_buckets // 2
    if n < exact:
        return offset + n
    val = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return offset + min(val, num_buckets - 1)


def alibi_slope(h: int, n_heads: int) -> float:
    """ALiBi's slope of head h for a power-of-two number of heads: 2^(-8 (h + 1) / n)."""
    assert n_heads & (n_heads - 1) == 0, "the tests use a power of two"
    return 2.0 ** (-8.0 * (h + 1) / n_heads)


def sinusoid(p: float, dim: int) -> list[float]:
    """[sin(p w_0), cos(p w_0), sin(p w_1), ...], w_m = 10000^(-2m/dim)."""
    out = []
    for m in range(dim // 2):
        angle = p / 10000.0 ** (2 * m / dim)
        out += [math.sin(angle), math.cos(angle)]
    return out


def rotate(x: torch.Tensor, positions: list[int], base: float, zeta: list[float] | None = None,
           scale_base: float = 1.0, sign: int = 1) -> torch.Tensor:
    """RoPE (RoFormer eq. 34) as complex multiplication: the pair (x_2m, x_2m+1) at position p
    times e^{i p theta_m}, theta_m = base^(-2m/Dh); with ``zeta`` (xPos, eq. 6) also times
    zeta_m^(sign p / scale_base). x: (B, H, T, Dh)."""
    x = x.to(F64)
    out = torch.empty_like(x)
    dh = x.size(-1)
    for t, p in enumerate(positions):
        for m in range(dh // 2):
            z = torch.complex(x[..., t, 2 * m], x[..., t, 2 * m + 1])
            z = z * complex(math.cos(p * base ** (-2 * m / dh)), math.sin(p * base ** (-2 * m / dh)))
            if zeta is not None:
                z = z * zeta[m] ** (sign * p / scale_base)
            out[..., t, 2 * m], out[..., t, 2 * m + 1] = z.real, z.imag
    return out


def rotate_per_head(x: torch.Tensor, positions: list[int], speeds: list[list[float]]) -> torch.Tensor:
    """RoPE whose head h turns pair m by p * speeds[h][m] at position p (learned frequencies): the
    pair (x_2m, x_2m+1) of head h times e^{i p speeds[h][m]}. x: (B, H, T, Dh)."""
    x = x.to(F64)
    out = torch.empty_like(x)
    for h, head in enumerate(speeds):
        for t, p in enumerate(positions):
            for m, w in enumerate(head):
                z = torch.complex(x[:, h, t, 2 * m], x[:, h, t, 2 * m + 1]) * complex(math.cos(p * w), math.sin(p * w))
                out[:, h, t, 2 * m], out[:, h, t, 2 * m + 1] = z.real, z.imag
    return out


def mlp(layers: torch.nn.Sequential, x: float) -> list[float]:
    """A 1 -> hidden -> H ReLU MLP evaluated by hand from its weights."""
    first, last = layers[0], layers[2]
    with torch.no_grad():
        return _mlp(first, last, x)


def _mlp(first: torch.nn.Linear, last: torch.nn.Linear, x: float) -> list[float]:
    hidden = [max(0.0, float(first.weight[r, 0]) * x + float(first.bias[r])) for r in range(first.out_features)]
    return [sum(float(last.weight[h, r]) * hidden[r] for r in range(len(hidden))) + float(last.bias[h])
            for h in range(last.out_features)]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def gelu(x: float) -> float:
    """The exact GELU, x Phi(x)."""
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass
class Terms:
    """What a scheme adds to attention: q, k -> rotated q, k; the logit bias (B, H, Tq, Tk) or
    None; the value term probs (B, H, Tq, Tk) -> (B, H, Tq, Dh) or None; the factor under the
    square root of the logit scale. ``logits`` (q, k -> (B, H, Tq, Tk)), when given, replaces
    q.k / sqrt(Dh scale) (a score that is not a dot product of rotated vectors); ``input_bias``
    (the self-attention inputs (B, Tk, D) -> (B, H, Tq, Tk)) is a bias read off the layer's input."""

    rotate: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    bias: Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None]
    value: Callable[[torch.Tensor], torch.Tensor | None]
    scale: float = 1.0
    logits: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    input_bias: Callable[[torch.Tensor], torch.Tensor] | None = None


EMBEDDING_ONLY = ("none", "sinusoidal", "learnable", "shape", "cape")


def scheme_terms(name: str, pe: torch.nn.Module, cfg, kind: str, q_pos: list[int], k_pos: list[int]) -> Terms:
    """The reference ``Terms`` of scheme ``name`` (one registry name or ``a+b``) as the module
    ``pe`` built for ``kind`` from the model config ``cfg`` should apply them."""
    names = name.split("+")
    if kind == "cross" and not cfg.positional.cross_attention:
        names = []
    parts = list(pe.parts) if len(names) > 1 else [pe]
    terms = [_single(n, p, cfg, kind, q_pos, k_pos) for n, p in zip(names, parts)]
    if not terms:
        return _single("none", pe, cfg, kind, q_pos, k_pos)

    def rotate_all(q, k):
        for t in terms:
            q, k = t.rotate(q, k)
        return q, k

    def total(values):
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    assert sum(t.logits is not None for t in terms) <= 1, "two scores that replace the dot product"
    logits = next((t.logits for t in terms if t.logits is not None), None)
    input_biases = [t.input_bias for t in terms if t.input_bias is not None]
    return Terms(rotate_all, lambda q, k: total(t.bias(q, k) for t in terms),
                 lambda probs: total(t.value(probs) for t in terms), max(t.scale for t in terms), logits,
                 (lambda x: total(b(x) for b in input_biases)) if input_biases else None)


def _single(name: str, pe, cfg, kind: str, q_pos: list[int], k_pos: list[int]) -> Terms:
    """The reference ``Terms`` of one registry scheme (``REFERENCES``, keyed as ``SCHEMES`` is)."""
    if name not in REFERENCES:
        raise KeyError(f"no reference for scheme '{name}': write one from its paper")
    return REFERENCES[name](pe, cfg, kind, q_pos, k_pos)


def _identity(q, k):
    return q.to(F64), k.to(F64)


def _nothing(*_):
    return None


def _per_head(cfg, q_pos: list[int], k_pos: list[int], value: Callable[[int, int, int], float]) -> Callable:
    """A bias that depends on (head, query, key) only: (1, H, Tq, Tk)."""
    def bias(q, k):
        out = torch.zeros(1, cfg.n_heads, len(q_pos), len(k_pos), dtype=F64)
        for h in range(cfg.n_heads):
            for a, i in enumerate(q_pos):
                for b, j in enumerate(k_pos):
                    out[0, h, a, b] = value(h, i, j)
        return out
    return bias


def _embedding_only(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """A scheme that adds to the embeddings only: attention untouched."""
    return Terms(_identity, _nothing, _nothing)


def _randomized(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """At evaluation: exactly its base."""
    return _single(cfg.positional.randomized.base, pe.base, cfg, kind, q_pos, k_pos)


def _rope(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """Rotate pair m of q_i by i theta_m, theta_m = base^(-2m/Dh); with learned frequencies, each
    head's own speeds, off the module."""
    if cfg.positional.rope.learn_frequencies:
        speeds = pe.log_frequencies.detach().double().exp().tolist()
        return Terms(lambda q, k: (rotate_per_head(q, q_pos, speeds), rotate_per_head(k, k_pos, speeds)),
                     _nothing, _nothing)
    base = cfg.positional.rope.base
    return Terms(lambda q, k: (rotate(q, q_pos, base, None, 1.0, +1), rotate(k, k_pos, base, None, 1.0, -1)),
                 _nothing, _nothing)


def _xpos(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """RoPE's rotation, q scaled by zeta_m^(i / scale_base) and k by its inverse,
    zeta_m = (2m / Dh + gamma) / (1 + gamma)."""
    opt, dh = cfg.positional.xpos, cfg.d_model // cfg.n_heads
    zeta = [(2 * m / dh + opt.gamma) / (1 + opt.gamma) for m in range(dh // 2)]
    return Terms(lambda q, k: (rotate(q, q_pos, opt.base, zeta, opt.scale_base, +1),
                               rotate(k, k_pos, opt.base, zeta, opt.scale_base, -1)), _nothing, _nothing)


def _alibi(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """-m_h |j - i|."""
    return Terms(_identity, _per_head(cfg, q_pos, k_pos, lambda h, i, j: -alibi_slope(h, cfg.n_heads) * abs(j - i)),
                 _nothing)


def _kerple(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """-r1_h log(1 + r2_h |j - i|), r1, r2 >= 0.01."""
    r1 = [max(r, 1e-2) for r in pe.r1.tolist()]
    r2 = [max(r, 1e-2) for r in pe.r2.tolist()]
    return Terms(_identity, _per_head(cfg, q_pos, k_pos, lambda h, i, j: -r1[h] * math.log(1 + r2[h] * abs(j - i))),
                 _nothing)


def _t5(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """b[bucket(j - i), h], the buckets one-sided in the decoder's self-attention."""
    opt, table, bidirectional = cfg.positional.t5, pe.bias.weight.detach(), kind != "decoder"
    return Terms(_identity, _per_head(cfg, q_pos, k_pos, lambda h, i, j: float(table[t5_bucket(
        j - i, bidirectional, opt.num_buckets, opt.max_distance), h])), _nothing)


def _fire(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """f(sign(i - j) psi(|i - j|) / psi(max(L, i + 1))), psi(x) = log(c x + 1)."""
    c, threshold = math.exp(pe.log_c.item()), math.exp(pe.log_threshold.item())

    def psi(x: float) -> float:
        return math.log(c * x + 1)

    def fire(h, i, j):
        d = i - j
        sign = (d > 0) - (d < 0)
        return mlp(pe.mlp, sign * psi(abs(d)) / psi(max(threshold, i + 1)))[h]

    cache: dict[tuple[int, int], list[float]] = {}
    return Terms(_identity, _per_head(cfg, q_pos, k_pos, lambda h, i, j: cache.setdefault(
        (i, j), [fire(g, i, j) for g in range(cfg.n_heads)])[h]), _nothing)


def _relative_rows(cfg, q_pos: list[int], k_pos: list[int], kmax: int, key_rows: dict,
                   value_rows: dict | None) -> Terms:
    """q_i . a^K_ij / sqrt(Dh) on the logits; sum_j p_ij a^V_ij on the output (a_ij: the row of the
    distance j - i clipped to +-kmax; no value term without ``value_rows``)."""
    n_heads, dh, tq, tk = cfg.n_heads, cfg.d_model // cfg.n_heads, len(q_pos), len(k_pos)

    def clip(d):
        return max(-kmax, min(kmax, d))

    def bias(q, k):
        out = torch.zeros(q.size(0), n_heads, tq, tk, dtype=F64)
        for a, i in enumerate(q_pos):
            for b, j in enumerate(k_pos):
                out[:, :, a, b] = (q[:, :, a].to(F64) * key_rows[clip(j - i)]).sum(-1) / math.sqrt(dh)
        return out

    def value(probs):
        if value_rows is None:
            return None
        out = torch.zeros(*probs.shape[:3], dh, dtype=F64)
        for a, i in enumerate(q_pos):
            for b, j in enumerate(k_pos):
                out[:, :, a] += probs[:, :, a, b, None].to(F64) * value_rows[clip(j - i)]
        return out

    return Terms(_identity, bias, value)


def _shaw(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """Shaw et al.: learned key (and value) rows of the clipped distance."""
    opt = cfg.positional.shaw
    kmax = opt.max_distance
    key_rows = {d: pe.key_table[d + kmax].detach().to(F64) for d in range(-kmax, kmax + 1)}
    value_rows = {d: pe.value_table[d + kmax].detach().to(F64) for d in range(-kmax, kmax + 1)} if opt.values else None
    return _relative_rows(cfg, q_pos, k_pos, kmax, key_rows, value_rows)


def _nezha(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """NEZHA: Shaw's rows as fixed sinusoids of the clipped distance."""
    opt, dh = cfg.positional.nezha, cfg.d_model // cfg.n_heads
    kmax = opt.max_distance
    rows = {d: torch.tensor(sinusoid(d, dh), dtype=F64) for d in range(-kmax, kmax + 1)}
    return _relative_rows(cfg, q_pos, k_pos, kmax, rows, rows if opt.values else None)


def _xl(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """((q_i + v) . W_R R_{i-j} + u . k_j) / sqrt(Dh)."""
    n_heads, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    w_r, u, v = pe.w_r.weight.detach().to(F64), pe.u.detach().to(F64), pe.v.detach().to(F64)

    def bias(q, k):
        out = torch.zeros(q.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for a, i in enumerate(q_pos):
            for b, j in enumerate(k_pos):
                r = (w_r @ torch.tensor(sinusoid(i - j, cfg.d_model), dtype=F64)).view(n_heads, dh)
                out[:, :, a, b] = (((q[:, :, a].to(F64) + v) * r).sum(-1)
                                   + (u * k[:, :, b].to(F64)).sum(-1)) / math.sqrt(dh)
        return out

    return Terms(_identity, bias, _nothing)


def _deberta(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """(q_i . Kr[delta(i, j)] + k_j . Qr[delta(j, i)]) / sqrt(3 Dh)."""
    n_heads, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    span = cfg.positional.deberta.max_distance
    table = pe.table.detach().to(F64)
    k_r = (table @ pe.w_kr.weight.detach().to(F64).T + pe.w_kr.bias.detach().to(F64)).view(-1, n_heads, dh)
    q_r = (table @ pe.w_qr.weight.detach().to(F64).T + pe.w_qr.bias.detach().to(F64)).view(-1, n_heads, dh)

    def delta(a, b):
        return max(0, min(2 * span - 1, a - b + span))

    def bias(q, k):
        out = torch.zeros(q.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for a, i in enumerate(q_pos):
            for b, j in enumerate(k_pos):
                out[:, :, a, b] = ((q[:, :, a].to(F64) * k_r[delta(i, j)]).sum(-1)
                                   + (k[:, :, b].to(F64) * q_r[delta(j, i)]).sum(-1)) / math.sqrt(3 * dh)
        return out

    return Terms(_identity, bias, _nothing, scale=3.0)


def _p_rope(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """RoPE's rotation with the angles of pairs m >= round(p Dh/2) (the lowest frequencies) set to 0;
    with train_length L (HoPE) the pairs kept are those with theta_m = base^(-2m/Dh) >= 2 pi / L."""
    opt, dh = cfg.positional.p_rope, cfg.d_model // cfg.n_heads
    kept = round(opt.p * (dh // 2))
    if opt.train_length:
        kept = sum(opt.base ** (-2 * m / dh) >= 2 * math.pi / opt.train_length for m in range(dh // 2))

    def partial(x, positions):
        rotated = rotate(x, positions, opt.base)
        for m in range(kept, dh // 2):  # not rotated: the input as it is
            rotated[..., 2 * m:2 * m + 2] = x[..., 2 * m:2 * m + 2].to(F64)
        return rotated

    return Terms(lambda q, k: (partial(q, q_pos), partial(k, k_pos)), _nothing, _nothing)


def _fope(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """FoPE (Hua et al. 2025, §4): pair d < K of head h turned by the series C = sum_k c[h,k,d]
    cos(w_k n), S = sum_k s[h,k,d] sin(w_k n) over the K frequencies w_k = base^(-2k/Dh) that complete
    a period within L positions (w_k >= 2 pi / L; all of them for L = 0): (x1 C - x2 S, x1 S + x2 C);
    pairs d >= K untouched. The coefficients read off the module."""
    opt, dh, n_heads = cfg.positional.fope, cfg.d_model // cfg.n_heads, cfg.n_heads
    omegas = [opt.base ** (-2 * k / dh) for k in range(dh // 2)]
    kept = [w for w in omegas if not opt.train_length or w >= 2 * math.pi / opt.train_length]
    c, s = pe.cos_coefficients.detach().double().tolist(), pe.sin_coefficients.detach().double().tolist()

    def series(x, positions):
        x = x.to(F64)
        out = x.clone()
        for h in range(n_heads):
            for t, n in enumerate(positions):
                for d in range(len(kept)):
                    cc = sum(c[h][k][d] * math.cos(w * n) for k, w in enumerate(kept))
                    ss = sum(s[h][k][d] * math.sin(w * n) for k, w in enumerate(kept))
                    x1, x2 = x[:, h, t, 2 * d], x[:, h, t, 2 * d + 1]
                    out[:, h, t, 2 * d], out[:, h, t, 2 * d + 1] = x1 * cc - x2 * ss, x1 * ss + x2 * cc
        return out

    return Terms(lambda q, k: (series(q, q_pos), series(k, k_pos)), _nothing, _nothing)


def _polar(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """PoPE: sum_c softplus(q_c) softplus(k_c) cos((t - s) theta_c + delta_hc) / sqrt(Dh),
    theta_c = base^(-c/Dh), delta clamped to [-2 pi, 0]."""
    dh, n_heads, base = cfg.d_model // cfg.n_heads, cfg.n_heads, cfg.positional.polar.base
    delta = [[min(0.0, max(-2 * math.pi, float(v))) for v in row] for row in pe.phase_bias.detach()]

    def softplus(v: float) -> float:
        return math.log1p(math.exp(v))

    def logits(q, k):
        out = torch.zeros(q.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for b in range(q.size(0)):
            for h in range(n_heads):
                for a, t in enumerate(q_pos):
                    for c_, s_ in enumerate(k_pos):
                        out[b, h, a, c_] = sum(
                            softplus(float(q[b, h, a, c])) * softplus(float(k[b, h, c_, c]))
                            * math.cos((t - s_) * base ** (-c / dh) + delta[h][c]) for c in range(dh)) / math.sqrt(dh)
        return out

    return Terms(_identity, _nothing, _nothing, logits=logits)


def _fox(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """sum_{l=j+1..i} log f_l (j <= i) and, in the encoder, sum_{l=i..j-1} log g_l (j > i); f_l of
    head h = sigmoid(row h of the gate projection . x_l), g_l = sigmoid(row H + h . x_l)."""
    n_heads = cfg.n_heads

    def input_bias(x):
        gates = linear(pe.gate, x)  # (B, Tk, G H)
        out = torch.zeros(x.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for b in range(x.size(0)):
            for h in range(n_heads):
                for a, i in enumerate(q_pos):
                    for c, j in enumerate(k_pos):
                        if j <= i:
                            out[b, h, a, c] = sum(math.log(sigmoid(float(gates[b, k_pos.index(t), h])))
                                                  for t in range(j + 1, i + 1))
                        elif kind == "encoder":
                            out[b, h, a, c] = sum(math.log(sigmoid(float(gates[b, k_pos.index(t), n_heads + h])))
                                                  for t in range(i, j))
        return out

    return Terms(_identity, _nothing, _nothing, input_bias=input_bias)


def _dape(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """B + MLP([A; B]) per (i, j): A = q.k / sqrt(Dh), B the base's reference bias, the MLP
    Linear(2H, hidden) -> GELU -> Linear(hidden, H) evaluated by hand."""
    n_heads, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    base = _single(type(pe).base_name, pe.base, cfg, kind, q_pos, k_pos)
    first, last = pe.mix[0], pe.mix[2]
    w1, b1 = first.weight.detach().to(F64), first.bias.detach().to(F64)
    w2, b2 = last.weight.detach().to(F64), last.bias.detach().to(F64)

    def bias(q, k):
        fixed = base.bias(q, k).expand(q.size(0), -1, -1, -1)
        out = torch.zeros(q.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for b in range(q.size(0)):
            for a in range(len(q_pos)):
                for c in range(len(k_pos)):
                    inputs = [float((q[b, h, a].to(F64) * k[b, h, c].to(F64)).sum()) / math.sqrt(dh)
                              for h in range(n_heads)] + [float(fixed[b, h, a, c]) for h in range(n_heads)]
                    hidden = [gelu(sum(float(w1[r, n]) * inputs[n] for n in range(2 * n_heads)) + float(b1[r]))
                              for r in range(w1.size(0))]
                    for h in range(n_heads):
                        out[b, h, a, c] = (float(fixed[b, h, a, c]) + float(b2[h])
                                           + sum(float(w2[h, r]) * hidden[r] for r in range(len(hidden))))
        return out

    return Terms(_identity, bias, _nothing)


def _cope(pe, cfg, kind, q_pos, k_pos) -> Terms:
    """p_ij = sum of sigmoid(q_i . k_t / sqrt(Dh)) over the keys t from j to i (and, in the
    encoder, from i to j when j > i), clamped to P - 1; bias = q_i . e[p] interpolated linearly
    between e[floor p] and e[ceil p]."""
    n_heads, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    table = pe.table.detach().to(F64)
    top = table.size(0) - 1

    def bias(q, k):
        q, k = q.to(F64), k.to(F64)
        out = torch.zeros(q.size(0), n_heads, len(q_pos), len(k_pos), dtype=F64)
        for b in range(q.size(0)):
            for h in range(n_heads):
                for a, i in enumerate(q_pos):
                    for c, j in enumerate(k_pos):
                        if j > i and kind != "encoder":
                            continue
                        between = [t for t, p in enumerate(k_pos) if min(i, j) <= p <= max(i, j)]
                        p = min(float(top), sum(sigmoid(float((q[b, h, a] * k[b, h, t]).sum()) / math.sqrt(dh))
                                                for t in between))
                        low, high = math.floor(p), math.ceil(p)
                        out[b, h, a, c] = ((1 - (p - low)) * float((q[b, h, a] * table[low]).sum())
                                           + (p - low) * float((q[b, h, a] * table[high]).sum()))
        return out

    return Terms(_identity, bias, _nothing)


# scheme -> its reference, (module, model config, attention kind, query positions, key positions) ->
# Terms; keyed as models.positional.SCHEMES is (tests/models/test_attention.py checks that each has one)
REFERENCES: dict[str, Callable[..., Terms]] = {
    **dict.fromkeys(EMBEDDING_ONLY, _embedding_only), "randomized": _randomized, "rope": _rope, "xpos": _xpos,
    "alibi": _alibi, "kerple": _kerple, "t5": _t5, "fire": _fire, "shaw": _shaw, "nezha": _nezha, "xl": _xl,
    "deberta": _deberta, "p_rope": _p_rope, "fope": _fope, "polar": _polar, "fox": _fox, "dape_alibi": _dape,
    "dape_kerple": _dape, "dape_fire": _dape, "cope": _cope}


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return x.to(F64) @ layer.weight.detach().to(F64).T + layer.bias.detach().to(F64)


def reference_attention(att, terms: Terms, x: torch.Tensor, memory: torch.Tensor | None,
                        q_pos: list[int], k_pos: list[int], key_padding: torch.Tensor | None,
                        causal: bool, ssmax: list[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q.k^T / sqrt(Dh scale) + bias + mask) . v + value term, projected out.

    x: (B, Tq, D) queries' inputs; memory: (B, Tk, D) for cross-attention (else keys come from
    x); key_padding: (B, Tk) True at padding. ``ssmax``: each head's s of Scalable-Softmax
    (Nakanishi 2025), softmax((s_h ln n) z) with z the logits and n the keys the query may see.
    Returns (output (B, Tq, D), weights (B, H, Tq, Tk)).
    """
    d, n_heads = att.d_model, att.n_heads
    dh = d // n_heads

    def heads(t):  # (B, T, D) -> (B, H, T, Dh)
        return t.view(t.size(0), t.size(1), n_heads, dh).transpose(1, 2)

    if memory is not None:
        q, kv = linear(att.q_proj, x), linear(att.kv_proj, memory)
        k, v = kv[..., :d], kv[..., d:]
    else:
        qkv = linear(att.qkv_proj, x)
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
    q, k, v = heads(q), heads(k), heads(v)
    if terms.logits is not None:
        logits = terms.logits(q, k)
    else:
        q, k = terms.rotate(q, k)
        logits = q @ k.transpose(-1, -2) / math.sqrt(dh * terms.scale)
    bias = terms.bias(q, k)
    if bias is not None:
        logits = logits + bias
    if terms.input_bias is not None:
        assert memory is None, "a bias from the layer's input acts in self-attention"
        logits = logits + terms.input_bias(x)
    hidden = torch.zeros(logits.shape, dtype=torch.bool)
    if causal:
        for a, i in enumerate(q_pos):
            for b, j in enumerate(k_pos):
                hidden[:, :, a, b] = j > i
    if key_padding is not None:
        hidden |= key_padding[:, None, None, :]
    if ssmax is not None:
        for h, s in enumerate(ssmax):
            for b in range(logits.size(0)):
                for a in range(logits.size(2)):
                    seen = int((~hidden[b, h, a]).sum())
                    logits[b, h, a] = logits[b, h, a] * (s * math.log(seen))
    probs = torch.softmax(logits.masked_fill(hidden, float("-inf")), dim=-1)
    out = probs @ v
    extra = terms.value(probs)
    if extra is not None:
        out = out + extra
    out = out.transpose(1, 2).reshape(x.size(0), len(q_pos), d)
    return linear(att.out_proj, out), probs
