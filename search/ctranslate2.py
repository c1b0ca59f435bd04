"""CTranslate2 (https://opennmt.net/CTranslate2): export a trained run, and translate with it.

``export_ctranslate2(run, out)`` writes the run's model in CTranslate2's Transformer format (its
``TransformerSpec`` filled from our weights, with the tokenizer's pieces as vocabularies);
``CTranslate2Translator`` decodes token-id sources with it and returns what ``search.translate``
returns for the PyTorch engine. CTranslate2's spec expresses the schemes whose class declares a
``card.export_form`` (``exportable_schemes()``, read from the registry):

| scheme | in the spec |
| --- | --- |
| embeddings: none, sinusoidal, learnable | ``position_encodings`` = ``embedding_table`` (zeros for none; ours interleaves sin/cos) |
| rotary: rope | ``rotary_dim`` = head size, interleaved pairs, same base (self-attention only, as ours) |
| relative_position: shaw | ``relative_position``: per-layer copies of our shared key/value tables, same clipping |
| relative_attention_bias: t5 | ``relative_attention_bias``: per-layer copies of our shared bucket biases |
| relative_position: nezha | as shaw, with NEZHA's fixed sinusoidal tables written out |
| embeddings: shape, cape | what they add at evaluation (sinusoidal at t + ``eval_shift``; plain sinusoidal) |
| base: randomized | its base's form and tables (at evaluation it is its base) |

Pre-norm and post-norm, tied or untied embeddings, relu or gelu all map directly. Other schemes
are a one-line error naming the supported ones: ALiBi exists in CTranslate2 only for decoder-only
models (``TransformerDecoderModelSpec``), not in its encoder or encoder-decoder spec; xPos's
scaled rotation, FIRE's learned MLP bias, KERPLE's log bias, Transformer-XL's and DeBERTa's
content-position terms have no counterpart in the spec.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from experiment.decode_config import DecodeConfig
from experiment.trained import TrainedRun
from models.config import ModelConfig
from models.positional import SCHEMES, embedding_table, evaluated, evaluated_scheme
from models.transformer import Transformer
from search.beam import length_penalty
from tokenizer import Tokenizer
from utils.errors import UserError

FORMAT_VERSION_FILE = "export.json"  # what was exported, from which checkpoint


def exportable_schemes() -> tuple[str, ...]:
    """The registered schemes CTranslate2's Transformer spec can express (those whose form is
    ``base`` over an exportable base), read from the registry when asked (a scheme registered
    after import is seen)."""
    return tuple(name for name, scheme in SCHEMES.items() if scheme.card.export_form is not None)


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:  # pragma: no cover - in requirements.txt
        raise UserError("the ctranslate2 package is not installed (pip install ctranslate2)") from None
    return ctranslate2


def _evaluated_scheme(cfg: ModelConfig) -> str:
    """The scheme the model computes at evaluation (randomized: its base), which the export writes."""
    name = cfg.positional.name
    return evaluated_scheme(SCHEMES[name], cfg) if name in SCHEMES else name


def check_exportable(cfg: ModelConfig) -> None:
    """A one-line ``UserError`` unless CTranslate2's spec expresses the model's positional scheme."""
    name, cross, evaluated = cfg.positional.name, cfg.positional.cross_attention, _evaluated_scheme(cfg)
    scaling = cfg.length_scaling
    if cfg.positional.nope_every:
        raise UserError("hybrid layers (model.positional.nope_every) cannot be exported: CTranslate2's Transformer spec "
                        "gives every layer the same positions; decode with the PyTorch model (engine torch)")
    if cfg.softmax != "softmax":
        raise UserError(f"model.softmax={cfg.softmax} has no form in CTranslate2's Transformer spec (its attention is "
                        "a plain softmax); decode it with the PyTorch model (engine torch)")
    if scaling.logn or scaling.rotary != "none":
        setting = "logn" if scaling.logn else f"rotary={scaling.rotary}"
        raise UserError(f"model.length_scaling.{setting} is a test-time setting CTranslate2's Transformer spec has no "
                        "form for; decode it with the PyTorch model (engine torch)")
    form = SCHEMES[evaluated].card.export_form if evaluated in SCHEMES else None
    if form in (None, "base") or cross:
        over = f" over '{evaluated}'" if evaluated != name else ""
        raise UserError(f"scheme '{name}'{over}{' in cross-attention' if cross else ''} cannot be exported to "
                        f"CTranslate2; its Transformer spec expresses {', '.join(exportable_schemes())} "
                        "(self-attention only; a scheme of form 'base' over one of the others)")
    if form == "rotary" and getattr(cfg.positional.options(evaluated), "learn_frequencies", False):
        raise UserError(f"{evaluated} with learned frequencies (model.positional.{evaluated}.learn_frequencies: true) "
                        "cannot be exported: CTranslate2's rotary embeddings take one base, not a table of frequencies")
    if form == "relative_position" and not cfg.positional.options(evaluated).values:
        raise UserError(f"{evaluated} without the value term (model.positional.{evaluated}.values: false) cannot "
                        "be exported: CTranslate2's relative positions always add both")


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().copy()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    spec.weight = _numpy(weight)
    if bias is not None:
        spec.bias = _numpy(bias)


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _numpy(norm.weight), _numpy(norm.bias)


def _attention(spec, attention, self_attention: bool, block) -> None:
    if self_attention:
        _linear(spec.linear[0], attention.qkv_proj.weight, attention.qkv_proj.bias)  # [q; k; v]
        _linear(spec.linear[1], attention.out_proj.weight, attention.out_proj.bias)
    else:
        _linear(spec.linear[0], attention.q_proj.weight, attention.q_proj.bias)
        _linear(spec.linear[1], attention.kv_proj.weight, attention.kv_proj.bias)  # [k; v]
        _linear(spec.linear[2], attention.out_proj.weight, attention.out_proj.bias)
    _norm(spec.layer_norm, block.norm)


def _positional(stack_spec, layers_attention: list, pe, n_positions: int, d_model: int) -> None:
    """The scheme's parameters into one stack (encoder or decoder) of the spec, by its form."""
    pe = evaluated(pe)
    form = pe.card.export_form
    if hasattr(stack_spec, "position_encodings"):
        table = embedding_table(pe, n_positions) if form == "embeddings" else None
        stack_spec.position_encodings.encodings = (
            np.zeros((n_positions, d_model), dtype=np.float32) if table is None else _numpy(table))
    for attention in layers_attention:
        if form == "relative_position":
            attention.relative_position_keys = _numpy(pe.key_table)
            attention.relative_position_values = _numpy(pe.value_table)
        elif form == "relative_attention_bias":
            attention.relative_attention_bias = _numpy(pe.bias.weight)  # (buckets, H)
            attention.relative_attention_max_distance = np.dtype("int32").type(pe.max_distance)


def build_spec(model: Transformer, tok: Tokenizer):
    """CTranslate2's ``TransformerSpec`` holding the model's weights and the tokenizer's pieces:
    what the model computes at evaluation (SHAPE at its ``eval_shift``, CAPE without its
    augmentation, randomized as its base), whatever mode it is in."""
    check_exportable(model.cfg)
    _ctranslate2()
    was_training = model.training
    model.eval()
    try:
        return _fill_spec(model, tok)
    finally:
        model.train(was_training)


def _fill_spec(model: Transformer, tok: Tokenizer):
    cfg = model.cfg
    from ctranslate2.specs import common_spec, transformer_spec

    pe = evaluated(model.encoder_pe)
    form = pe.card.export_form
    activation = common_spec.Activation.RELU if cfg.activation == "relu" else common_spec.Activation.GELU
    common = dict(pre_norm=cfg.norm_first, activation=activation, relative_position=form == "relative_position",
                  relative_attention_bias=form == "relative_attention_bias")
    if form == "rotary":
        common.update(rotary_dim=cfg.d_model // cfg.n_heads, rotary_interleave=True, rotary_base=pe.base)
    encoder = transformer_spec.TransformerEncoderSpec(cfg.n_encoder_layers, cfg.n_heads, **common)
    decoder = transformer_spec.TransformerDecoderSpec(cfg.n_decoder_layers, cfg.n_heads, **common)
    spec = transformer_spec.TransformerSpec(encoder, decoder)

    encoder.embeddings[0].weight = _numpy(model.src_embed.weight)
    decoder.embeddings.weight = _numpy(model.tgt_embed.weight)
    encoder.scale_embeddings = decoder.scale_embeddings = True  # x sqrt(d_model), as ours
    for layer_spec, layer in zip(encoder.layer, model.encoder_layers):
        _attention(layer_spec.self_attention, layer.self_attn, True, layer.attn_block)
        _linear(layer_spec.ffn.linear_0, layer.ff.fc1.weight, layer.ff.fc1.bias)
        _linear(layer_spec.ffn.linear_1, layer.ff.fc2.weight, layer.ff.fc2.bias)
        _norm(layer_spec.ffn.layer_norm, layer.ff_block.norm)
    for layer_spec, layer in zip(decoder.layer, model.decoder_layers):
        _attention(layer_spec.self_attention, layer.self_attn, True, layer.self_block)
        _attention(layer_spec.attention, layer.cross_attn, False, layer.cross_block)
        _linear(layer_spec.ffn.linear_0, layer.ff.fc1.weight, layer.ff.fc1.bias)
        _linear(layer_spec.ffn.linear_1, layer.ff.fc2.weight, layer.ff.fc2.bias)
        _norm(layer_spec.ffn.layer_norm, layer.ff_block.norm)
    if cfg.norm_first:
        _norm(encoder.layer_norm, model.encoder_norm)
        _norm(decoder.layer_norm, model.decoder_norm)
    _linear(decoder.projection, model.output.weight)
    n_positions = cfg.positional.max_positions
    _positional(encoder, [layer.self_attention for layer in encoder.layer], model.encoder_pe, n_positions, cfg.d_model)
    _positional(decoder, [layer.self_attention for layer in decoder.layer], model.decoder_pe, n_positions, cfg.d_model)

    spec.register_source_vocabulary(tok.src_pieces(list(range(tok.src_vocab_size))))
    spec.register_target_vocabulary(tok.tgt_pieces(list(range(tok.tgt_vocab_size))))
    pieces = tok.tgt_pieces([tok.unk_id, tok.bos_id, tok.eos_id])
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = pieces
    spec.config.decoder_start_token = pieces[1]
    spec.config.layer_norm_epsilon = model.encoder_layers[0].ff_block.norm.eps  # torch's 1e-5, not CTranslate2's 1e-6
    return spec


def checkpoint_stamp(run: TrainedRun) -> dict:
    """Which checkpoint file, in which state, an export was made from."""
    stat = run.checkpoint.stat()
    return {"checkpoint": str(run.checkpoint.resolve()), "mtime_ns": stat.st_mtime_ns, "size": stat.st_size}


def exported_model(run: TrainedRun) -> Path:
    """The run's checkpoint in CTranslate2's format, exported on first use into
    ``DIR/ctranslate2/<checkpoint>`` and again whenever that checkpoint file changed."""
    folder = run.run_dir / "ctranslate2" / run.checkpoint.stem
    info = folder / FORMAT_VERSION_FILE
    if info.is_file() and json.loads(info.read_text(encoding="utf-8")).get("source") == checkpoint_stamp(run):
        return folder
    return export_ctranslate2(run, folder)


def export_ctranslate2(run: TrainedRun, out_dir: Path, quantization: str | None = None) -> Path:
    """Write the run's model as a CTranslate2 model folder ``out_dir`` (replaced atomically)."""
    return save_model(run.model, run.tokenizer, out_dir, quantization,
                      {"run": str(run.run_dir), "source": checkpoint_stamp(run), "step": run.step})


def save_model(model: Transformer, tok: Tokenizer, out_dir: Path, quantization: str | None = None,
               info: dict | None = None) -> Path:
    """``build_spec`` written to ``out_dir`` (whole or not at all), with ``info`` in export.json."""
    out_dir = Path(out_dir)
    spec = build_spec(model, tok)
    spec.validate()
    spec.optimize(quantization=quantization)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        spec.save(str(staging))
        (staging / FORMAT_VERSION_FILE).write_text(json.dumps(
            {**(info or {}), "scheme": model.cfg.positional.name, "quantization": quantization}, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


class CTranslate2Translator:
    """Translates token-id sources with an exported model; the same contract as ``translate``'s
    search functions: per source, its n-best (token ids without bos/eos, score)."""

    def __init__(self, model_dir: Path, tok: Tokenizer, device: str = "cpu", compute_type: str = "float32",
                 threads: int = 1):
        ct2 = _ctranslate2()
        self.tok = tok
        try:
            self.translator = ct2.Translator(str(model_dir), device=device, compute_type=compute_type,
                                             intra_threads=threads, inter_threads=1)
        except (ValueError, RuntimeError) as err:
            raise UserError(f"CTranslate2 cannot load {model_dir} with compute type '{compute_type}' on "
                            f"{device}: {str(err).splitlines()[0]}") from None

    def search(self, sources: list[list[int]], settings: DecodeConfig) -> list[list[tuple[list[int], float]]]:
        tok = self.tok
        pieces = [tok.src_pieces(ids + [tok.eos_id]) for ids in sources]
        # our limit a * (source length with eos) + b, in generated tokens (eos counted); CTranslate2
        # has one limit per batch, so it decodes to the largest and each output is cut to its own
        # (exact for greedy search, whose tokens do not depend on the limit)
        limits = [max(1, int((len(ids) + 1) * settings.max_len_a + settings.max_len_b)) for ids in sources]
        banned = [[p] for p in tok.tgt_pieces(sorted({tok.pad_id, tok.bos_id} - {tok.eos_id}))]
        results = self.translator.translate_batch(
            pieces, beam_size=settings.beam, num_hypotheses=settings.nbest, length_penalty=settings.len_penalty,
            max_decoding_length=max(limits), return_scores=True, suppress_sequences=banned,
            max_batch_size=settings.batch_size, return_end_token=True)
        vocab = {piece: i for i, piece in enumerate(tok.tgt_pieces(list(range(tok.tgt_vocab_size))))}
        alpha = settings.len_penalty
        out = []
        for result, limit in zip(results, limits):
            hyps = []
            for hyp, score in zip(result.hypotheses, result.scores):
                ids = [vocab[p] for p in hyp]
                # CTranslate2 scores log-probability / L^alpha (L with eos); ours by the run's form
                log_prob = score * len(ids) ** alpha
                ids = ids[:limit]
                ours = log_prob / length_penalty(len(ids), alpha, settings.len_penalty_form) if settings.beam > 1 \
                    else None
                hyps.append(([i for i in ids if i != tok.eos_id], ours))
            out.append(hyps)
        return out
