"""A study's setup paragraph, generated from its archive: the model, the recipe and how it differs
from the other studies the report shows, the checkpoint rule, the decoding and its output-length
limit, and what the runs computed on (``scoring.arithmetic``: device, precision, torch) — so a
reader compares studies by what their runs did, not by what a reading remembers."""
from __future__ import annotations

import collections
import datetime as dt
from pathlib import Path

from experiment.config import to_dict
from experiment.manifest import read_manifest
from experiment.run_dir import RunDir
from reporting.sources import STUDIES, archived_run_dirs, first_config
from scoring.arithmetic import arithmetic_of
from scoring.record import read_record
from utils.config import flatten
from utils.errors import UserError

IGNORED = ("seed", "data.seed", "model.positional.name")  # what a study's runs differ in by design
REFERENCE = "short"  # the study the others are compared with


def config_differences(root: Path, study: str, other: str = REFERENCE) -> list[str]:
    """``key a → b`` for each config key in which the first runs of ``other`` and ``study`` differ,
    read through the config schema (the scheme and seeds aside; data paths and caches aside)."""
    mine, theirs = (flatten(to_dict(first_config(root, s))) for s in (study, other))
    keys = [k for k in sorted(set(mine) | set(theirs))
            if k not in IGNORED and not k.startswith(("data.dir", "data.cache", "decode."))
            and mine.get(k) != theirs.get(k)]
    return [f"`{k}` {theirs.get(k, 'unset')} → {mine.get(k, 'unset')}" for k in keys]


def setup_paragraph(root: Path, study: str) -> str:
    """One paragraph (Markdown) on how the study's archived runs were made (module doc)."""
    runs = archived_run_dirs(root, study)
    if not runs:
        raise UserError(f"setup {study}: {STUDIES[study].folder} holds no archived run")
    c = first_config(root, study)
    model, train = c.model, c.train
    decode = read_record(RunDir(runs[0]).evaluation(STUDIES[study].testsets[0]).record).decode.rule()
    metric = "BLEU" if train.best_metric == "bleu" else train.best_metric
    parameters = sorted({p for p in (read_manifest(r).parameters for r in runs) if p})
    counts = collections.Counter(arithmetic_of(r).describe() for r in runs)
    arithmetic = "; ".join(f"{n} × {what}" for what, n in counts.most_common())
    lengths = (f", training and validation pairs with sources of at most {c.data.max_src_words} words"
               if c.data.max_src_words else "")
    size = (f"{parameters[0]:,}–{parameters[-1]:,} parameters" if len(parameters) > 1 else
            f"{parameters[0]:,} parameters" if parameters else "parameters not recorded")
    text = (f"**Setup ({study}, generated from the archive).** {len(runs)} runs. Model: d_model {model.d_model}, "
            f"{model.n_heads} heads, {model.n_encoder_layers} + {model.n_decoder_layers} layers, "
            f"feed-forward {model.d_ff}, dropout {model.dropout}, {size} (by scheme). Recipe: "
            f"{train.max_steps:,} updates of {train.max_tokens:,} tokens{lengths}, {train.warmup_steps} "
            f"warm-up updates to a peak learning rate of {train.lr} and {train.schedule} decay to zero at the "
            f"last update, label smoothing {train.label_smoothing}, `train.amp: {train.amp}`. Checkpoint: the "
            f"best validation {metric} (greedy, {train.valid_bleu_sentences} sentences, every "
            f"{train.eval_every} updates). Decoding (its evaluation records): beam {decode['beam']}, length "
            f"penalty {decode['len_penalty']}, stopping rule {decode['stopping']}, output limit "
            f"{decode['max_len_a']} × source subword tokens + {decode['max_len_b']}. Arithmetic: {arithmetic}.")
    if study != REFERENCE:
        differences = config_differences(root, study)
        text += (f" Config against `{REFERENCE}`'s: {', '.join(differences)}." if differences
                 else f" Config: the same as `{REFERENCE}`'s.")
    return text + "\n"


def sittings(manifests: list) -> list[list]:
    """The manifests grouped into sittings, in time order: runs that overlap in time, or follow one
    another on a freed worker, share one; a run that starts after every earlier run finished opens the next."""
    groups: list[list] = []
    end = None
    for m in sorted(manifests, key=lambda m: dt.datetime.fromisoformat(m.started)):
        start, finish = dt.datetime.fromisoformat(m.started), dt.datetime.fromisoformat(m.last_finished)
        if end is None or start > end:
            groups.append([])
        groups[-1].append(m)
        end = finish if end is None else max(end, finish)
    return groups


def gpu_paragraph(root: Path, study: str) -> str:
    """How the study's archived GPU runs were made, from their manifests: how many, on which card and
    torch, how many at a time, and each sitting's runs and minutes — README's GPU section."""
    manifests = [read_manifest(run) for run in archived_run_dirs(root, study)]
    if not manifests:
        raise UserError(f"gpu paragraph {study}: {STUDIES[study].folder} holds no archived run")
    cards = sorted({m.device for m in manifests})
    torches = sorted({(m.packages or {}).get("torch", "?") for m in manifests})
    at_once = max(m.runs_sharing_machine or 1 for m in manifests)
    waves = sittings(manifests)

    def minutes(wave) -> int:
        first = min(dt.datetime.fromisoformat(m.started) for m in wave)
        last = max(dt.datetime.fromisoformat(m.last_finished) for m in wave)
        return round((last - first).total_seconds() / 60)

    said = ", then ".join(f"{len(w)} runs in {minutes(w)} minutes" for w in waves)
    return (f"Its {len(manifests)} archived runs came in {len(waves)} sitting{'s' if len(waves) > 1 else ''} on "
            f"{' and '.join(cards)} with torch {' and '.join(torches)}, {at_once} at a time: {said}.")

