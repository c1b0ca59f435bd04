"""``translate``: tokenized sources -> ranked hypotheses, the one routine every command uses."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from data.batching import pad_sequences
from experiment.decode_config import DecodeConfig
from models.transformer import Transformer
from search.beam import beam_search
from search.greedy import greedy_search
from tokenizer import Tokenizer
from utils.errors import UserError


@dataclass
class Translation:
    """One hypothesis: its detokenized text, its token ids (no bos/eos) and, from beam search,
    its length-normalised log-probability (None from greedy search, which does not score)."""

    text: str
    tokens: list[int]
    score: float | None


class Engine(Protocol):
    """Another decoding engine (e.g. ``search.ctranslate2.CTranslate2Translator``): per source (ids
    without eos), its n-best as (token ids without bos/eos, score or None for greedy search)."""

    def search(self, sources: list[list[int]], settings: DecodeConfig) -> list[list[tuple[list[int], float | None]]]:
        ...


def translate(model: Transformer, sources: list[list[int]], tokenizer: Tokenizer, settings: DecodeConfig,
              device: str | torch.device = "cpu", engine: Engine | None = None,
              target_lengths: list[int] | None = None,
              progress: Callable[[int], object] | None = None) -> list[list[Translation]]:
    """Translate tokenized sources (id sequences without eos) -> per source, in input order, its
    ``settings.nbest`` best hypotheses, best first.

    Sentences are sorted by length and decoded ``settings.batch_size`` at a time; beam 1 is greedy
    search. With ``engine``, that engine decodes instead of ``model``. Callers choose how to show
    the hypotheses. ``settings.oracle_length`` needs ``target_lengths`` (each reference's number of
    target tokens, as the tokenizer encodes it): every hypothesis is then exactly that long.
    ``progress``, when given, is called with each decoded batch's number of sentences.
    """
    if settings.oracle_length and target_lengths is None:
        raise UserError("decode.oracle_length decodes to each reference's length: only an evaluation (nmt test, "
                        "a study), which has the references, can use it")
    if settings.oracle_length and engine is not None:
        raise UserError("decode.oracle_length is decoded by the PyTorch model only (engine torch)")
    if target_lengths is not None and len(target_lengths) != len(sources):
        raise ValueError(f"{len(target_lengths)} target lengths for {len(sources)} sources")
    if engine is not None:
        return [[Translation(tokenizer.decode_tgt(tokens), tokens, score) for tokens, score in hyps]
                for hyps in engine.search(sources, settings)]
    banned = tuple(sorted({tokenizer.pad_id, tokenizer.bos_id} - {tokenizer.eos_id}))
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out: list[list[Translation]] = [[] for _ in sources]
    for start in range(0, len(order), settings.batch_size):
        rows = order[start:start + settings.batch_size]
        src = pad_sequences([sources[i] for i in rows], tokenizer.pad_id, suffix=tokenizer.eos_id).to(device)
        exact = torch.tensor([target_lengths[i] for i in rows]) if settings.oracle_length else None
        if settings.beam == 1:
            found = [[(ids, None)] for ids in greedy_search(
                model, src, tokenizer.bos_id, tokenizer.eos_id, settings.max_len_a, settings.max_len_b,
                banned_ids=banned, exact_lengths=exact)]
        else:
            found = [[(h.tokens, h.score) for h in hyps] for hyps in beam_search(
                model, src, tokenizer.bos_id, tokenizer.eos_id, settings.beam, settings.nbest,
                settings.len_penalty, settings.max_len_a, settings.max_len_b, banned_ids=banned,
                stopping=settings.stopping, exact_lengths=exact, penalty_form=settings.len_penalty_form)]
        for i, hyps in zip(rows, found):
            out[i] = [Translation(tokenizer.decode_tgt(tokens), tokens, score) for tokens, score in hyps]
        if progress is not None:
            progress(len(rows))
    return out


def best_texts(translations: list[list[Translation]]) -> list[str]:
    """The best hypothesis' text of each sentence."""
    return [hyps[0].text for hyps in translations]
