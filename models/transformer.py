"""Encoder-decoder Transformer (Vaswani et al. 2017) written from scratch, with pluggable
positional encodings and an incremental decoding cache.

Shapes: ``src`` (B, S) and ``tgt`` (B, T) token ids, encoder states (B, S, D), padding mask
(B, S) True at source padding, logits (B, T, V).

Values, not module state: ``encode(src) -> EncoderOutput`` (states, padding mask, weights on
request); ``decode(tgt, cache) -> DecoderOutput`` (logits, the grown cache, weights on request).
A ``DecoderCache`` carries the encoder output, per layer the self-attention keys/values (grown
each step) and the cross-attention keys/values (computed at the first step), and the number of
target positions seen. Once the cross-attention keys/values exist the cache lets go of the
encoder states (``EncoderOutput.states`` is then None): the padding mask is all decoding needs
of them from then on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from models.attention import KV, MultiHeadAttention
from models.config import ModelConfig
from models.dropout import Dropout
from models.positional import build_positional
from models.positional.base import NoPositional, PositionalEncoding, lengths_scaled
from models.positional.frequency_scaling import sentence_factor
from utils.errors import UserError


@dataclass
class EncoderOutput:
    """states (B, S, D), or None once a cache holds the cross-attention keys/values;
    padding_mask (B, S) True at padding; weights: per layer (B, H, S, S) when asked for."""

    states: torch.Tensor | None
    padding_mask: torch.Tensor
    weights: list[torch.Tensor] | None = None

    @property
    def source_length(self) -> int:
        return self.padding_mask.size(1)

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of real (non-padding) source tokens."""
        return (~self.padding_mask).sum(1)

    def select(self, index: torch.Tensor) -> EncoderOutput:
        """The rows ``index`` (B',) of the batch (repeat a row to give several hypotheses its source)."""
        states = None if self.states is None else self.states.index_select(0, index)
        return EncoderOutput(states, self.padding_mask.index_select(0, index))


@dataclass
class DecoderCache:
    """Per decoder layer: self-attention K/V (B, H, t, Dh) (and the scheme's token states) and
    cross-attention K/V (B / group, H, S, Dh) (None before the first step), the encoder output (B / group rows), ``length`` = target
    positions seen, and ``group``: how many consecutive decoder rows share one memory row (beam
    search's K hypotheses of a sentence; 1 otherwise), so the source's keys and values are held and
    read once per sentence, not once per hypothesis."""

    memory: EncoderOutput
    self_kv: list[KV | None]
    cross_kv: list[KV | None]
    length: int = 0
    group: int = 1

    @classmethod
    def start(cls, memory: EncoderOutput, n_layers: int, group: int = 1) -> DecoderCache:
        """An empty cache over ``memory``: decoding with it from position 0."""
        return cls(memory, [None] * n_layers, [None] * n_layers, 0, group)

    def reorder(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> DecoderCache:
        """Select decoder rows ``index`` (B',) (greedy search: live sentences; beam search:
        surviving hypotheses). The memory rows and cross-attention keys/values follow
        ``memory_index``; without it they stay as they are when rows are grouped (beam search, while
        no sentence left the batch) and follow ``index`` otherwise."""
        if memory_index is None and self.group == 1:
            memory_index = index

        def pick(kv: KV | None, rows: torch.Tensor) -> KV | None:
            return None if kv is None else tuple(t.index_select(0, rows) for t in kv)

        if memory_index is None:
            memory, cross = self.memory, list(self.cross_kv)
        else:
            memory, cross = self.memory.select(memory_index), [pick(kv, memory_index) for kv in self.cross_kv]
        return DecoderCache(memory, [pick(kv, index) for kv in self.self_kv], cross, self.length, self.group)


@dataclass
class DecoderOutput:
    """logits (B, T_new, V); the cache after these positions; weights when asked for:
    {"decoder": per layer (B, H, T_new, T_total), "cross": per layer (B, H, T_new, S)}."""

    logits: torch.Tensor
    cache: DecoderCache
    weights: dict[str, list[torch.Tensor]] | None = None


ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}  # model.activation (silu: Marian's "swish")


class FeedForward(nn.Module):
    """Position-wise Linear(D, d_ff) -> activation -> dropout -> Linear(d_ff, D)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.act = ACTIVATIONS[activation]
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.act(self.fc1(x))))


class Sublayer(nn.Module):
    """Residual connection around a sublayer with post-norm (paper) or pre-norm placement."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, fn):
        """fn maps the (normalised, for pre-norm) input to (output, *extras); extras pass through."""
        out, *extras = fn(self.norm(x) if self.norm_first else x)
        x = x + self.dropout(out)
        return (x if self.norm_first else self.norm(x)), *extras


def logn_train(cfg: ModelConfig, side: str) -> int | None:
    """n_train of log-n scaling for attention over ``side``'s keys ("source" or "target"), None when
    off; unknown training lengths are a one-line error."""
    return cfg.length_scaling.train_tokens(side, "logn") if cfg.length_scaling.logn else None


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, kernel=cfg.attention_kernel,
                                            logn_train=logn_train(cfg, "source"), softmax=cfg.softmax)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.attn_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ff_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first)

    def forward(self, x, pe, pos, pad_mask, need_weights=False):
        """x: (B, S, D) -> (B, S, D), weights (B, H, S, S) or None."""
        x, _, w = self.attn_block(x, lambda h: self.self_attn(
            h, pe, pos, pos, key_padding_mask=pad_mask, need_weights=need_weights))
        x, = self.ff_block(x, lambda h: (self.ff(h),))
        return x, w


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, kernel=cfg.attention_kernel,
                                            logn_train=logn_train(cfg, "target"), softmax=cfg.softmax)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, cross=True,
                                             kernel=cfg.attention_kernel, logn_train=logn_train(cfg, "source"), softmax=cfg.softmax)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.self_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.cross_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ff_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first)

    def forward(self, x, memory, memory_mask, self_pe, cross_pe, q_pos, k_pos, mem_pos,
                past_self=None, past_cross=None, need_weights=False, group=1):
        """x: (B, T, D) new positions q_pos -> (B, T, D), new self K/V, cross K/V, weights
        (``group``: rows of x per memory row, see ``DecoderCache``)."""
        x, self_kv, w_self = self.self_block(x, lambda h: self.self_attn(
            h, self_pe, q_pos, k_pos, causal=True, past=past_self, need_weights=need_weights))
        x, cross_kv, w_cross = self.cross_block(x, lambda h: self.cross_attn(
            h, cross_pe, q_pos, mem_pos, memory=memory, key_padding_mask=memory_mask,
            past=past_cross, need_weights=need_weights, group=group))
        x, = self.ff_block(x, lambda h: (self.ff(h),))
        return x, self_kv, cross_kv, (w_self, w_cross)


class Transformer(nn.Module):
    """Encoder-decoder Transformer; see the module docstring for shapes and the cache."""

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, pad_id: int = 0,
                 joint_vocab: bool = False):
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        d = cfg.d_model
        self.src_embed = nn.Embedding(src_vocab_size, d, padding_idx=pad_id)
        share_src_tgt = cfg.tie_embeddings and joint_vocab and src_vocab_size == tgt_vocab_size
        self.tgt_embed = self.src_embed if share_src_tgt else nn.Embedding(tgt_vocab_size, d, padding_idx=pad_id)
        self.output = nn.Linear(d, tgt_vocab_size, bias=False)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if cfg.norm_first else nn.Identity()
        self.dropout = Dropout(cfg.dropout)
        self.embed_scale = math.sqrt(d)
        self._init_weights()
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embed.weight
        # Built after the initialisation above, which therefore never touches PE parameters.
        self.encoder_pe = build_positional(cfg, "encoder")
        self.decoder_pe = build_positional(cfg, "decoder")
        self.cross_pe = build_positional(cfg, "cross")
        # hybrid layers: every k-th self-attention layer sees no positions (NoPE); no state of their own
        self.encoder_nope, self.decoder_nope = (NoPositional(kind, d, cfg.n_heads) for kind in ("encoder", "decoder"))
        scaling = cfg.length_scaling
        self._factor_train = scaling.train_tokens("source", f"rotary={scaling.rotary}") if scaling.rotary != "none" else None

    def _init_weights(self) -> None:
        """Xavier-uniform projections with zero biases; N(0, D^-1/2) embeddings, zero pad row
        (fairseq's Transformer initialisation)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, self.cfg.d_model ** -0.5)
                with torch.no_grad():
                    module.weight[self.pad_id].zero_()

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, pe: PositionalEncoding,
               pos: torch.Tensor) -> torch.Tensor:
        return self.dropout(pe.embed(table(ids) * self.embed_scale, pos))

    @staticmethod
    def positions(pe: PositionalEncoding, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """(stop - start,) positions start..stop-1 on ``device``, checked on the host against the
        scheme's ``position_limit`` (a learned table's size): one error naming the maximum."""
        limit = pe.position_limit
        if limit is not None and stop > limit:
            raise UserError(f"position {stop - 1} is past the {pe.kind}'s learned position table "
                            f"(max_positions={limit}, positions 0..{limit - 1}); "
                            f"raise model.positional.max_positions or shorten the input")
        return torch.arange(start, stop, device=device)

    def length_factor(self, padding_mask: torch.Tensor) -> torch.Tensor | None:
        """(B,) each sentence's factor s = max(1, source tokens / longest training source) of test-time
        rotary frequency scaling, from its source padding mask (B, S); None without that setting."""
        if self._factor_train is None:
            return None
        return sentence_factor(padding_mask, self._factor_train)

    def layer_pe(self, layer: int, pe: PositionalEncoding, nope: PositionalEncoding) -> PositionalEncoding:
        """The positional module of self-attention layer ``layer`` (0-based) of a stack: the stack's
        ``pe``, or ``nope`` in the hybrid layers' NoPE layers (every ``nope_every``-th)."""
        every = self.cfg.positional.nope_every
        return nope if every and (layer + 1) % every == 0 else pe

    def encode(self, src: torch.Tensor, need_weights: bool = False) -> EncoderOutput:
        """src: (B, S) -> EncoderOutput (states (B, S, D), padding mask, per-layer weights on request)."""
        pad_mask = src.eq(self.pad_id)
        pos = self.positions(self.encoder_pe, 0, src.size(1), src.device)
        if self.training:
            pos = self.encoder_pe.training_positions(pos)
        x = self._embed(self.src_embed, src, self.encoder_pe, pos)
        weights = []
        with lengths_scaled(self.encoder_pe, self.length_factor(pad_mask)):
            for i, layer in enumerate(self.encoder_layers):
                x, w = layer(x, self.layer_pe(i, self.encoder_pe, self.encoder_nope), pos, pad_mask, need_weights)
                weights.append(w)
        return EncoderOutput(self.encoder_norm(x), pad_mask, weights if need_weights else None)

    def start_decoding(self, memory: EncoderOutput, group: int = 1) -> DecoderCache:
        """An empty cache over the encoder output (decoding starts at target position 0); with
        ``group`` G, each memory row serves G consecutive decoder rows (``DecoderCache``)."""
        return DecoderCache.start(memory, len(self.decoder_layers), group)

    def decode(self, tgt: torch.Tensor, cache: DecoderCache, need_weights: bool = False) -> DecoderOutput:
        """tgt: (B, T_new) target ids at positions cache.length ... cache.length + T_new - 1.

        Returns the logits of these positions and the grown cache (see ``DecoderOutput``). Without
        a cache to grow, pass ``start_decoding(memory)`` with the whole prefix each time.
        """
        states, cache, weights = self._decoder_states(tgt, cache, need_weights)
        return DecoderOutput(self.project(states), cache, weights)

    def project(self, states: torch.Tensor) -> torch.Tensor:
        """Logits (..., V) of decoder states (..., D): ``self.output``. When no gradient is recorded
        on a CPU, through a contiguous copy of the weight's transpose (D, V), which the CPU's
        matrix product reads faster than the transposed view (measured ~20% for a decoding step's
        64 x 256 x 8,000 product); the copy is made again whenever the weight changes."""
        weight = self.output.weight
        if torch.is_grad_enabled() or states.device.type != "cpu":
            return self.output(states)
        key = (weight.data_ptr(), weight._version, weight.dtype)
        if getattr(self, "_output_t_key", None) != key:
            self._output_t, self._output_t_key = weight.detach().t().contiguous(), key
        return torch.matmul(states, self._output_t.to(states.dtype))

    def _decoder_states(self, tgt: torch.Tensor, cache: DecoderCache, need_weights: bool = False
                        ) -> tuple[torch.Tensor, DecoderCache, dict[str, list[torch.Tensor]] | None]:
        """``decode`` up to the output projection: final decoder states (B, T_new, D), the grown
        cache, the weights on request."""
        memory = cache.memory
        start, device = cache.length, tgt.device
        q_pos = self.positions(self.decoder_pe, start, start + tgt.size(1), device)
        k_pos = torch.arange(start + tgt.size(1), device=device)
        if self.training and start == 0:  # teacher forcing: the whole target at once
            q_pos = k_pos = self.decoder_pe.training_positions(q_pos)
        mem_pos = torch.arange(memory.source_length, device=device)
        x = self._embed(self.tgt_embed, tgt, self.decoder_pe, q_pos)
        new_self, new_cross, weights = [], [], {"decoder": [], "cross": []}
        factor = self.length_factor(memory.padding_mask)  # (B / group,): one per memory row
        rows = factor if factor is None or cache.group == 1 else factor.repeat_interleave(cache.group)
        with lengths_scaled(self.decoder_pe, rows), lengths_scaled(self.cross_pe, factor):
            for i, layer in enumerate(self.decoder_layers):
                x, self_kv, cross_kv, (w_self, w_cross) = layer(
                    x, memory.states, memory.padding_mask, self.layer_pe(i, self.decoder_pe, self.decoder_nope),
                    self.cross_pe, q_pos, k_pos, mem_pos, cache.self_kv[i], cache.cross_kv[i], need_weights, cache.group)
                new_self.append(self_kv)
                new_cross.append(cross_kv)
                weights["decoder"].append(w_self)
                weights["cross"].append(w_cross)
        # The cross-attention keys/values now hold what decoding needs of the encoder states.
        cache = DecoderCache(replace(memory, states=None, weights=None), new_self, new_cross, start + tgt.size(1),
                             cache.group)
        return self.decoder_norm(x), cache, weights if need_weights else None

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, features_only: bool = False) -> torch.Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V); with ``features_only``
        the final decoder states (B, T, D) instead, the input of ``self.output`` (the training
        loss projects only the real tokens' states: ``training.loss``)."""
        cache = self.start_decoding(self.encode(src))
        if features_only:
            return self._decoder_states(tgt_in, cache)[0]
        return self.decode(tgt_in, cache).logits
