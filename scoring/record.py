"""The evaluation record: what ``search.evaluate`` measured of one run on one test set, kept as
DIR/eval/<test set>/results.json (``experiment.run_dir.EvalFiles.record``). This module alone
reads and writes it; every other one sees the typed ``EvalRecord``.

Versions (``version``): 1, the records written before the field existed (no ``engine`` before
the CTranslate2 engine came: every such record was decoded by the PyTorch model), is migrated on
read; 2 adds ``version`` and always has ``engine``; 3 adds the checksums of the sources and
references the hypotheses were scored against (``scoring.texts.text_digest``), through which an
archive finds them among its stored test sets (``experiment.run_dir.ArchiveDir``; a record of an
earlier version has none (None) until ``nmt archive migrate`` writes them), and ``variant``, the
study's evaluation variant that decoded the run again (None: as trained).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from experiment.decode_config import DecodeRecord
from utils.errors import UserError
from utils.io import atomic_write_text, stored_version

VERSION = 3


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation: the scores, how the hypotheses were decoded, and what produced them."""

    testset: str
    run: str  # the run directory, as given to the evaluation
    checkpoint: str  # the weights' file
    step: int | None  # the checkpoint's update
    scheme: str
    bleu: float  # sacreBLEU corpus BLEU
    bleu_ci95: tuple[float, float]  # its 95% sentence-bootstrap interval
    signature: str  # sacreBLEU's BLEU signature
    chrf: float
    chrf_signature: str
    nltk_bleu4: float  # NLTK's corpus BLEU-4 on the tokenization named next, 0-100
    nltk_tokenization: str
    seed_char_bleu4: float  # the seed project's figure (character 4-grams, 0-1)
    seed_char_bleu4_note: str
    n_sentences: int
    decode: DecodeRecord  # the decoding settings and the sources cut
    engine: str  # torch or ctranslate2
    seconds: float  # decoding wall time
    sentences_per_second: float
    by_length: list[dict] = field(default_factory=list)  # BLEU per source-length bucket
    decoding_peak_mib: float | None = None  # GPU: peak allocated while decoding; CPU: the process's peak RSS
    sources_sha256: str | None = None  # scoring.texts.text_digest of the sources translated
    references_sha256: str | None = None  # and of the references scored against
    variant: str | None = None  # a study's evaluation variant that decoded it (None: the run as trained)
    version: int = VERSION


FIELDS = [f.name for f in dataclasses.fields(EvalRecord)]
DEFAULTED = {f.name for f in dataclasses.fields(EvalRecord)  # fields a record may leave out
             if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}


def migrate(tree: dict) -> dict:
    """A record of any earlier version as the current version's fields."""
    tree, version = stored_version(tree, VERSION, "record")
    if version == 1:
        tree.setdefault("engine", "torch")
    tree["version"] = VERSION  # 2 -> 3 adds defaulted fields only
    return tree


def read_record(path: Path) -> EvalRecord:
    """The record at ``path`` (migrated); a missing, unreadable or foreign file is one line."""
    path = Path(path)
    try:
        tree = migrate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: cannot read the evaluation record ({str(err).splitlines()[0]})") from None
    unknown, missing = sorted(set(tree) - set(FIELDS)), [f for f in FIELDS if f not in tree and f not in DEFAULTED]
    if unknown or missing:
        what = f"unknown key '{unknown[0]}'" if unknown else f"missing key '{missing[0]}'"
        raise UserError(f"{path}: not an evaluation record of version {VERSION} ({what})")
    try:
        decode = DecodeRecord.from_tree(tree["decode"])
    except (ValueError, TypeError) as err:  # TypeError: a decode that is not an object
        raise UserError(f"{path}: not an evaluation record of version {VERSION} ({err})") from None
    return EvalRecord(**{**tree, "bleu_ci95": tuple(tree["bleu_ci95"]), "decode": decode})


def write_record(path: Path, record: EvalRecord) -> None:
    """``record`` as JSON at ``path``, written atomically."""
    tree = dataclasses.asdict(record)
    tree["bleu_ci95"] = list(record.bleu_ci95)
    tree["decode"] = record.decode.tree()
    atomic_write_text(Path(path), json.dumps(tree, indent=2, ensure_ascii=False) + "\n")
