"""A trained run as `transformers`' own classes, where one of them computes it exactly (native export).

Two of `transformers`' encoder-decoders are this suite's Transformer with sinusoidal positions:
MarianMT (post-norm: residual, then LayerNorm) and Pegasus (pre-norm, a final LayerNorm on each
stack). Both scale the token embeddings by sqrt(D), add fixed sinusoids with the paper's
frequencies 10000^(-2i/D) from position 0, project queries, keys and values with biases and
scale the logits by head size^-1/2 — as ours does. What differs is layout:

| ours | theirs | the conversion |
| --- | --- | --- |
| sin, cos interleaved along D (2i, 2i+1) | all sines, then all cosines (i, D/2 + i) | the model dimension permuted |
| fused QKV (self), Q + fused KV (cross) | q_proj, k_proj, v_proj | split along the output dimension |
| bos (2) starts decoding, pad (0), eos (3) | ``decoder_start_token_id`` | written into the config |

The permutation reaches every weight that reads or writes the residual stream, the LayerNorms and
the embeddings. Permuting the residual stream changes no result: LayerNorm is indifferent to the order of its
dimensions, and each matrix product only sums in another order (the logits agree to rounding).
Only a run whose model computes plain sinusoids at evaluation (``sinusoidal``, or a scheme that
evaluates as it: ``randomized`` over sinusoidal; CAPE's class is its own, though it adds the same
sinusoids at evaluation — not yet recognised), one softmax, no hybrid layers and no
test-time setting, with one tied vocabulary, is native (``native_family``); every other run exports
through the suite's own classes.
"""
from __future__ import annotations

import torch

from models.positional.base import evaluated
from models.positional.sinusoidal import SinusoidalPositional
from models.transformer import Transformer
from tokenizer import Tokenizer

FAMILIES = {False: "marian", True: "pegasus"}  # model.norm_first -> the transformers model type


def native_family(model: Transformer, tok: Tokenizer) -> tuple[str | None, str]:
    """("marian" | "pegasus", "") where `transformers`' own class computes ``model`` exactly, else
    (None, the reason in a few words)."""
    cfg = model.cfg
    if not all(type(evaluated(pe)) is SinusoidalPositional for pe in (model.encoder_pe, model.decoder_pe)):
        return None, f"{cfg.positional.name} is not plain sinusoids at evaluation"
    if cfg.softmax != "softmax" or cfg.positional.nope_every:
        return None, "its attention (ssmax or hybrid NoPE layers) has no form in those classes"
    if cfg.length_scaling.logn or cfg.length_scaling.rotary != "none":
        return None, "a test-time length setting has no form in those classes"
    if not (tok.joint and cfg.tie_embeddings) or model.src_embed is not model.tgt_embed:
        return None, "MarianMT and Pegasus share one tied vocabulary; this run's embeddings are not one"
    if cfg.d_model % 2:
        return None, "an odd model width has no sine/cosine halves"
    return FAMILIES[cfg.norm_first], ""


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


def native_config(family: str, model: Transformer, tok: Tokenizer, max_positions: int):
    """The MarianConfig / PegasusConfig of ``model``: its dimensions, activation, ids (decoding
    starts with our bos), scaled embeddings, one tied vocabulary."""
    from transformers import MarianConfig, PegasusConfig

    cfg = model.cfg
    fields = dict(vocab_size=tok.src_vocab_size, d_model=cfg.d_model, encoder_layers=cfg.n_encoder_layers,
                  decoder_layers=cfg.n_decoder_layers, encoder_attention_heads=cfg.n_heads,
                  decoder_attention_heads=cfg.n_heads, encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff,
                  activation_function=cfg.activation, dropout=cfg.dropout, attention_dropout=cfg.attention_dropout,
                  activation_dropout=0.0, max_position_embeddings=max_positions, scale_embedding=True,
                  pad_token_id=tok.pad_id, eos_token_id=tok.eos_id, bos_token_id=tok.bos_id,
                  decoder_start_token_id=tok.bos_id, forced_eos_token_id=None, tie_word_embeddings=True,
                  is_encoder_decoder=True)
    if family == "marian":
        return MarianConfig(**fields, decoder_vocab_size=tok.tgt_vocab_size, share_encoder_decoder_embeddings=True)
    return PegasusConfig(**fields)


def native_model(family: str, model: Transformer, tok: Tokenizer, max_positions: int):
    """The MarianMTModel / PegasusForConditionalGeneration holding ``model``'s weights (eval mode);
    a weight of either side left unmatched is an error (the sinusoids excepted: theirs to compute)."""
    from transformers import MarianMTModel, PegasusForConditionalGeneration

    kind = MarianMTModel if family == "marian" else PegasusForConditionalGeneration
    theirs = kind(native_config(family, model, tok, max_positions))
    state = native_state_dict(model)
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    computed = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight", "final_logits_bias"}
    if set(missing) - computed or unexpected:
        raise RuntimeError(f"{family} conversion: weights not matched: missing {sorted(set(missing) - computed)}, "
                           f"unexpected {sorted(unexpected)}")
    return theirs.eval()
