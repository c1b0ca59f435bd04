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

The permutation (``models.marian_layout``, both ways) reaches every weight that reads or writes the residual stream, the LayerNorms and
the embeddings. Permuting the residual stream changes no result: LayerNorm is indifferent to the order of its
dimensions, and each matrix product only sums in another order (the logits agree to rounding).
Only a run whose model computes plain sinusoids at evaluation (``sinusoidal``, or a scheme that
evaluates as it: ``randomized`` over sinusoidal; CAPE's class is its own, though it adds the same
sinusoids at evaluation — not yet recognised), one softmax, no hybrid layers and no
test-time setting, with one tied vocabulary, is native (``native_family``); every other run exports
through the suite's own classes.
"""
from __future__ import annotations

from models.marian_layout import native_state_dict
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
