"""Our Transformer's weights under MarianMT's / Pegasus's parameter names, both ways.

Our sinusoids interleave sin and cos along the model dimension (2i, 2i + 1); theirs hold all
sines, then all cosines (i, D/2 + i). Permuting the model dimension in every weight that reads or
writes the residual stream, the LayerNorms and the embeddings turns one into the other and changes
no result (LayerNorm is indifferent to the order of its dimensions; each product only sums in
another order). Our fused QKV (self) and KV (cross) projections are split into their q, k and v.
``native_state_dict`` maps ours to theirs (``nmt export --format hf``); ``load_native_state_dict``
the other way (a `transformers` Marian model scored as a row): every entry of theirs is a plain
index copy of one of ours, so the inverse is read off the forward map (``_sources``), not written
a second time.
"""
from __future__ import annotations

import copy

import torch

from models.transformer import Transformer


def model_permutation(d_model: int) -> torch.Tensor:
    """(D,) the index into our model dimension of each of theirs: their i < D/2 is our 2i (a sine),
    their D/2 + i our 2i + 1 (its cosine)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _reads(weight: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """A projection (out, D) that reads the residual stream, its input columns in their order."""
    return weight[:, perm]


def _attention(prefix: str, attention, perm: torch.Tensor, out: dict[str, torch.Tensor]) -> None:
    """Our attention's projections as theirs: Q, K, V split from the fused ones (rows: the heads'
    dimensions, untouched), each reading the permuted stream; the output projection writing it."""
    d = attention.d_model
    if attention.cross:
        weights = [attention.q_proj.weight, *attention.kv_proj.weight.split(d)]
        biases = [attention.q_proj.bias, *attention.kv_proj.bias.split(d)]
    else:
        weights, biases = attention.qkv_proj.weight.split(d), attention.qkv_proj.bias.split(d)
    for name, weight, bias in zip(("q_proj", "k_proj", "v_proj"), weights, biases):
        out[f"{prefix}.{name}.weight"], out[f"{prefix}.{name}.bias"] = _reads(weight, perm), bias
    out[f"{prefix}.out_proj.weight"] = attention.out_proj.weight[perm]
    out[f"{prefix}.out_proj.bias"] = attention.out_proj.bias[perm]


def _norm(prefix: str, norm: torch.nn.LayerNorm, perm: torch.Tensor, out: dict[str, torch.Tensor]) -> None:
    out[f"{prefix}.weight"], out[f"{prefix}.bias"] = norm.weight[perm], norm.bias[perm]


def _feed_forward(prefix: str, ff, perm: torch.Tensor, out: dict[str, torch.Tensor]) -> None:
    out[f"{prefix}.fc1.weight"], out[f"{prefix}.fc1.bias"] = _reads(ff.fc1.weight, perm), ff.fc1.bias
    out[f"{prefix}.fc2.weight"], out[f"{prefix}.fc2.bias"] = ff.fc2.weight[perm], ff.fc2.bias[perm]


@torch.no_grad()
def native_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under MarianMT's / Pegasus's names (``model.…``, ``lm_head.weight``), the model
    dimension permuted (``model_permutation``); the sinusoids are theirs to compute, not weights."""
    perm = model_permutation(model.cfg.d_model)
    out: dict[str, torch.Tensor] = {"model.shared.weight": model.src_embed.weight[:, perm]}
    for i, layer in enumerate(model.encoder_layers):
        prefix = f"model.encoder.layers.{i}"
        _attention(f"{prefix}.self_attn", layer.self_attn, perm, out)
        _norm(f"{prefix}.self_attn_layer_norm", layer.attn_block.norm, perm, out)
        _feed_forward(prefix, layer.ff, perm, out)
        _norm(f"{prefix}.final_layer_norm", layer.ff_block.norm, perm, out)
    for i, layer in enumerate(model.decoder_layers):
        prefix = f"model.decoder.layers.{i}"
        _attention(f"{prefix}.self_attn", layer.self_attn, perm, out)
        _norm(f"{prefix}.self_attn_layer_norm", layer.self_block.norm, perm, out)
        _attention(f"{prefix}.encoder_attn", layer.cross_attn, perm, out)
        _norm(f"{prefix}.encoder_attn_layer_norm", layer.cross_block.norm, perm, out)
        _feed_forward(prefix, layer.ff, perm, out)
        _norm(f"{prefix}.final_layer_norm", layer.ff_block.norm, perm, out)
    if model.cfg.norm_first:  # Pegasus: the stacks' final LayerNorms
        _norm("model.encoder.layer_norm", model.encoder_norm, perm, out)
        _norm("model.decoder.layer_norm", model.decoder_norm, perm, out)
    out["model.encoder.embed_tokens.weight"] = out["model.decoder.embed_tokens.weight"] = out["model.shared.weight"]
    out["lm_head.weight"] = out["model.shared.weight"]
    return {name: tensor.detach().clone().contiguous() for name, tensor in out.items()}


@torch.no_grad()
def _sources(model: Transformer) -> dict[str, torch.Tensor]:
    """For each entry of ``native_state_dict(model)``, the flat index into the concatenation of
    ``model``'s parameters that each of its elements copies (int64 of the entry's shape)."""
    probe = copy.deepcopy(model).to("cpu", torch.float64)
    start = 0
    for parameter in probe.parameters():  # each parameter once, tied ones included
        parameter.copy_(torch.arange(start, start + parameter.numel(), dtype=torch.float64).view_as(parameter))
        start += parameter.numel()
    return {name: tensor.round().long() for name, tensor in native_state_dict(probe).items()}


@torch.no_grad()
def load_native_state_dict(model: Transformer, theirs: dict[str, torch.Tensor]) -> None:
    """Fill ``model``'s parameters from MarianMT's / Pegasus's state dict ``theirs`` (the inverse of
    ``native_state_dict``); an entry ``model`` needs that ``theirs`` lacks, or a parameter element no
    entry reaches, is a ``ValueError`` naming it."""
    parameters = list(model.parameters())
    flat = torch.full((sum(p.numel() for p in parameters),), float("nan"), dtype=torch.float64)
    for name, index in _sources(model).items():
        if name not in theirs:
            raise ValueError(f"the state dict has no {name}")
        flat[index.flatten()] = theirs[name].detach().reshape(-1).to(torch.float64)
    if torch.isnan(flat).any():
        first = int(torch.isnan(flat).nonzero()[0])
        raise ValueError(f"no entry of the state dict reaches element {first} of the model's parameters")
    start = 0
    for parameter in parameters:
        parameter.copy_(flat[start:start + parameter.numel()].view_as(parameter).to(parameter.dtype))
        start += parameter.numel()
