"""``python -m nmt export --run DIR --format hf --out OUT``: a trained run as a `transformers` folder.

OUT loads offline (``HF_HUB_OFFLINE=1``) with ``AutoTokenizer.from_pretrained(OUT)`` and
``AutoModelForSeq2SeqLM.from_pretrained(OUT)``, and ``pipeline("nmt-translation", model=OUT)``
translates (``export.pipeline``: `transformers` 5 has no translation task). It holds the weights as
safetensors, ``config.json``, ``generation_config.json`` from the run's decoding settings, the
tokenizer (the run's SentencePiece models as MarianTokenizer's ``source.spm`` / ``target.spm`` and
their pieces as ``vocab.json``) and a model card (README.md: scheme, data, recipe, the run's BLEU
with its sacreBLEU signature, its commit and arithmetic).

A run `transformers` can compute with its own classes exports natively (``export.native``:
MarianMT for post-norm sinusoidal runs, Pegasus for pre-norm ones), and then loads without this
suite; every other run through the suite's own classes (``export.suite_model``, registered with the
Auto classes when imported). The folder is written whole or not at all.

Decoding differs from the suite's in two ways `transformers` has no setting for, which the card
states: its output limit is one ``max_length`` in tokens (the suite's is ``max_len_a`` x source
length + ``max_len_b`` per sentence), and its beam search divides a hypothesis's log-probability by
length^alpha (the suite's GNMT penalty by ((5 + length) / 6)^alpha); greedy search is the same.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from experiment.run_dir import RunDir
from experiment.trained import TrainedRun
from export.native import native_family, native_model
from scoring.arithmetic import arithmetic_note
from scoring.record import read_record
from tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer
from utils.errors import UserError


def export_hf(run: TrainedRun, out: Path) -> Path:
    """Write ``run`` to ``out`` as a `transformers` folder (replacing it); returns ``out``. A run no
    class can express yet, or one with a pretrained tokenizer, is a one-line ``UserError``."""
    family, _ = native_family(run.model, run.tokenizer)
    if not isinstance(run.tokenizer, SentencePieceTokenizer):
        raise UserError(f"{run.run_dir}: only runs with the suite's SentencePiece tokenizer export to transformers")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        max_positions = run.cfg.model.positional.max_positions
        if family is None:  # the suite's own classes (export.suite_model), registered when imported
            from export.suite_model import suite_model

            model = suite_model(run)
        else:
            model = native_model(family, run.model.float().cpu(), run.tokenizer, max_positions)
        model.generation_config = generation_config(run, max_positions)
        with quiet_transformers():
            model.save_pretrained(staging, safe_serialization=True)
        write_tokenizer(run.tokenizer, staging, max_positions)
        (staging / "README.md").write_text(model_card(run, family), encoding="utf-8")
        for path in (staging, *staging.iterdir()):  # mkdtemp's and safetensors' private modes: as any new file
            path.chmod((0o777 if path.is_dir() else 0o666) & ~_umask())
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


@contextlib.contextmanager
def quiet_transformers():
    """transformers' progress bars off for a block (a command prints its own one line)."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.enable_progress_bar()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def generation_config(run: TrainedRun, max_positions: int):
    """The run's decoding settings as a GenerationConfig: its beam and length penalty, decoding
    started with bos, pad and bos never generated (as the suite's search), at most ``max_positions``
    target tokens. The stopping rule ``first_k`` is `transformers`' ``early_stopping=True`` (both admit
    an eos among the step's K best candidates and stop at K finished: with alpha 0, where the two
    length penalties agree, the beam outputs are the suite's); ``exact`` has no equal there and maps
    to its nearest, ``"never"`` (it runs on while a live hypothesis could still win, but admits an
    eos only among the step's K best)."""
    from transformers import GenerationConfig

    tok, decode = run.tokenizer, run.cfg.decode
    early_stopping = False if decode.beam == 1 else True if decode.stopping == "first_k" else "never"
    return GenerationConfig(decoder_start_token_id=tok.bos_id, bos_token_id=tok.bos_id, eos_token_id=tok.eos_id,
                            pad_token_id=tok.pad_id, num_beams=decode.beam, length_penalty=decode.len_penalty,
                            early_stopping=early_stopping,
                            suppress_tokens=[tok.pad_id, tok.bos_id], max_length=max_positions)


def write_tokenizer(tok: SentencePieceTokenizer, folder: Path, max_positions: int) -> None:
    """MarianTokenizer's files in ``folder``: the SentencePiece models (one joint model serves both
    sides) and each side's pieces by id, so its ids are the suite's."""
    from transformers import MarianTokenizer

    (folder / "source.spm").write_bytes(tok.src_model)
    (folder / "target.spm").write_bytes(tok.tgt_model or tok.src_model)
    sides = {"vocab.json": tok.src_sp, **({} if tok.joint else {"target_vocab.json": tok.tgt_sp})}
    for name, sp in sides.items():
        pieces = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        (folder / name).write_text(json.dumps(pieces, ensure_ascii=False, indent=0), encoding="utf-8")
    with warnings.catch_warnings():  # its advice to install sacremoses: a normaliser it never calls on input
        warnings.simplefilter("ignore")
        marian = MarianTokenizer(source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
                                 vocab=str(folder / "vocab.json"), separate_vocabs=not tok.joint,
                                 target_vocab_file=None if tok.joint else str(folder / "target_vocab.json"),
                                 model_max_length=max_positions)
        marian.save_pretrained(folder)


def model_card(run: TrainedRun, family: str | None) -> str:
    """README.md of the exported folder: what the model is, how it was trained, what it scored."""
    cfg, rundir = run.cfg, RunDir(run.run_dir)
    scores = []
    for folder in sorted(rundir.evaluations.glob("*/")) if rundir.evaluations.is_dir() else []:
        if rundir.evaluation(folder.name).record.is_file():
            record = read_record(rundir.evaluation(folder.name).record)
            scores.append(f"| `{record.testset}` | {record.bleu:.2f} | {record.n_sentences} | `{record.signature}` |")
    table = (["| test set | BLEU | sentences | sacreBLEU signature |", "| --- | --- | --- | --- |", *scores]
             if scores else ["No evaluation in the run folder (`python -m nmt test --run DIR`)."])
    try:
        arithmetic = arithmetic_note({run.run_dir.name: [run.run_dir]})
    except UserError as error:
        arithmetic = f"Arithmetic not recorded ({error})."
    kind = {"marian": "MarianMT (post-norm)", "pegasus": "Pegasus (pre-norm)", None: ""}[family]
    power = cfg.decode.len_penalty_form == "power" or cfg.decode.len_penalty == 0
    penalty = "length^alpha, transformers' form" if cfg.decode.len_penalty_form == "power" else \
        "GNMT's ((5 + length) / 6)^alpha; transformers divides by length^alpha"
    beam = ("beam outputs too with `early_stopping=True` (the suite's first_k)." if power else
            "beam outputs may differ (decode with `decode.len_penalty_form=power` for transformers' form).")
    form = (f"`transformers`' own {kind} class: it loads without the suite" if family else
            "the suite's classes (`model_type` `nmt-suite`): `import export.suite_model` registers them with the "
            "Auto classes, then `AutoModelForSeq2SeqLM.from_pretrained` loads it (the suite installed; no "
            "`trust_remote_code`)")
    return "\n".join([
        "---", "library_name: transformers", "pipeline_tag: translation", "tags: [translation, positional-encoding]",
        "---", "", f"# `{cfg.model.positional.name}`: a {cfg.model.d_model}-wide encoder-decoder from {run.run_dir.name}",
        "", f"Trained by this suite (`python -m nmt train`), exported with `python -m nmt export --format hf` as "
        f"{form}. Positions: `{cfg.model.positional.name}`; {cfg.model.n_encoder_layers}+{cfg.model.n_decoder_layers} layers, "
        f"{cfg.model.n_heads} heads, feed-forward {cfg.model.d_ff}, {cfg.model.activation}.",
        "", f"Data: `{cfg.data.source}`; checkpoint `{run.checkpoint.name}` (update {run.step}).", "", *table, "",
        arithmetic, "",
        f"Decoding as trained: beam {cfg.decode.beam}, length penalty {cfg.decode.len_penalty} ({penalty}), stopping "
        f"rule {cfg.decode.stopping}. transformers limits outputs to `max_length` tokens where the suite allows "
        f"{cfg.decode.max_len_a} x source length + {cfg.decode.max_len_b}: greedy outputs are the suite's; {beam}", ""])
