"""Test-set evaluation (what ``test.py`` writes): translate, score, write DIR/eval/<test set>/.

``DIR/eval/<test set>/`` holds ``hyps.txt``, ``refs.txt``, ``srcs.txt`` and ``results.json``
(all written atomically). ``scoring.compare`` reads those files back, so it needs no model.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from data.concatenated import concatenate, concatenated_name
from data.corpus import load_corpus
from experiment.decode_config import DecodeConfig, DecodeRecord
from experiment.run_dir import RunDir
from experiment.trained import TrainedRun
from scoring.metrics import (
    NLTK_TOKENIZATION,
    bleu_by_length,
    bleu_confidence_interval,
    corpus_bleu,
    corpus_chrf,
    nltk_bleu4,
    seed_char_bleu4,
)
from scoring.record import EvalRecord, write_record
from scoring.texts import text_digest
from search.engines import EngineChoice
from search.translate import best_texts, translate
from utils.device import peak_memory_mb, reset_peak_memory
from utils.errors import UserError
from utils.io import atomic_write_text
from utils.terminal import draws_in_place


@dataclass
class EvalResult:
    """What ``evaluate_run`` measured: ``record`` is what DIR/eval/<test set>/ keeps of it."""

    folder: Path
    record: EvalRecord
    hypotheses: list[str]

    @property
    def bleu(self) -> float:
        return self.record.bleu

    def summary(self) -> str:
        """One line: test set, BLEU with its CI, chrF, BLEU-4, speed, signature."""
        r = self.record
        low, high = r.bleu_ci95
        return (f"{r.testset}: BLEU {r.bleu:.2f} [{low:.2f}, {high:.2f}] chrF {r.chrf:.2f} "
                f"BLEU-4(nltk) {r.nltk_bleu4:.2f} | {r.n_sentences} sentences, beam "
                f"{r.decode.beam}, {r.sentences_per_second:.1f} sent/s | {r.signature}")


def written(lines: Sequence[str]) -> list[str]:
    """``lines`` as the evaluation's files keep them: one line each, so a newline inside becomes a space
    and a carriage return at the end is dropped (as reading the file back would)."""
    return [line.replace("\n", " ").removesuffix("\r") for line in lines]


def evaluate_run(run: TrainedRun, name: str, sources: list[str], references: list[str],
                 settings: DecodeConfig, device: str = "cpu", engine: EngineChoice | None = None,
                 variant: str | None = None) -> EvalResult:
    """Translate a test set with ``settings`` (on ``engine``, default PyTorch), score it, write
    DIR/eval/<name>/ (DIR: ``run.run_dir``) and return the result; ``variant`` names the study's
    evaluation variant the run is decoded under (the record keeps it)."""
    if not sources:
        raise UserError(f"test set '{name}' is empty: there is nothing to translate or score")
    tok = run.tokenizer
    limit = run.max_source_tokens
    encoded = tok.encode_src(sources)
    cut = sum(len(seq) > limit for seq in encoded)
    if cut:
        print(f"warning: {cut} of {len(sources)} sources of '{name}' are longer than {limit} subword tokens "
              f"(model.positional.max_positions - 1) and were cut", file=sys.stderr)
    ids = [seq[:limit] for seq in encoded]
    reset_peak_memory(device)
    start = time.perf_counter()
    lengths = [len(seq) for seq in tok.encode_tgt(references)] if settings.oracle_length else None
    with tqdm(total=len(ids), desc=f"decoding {name}", unit=" sentences", file=sys.stderr, leave=False,
              disable=not draws_in_place()) as bar:  # a terminal sees the decoding go; a log does not
        hyps = best_texts(translate(run.model, ids, tok, settings, device, engine.engine if engine else None, lengths,
                                    progress=bar.update))
    seconds = time.perf_counter() - start
    peak = peak_memory_mb(device)
    bleu, chrf = corpus_bleu(hyps, references), corpus_chrf(hyps, references)
    low, high = bleu_confidence_interval(hyps, references)
    record = EvalRecord(
        testset=name, run=str(run.run_dir), checkpoint=str(run.checkpoint), step=run.step,
        scheme=run.cfg.model.positional.name, bleu=bleu.value, bleu_ci95=(low, high), signature=bleu.signature,
        chrf=chrf.value, chrf_signature=chrf.signature,
        nltk_bleu4=nltk_bleu4(hyps, references), nltk_tokenization=NLTK_TOKENIZATION,
        seed_char_bleu4=seed_char_bleu4(hyps, references),
        seed_char_bleu4_note="the seed project's figure: NLTK corpus_bleu on raw strings = character 4-grams, "
                             "case-sensitive, no smoothing, 0-1 scale",
        n_sentences=len(sources), decode=DecodeRecord.of(settings, cut), engine=engine.name if engine else "torch",
        seconds=seconds, sentences_per_second=len(sources) / max(seconds, 1e-9),
        by_length=bleu_by_length(sources, hyps, references), decoding_peak_mib=peak,
        sources_sha256=text_digest(written(sources)), references_sha256=text_digest(written(references)),
        variant=variant)
    files = RunDir(run.run_dir).evaluation(name)
    for path, lines in ((files.hypotheses, hyps), (files.references, references), (files.sources, sources)):
        atomic_write_text(path, "".join(line + "\n" for line in written(lines)))
    write_record(files.record, record)
    return EvalResult(files.folder, record, hyps)


def evaluate_splits(run: TrainedRun, names: list[str] | None, settings: DecodeConfig,
                    device: str = "cpu", engine: EngineChoice | None = None,
                    concat: Sequence[int] = (), variant: str | None = None) -> list[EvalResult]:
    """``evaluate_run`` on test splits of the run's own data source (default: its configured
    ``data.test_splits``), and on each split's ``k``-sentence segments for each ``k`` > 1 of
    ``concat`` (``data.concatenated``), as test set ``<split>_concat<k>``."""
    corpus = load_corpus(run.cfg.data, names or run.cfg.data.test_splits)
    return evaluate_sets(run, [(name, split.src, split.tgt) for name, split in corpus.items()], settings, device,
                         engine, concat, variant)


def evaluate_sets(run: TrainedRun, sets: list[tuple[str, Sequence[str], Sequence[str]]], settings: DecodeConfig,
                  device: str = "cpu", engine: EngineChoice | None = None,
                  concat: Sequence[int] = (), variant: str | None = None) -> list[EvalResult]:
    """``evaluate_run`` on each (name, sources, references) of ``sets``, then on its ``k``-sentence
    segments for each ``k`` > 1 of ``concat`` (checked before anything is decoded)."""
    grouped = [(concatenated_name(name, k), *concatenate(src, ref, k)) for name, src, ref in sets
               for k in dict.fromkeys(concat) if k != 1]
    return [evaluate_run(run, name, list(src), list(ref), settings, device, engine, variant)
            for name, src, ref in [*sets, *grouped]]
