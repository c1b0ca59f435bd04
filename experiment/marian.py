"""A `transformers` Marian folder (``Helsinki-NLP/opus-mt-fr-en`` downloaded, or any MarianMTModel
saved with ``save_pretrained``) as a ``TrainedRun``: scored as a row beside the suite's runs.

MarianMT is this suite's post-norm Transformer with sinusoids (``models.marian_layout``), so its
weights load into the suite's own model and every command decodes it with the suite's search, beam
settings, metrics and statistics — the same code as a trained run's, not `transformers`' ``generate``.
Its tokenizer is the folder's (``tokenizer.type=pretrained``; decoding starts from its pad, Marian's
convention). Its scores are written into the folder (``eval/``, and the resolved ``config.yaml``
beside them) as a run's are, its row named ``marian:<folder name>``. A Marian model the
suite's Transformer cannot compute (separate vocabularies, unscaled embeddings, unequal encoder and
decoder widths, an activation the suite lacks, a non-zero output bias) is refused in one line.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from experiment.config import Config, from_dict
from experiment.run_dir import RunDir
from experiment.trained import TrainedRun
from models.marian_layout import load_native_state_dict
from models.transformer import ACTIVATIONS, Transformer
from tokenizer import PretrainedTokenizer
from utils.config import apply_overrides, to_dict
from utils.errors import UserError

ACTIVATION_NAMES = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}  # theirs -> ours


def is_marian_folder(path: Path) -> bool:
    """A folder holding a `transformers` MarianMT model (config.json of ``model_type`` marian), not a
    suite run (which keeps its weights in checkpoints/)."""
    config = Path(path) / "config.json"
    if not config.is_file() or RunDir(path).checkpoints.is_dir():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "marian"
    except ValueError:
        return False


def marian_row(path: Path) -> str:
    """The row name of a Marian folder in comparison tables: ``marian:<folder name>``."""
    return f"marian:{Path(path).name}"


def marian_overrides(config, folder: Path) -> list[str]:
    """The suite config of a MarianConfig, as overrides of the defaults; what the suite's Transformer
    cannot compute is a one-line ``UserError`` naming the field."""
    def refuse(field: str, why: str) -> UserError:
        return UserError(f"{folder}: a Marian model with {field} ({why}) has no form in the suite's Transformer")

    if not getattr(config, "share_encoder_decoder_embeddings", True):
        raise refuse("share_encoder_decoder_embeddings=false", "the suite's one tied vocabulary")
    if not config.scale_embedding:
        raise refuse("scale_embedding=false", "the suite scales embeddings by sqrt(d_model)")
    for ours, (encoder, decoder) in {"n_heads": ("encoder_attention_heads", "decoder_attention_heads"),
                                     "d_ff": ("encoder_ffn_dim", "decoder_ffn_dim")}.items():
        if getattr(config, encoder) != getattr(config, decoder):
            raise refuse(f"{encoder} != {decoder}", f"one model.{ours} for both stacks")
    activation = ACTIVATION_NAMES.get(config.activation_function)
    if activation not in ACTIVATIONS:
        raise refuse(f"activation_function={config.activation_function}", f"known: {', '.join(ACTIVATION_NAMES)}")
    return [f"model.d_model={config.d_model}", f"model.n_heads={config.encoder_attention_heads}",
            f"model.n_encoder_layers={config.encoder_layers}", f"model.n_decoder_layers={config.decoder_layers}",
            f"model.d_ff={config.encoder_ffn_dim}", f"model.activation={activation}", "model.norm_first=false",
            "model.tie_embeddings=true", "model.positional.name=sinusoidal",
            f"model.positional.max_positions={config.max_position_embeddings}", "model.dropout=0.0",
            "model.attention_dropout=0.0", "tokenizer.type=pretrained", f"tokenizer.name={folder}"]


def marian_config(folder: Path) -> list[Path]:
    """The file that makes ``folder`` a Marian folder (its config.json), for archives and decodes of it
    to keep: their rows are then named as its (``marian_row``); [] for a suite run."""
    return [Path(folder) / "config.json"] if is_marian_folder(folder) else []


def marian_weights(folder: Path) -> Path:
    """The weights file of a Marian folder (safetensors, else PyTorch's), or the folder when it holds neither."""
    return next((folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()), folder)


def load_marian(folder: str | Path, device: str | torch.device = "cpu", overrides: list[str] | None = None,
                base: Config | None = None) -> TrainedRun:
    """The Marian model in ``folder`` as the suite's Transformer (eval mode, on ``device``) with the
    folder's tokenizer; ``overrides`` change decoding settings (``decode.beam=4``). ``base``: the config
    whose data, decoding and evaluation settings the model is scored with (a study's; default: the
    schema's defaults), its model and tokenizer replaced by the folder's."""
    from transformers import MarianConfig, MarianMTModel

    folder = Path(folder)
    config = MarianConfig.from_pretrained(folder)
    tree, origin = to_dict(base if base is not None else Config()), {}
    apply_overrides(tree, [*marian_overrides(config, folder), *(overrides or [])], origin)
    cfg = from_dict(tree, origin)
    tok = PretrainedTokenizer(str(folder))
    if config.decoder_start_token_id != tok.bos_id or config.pad_token_id != tok.pad_id:
        raise UserError(f"{folder}: the model starts decoding with {config.decoder_start_token_id} and pads with "
                        f"{config.pad_token_id}, its tokenizer with {tok.bos_id} and {tok.pad_id}")
    if tok.src_vocab_size > config.vocab_size:
        raise UserError(f"{folder}: the tokenizer has {tok.src_vocab_size} pieces, the model {config.vocab_size}")
    theirs = MarianMTModel.from_pretrained(folder).state_dict()
    bias = theirs.get("final_logits_bias")
    if bias is not None and bias.abs().max() > 0:
        raise UserError(f"{folder}: the model adds a non-zero final_logits_bias, which the suite's output layer lacks")
    model = Transformer(cfg.model, config.vocab_size, config.vocab_size, pad_id=tok.pad_id, joint_vocab=True)
    load_native_state_dict(model, theirs)
    return TrainedRun(run_dir=folder, cfg=cfg, tokenizer=tok, model=model.to(device).eval(),
                      checkpoint=marian_weights(folder),
                      step=None)
