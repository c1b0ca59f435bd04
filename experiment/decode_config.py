"""The ``decode`` section of the config: how to translate. One dataclass serves the YAML section
(validation BLEU during training, the defaults of ``test.py`` and ``inference.py``) and the settings
a command resolves from it and its flags (``resolve_settings``); each rule is checked here, once.
``DecodeRecord`` is what results.json keeps of it, its ``rule()`` the part that decides the
hypotheses. It lives in ``experiment``, below ``search`` and every command that translates, so that
``experiment.config`` assembles the whole ``Config`` without importing upwards."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from utils.config import InvalidValue, require
from utils.errors import UserError

STOPPING_RULES = ("exact", "first_k")
LENGTH_PENALTY_FORMS = ("gnmt", "power")  # search.beam.length_penalty
ENGINES = ("auto", "torch", "ctranslate2")  # search.engines.choose_engine


@dataclass(frozen=True)
class DecodeConfig:
    """``beam`` 1 is greedy search; ``nbest`` hypotheses kept per sentence (1 <= nbest <= beam);
    length penalty ``len_penalty`` (alpha: score / ((5 + len) / 6)^alpha, GNMT's; with
    ``len_penalty_form`` ``power`` score / len^alpha, `transformers`' and CTranslate2's); output length limit
    ``max_len_a * source_length + max_len_b``; ``batch_size`` sentences decoded at once; beam
    search's ``stopping`` rule: ``exact`` stops a sentence when no live hypothesis can beat its
    ``beam`` finished ones, ``first_k`` as soon as ``beam`` have finished (fairseq's rule; see
    ``search.beam``). ``oracle_length``, a control of the length study (Newman et al. 2020): each
    hypothesis has exactly its reference's number of target tokens (end of sentence forbidden before,
    the hypothesis closed at it), so only an evaluation, which has the references, decodes with it."""

    beam: int = 5  # beam size; 1: greedy search
    nbest: int = 1  # hypotheses kept per sentence
    len_penalty: float = 1.0  # GNMT's alpha: score / ((5 + length) / 6)^alpha
    len_penalty_form: str = "gnmt"  # gnmt: ((5 + length) / 6)^alpha; power: length^alpha (transformers, CTranslate2)
    max_len_a: float = 1.5  # output length limit: max_len_a * source length + max_len_b
    max_len_b: int = 10  # see max_len_a
    batch_size: int = 64  # sentences decoded at once
    stopping: str = "exact"  # exact: no live hypothesis can win; first_k: beam finished (fairseq)
    oracle_length: bool = False  # a test-time control: every hypothesis as long as its reference, in tokens

    def __post_init__(self) -> None:
        require(self.beam >= 1, "beam", "at least 1 (1: greedy)", self.beam)
        require(1 <= self.nbest <= self.beam, "nbest", f"between 1 and beam ({self.beam})", self.nbest)
        require(self.stopping in STOPPING_RULES, "stopping", " or ".join(STOPPING_RULES), self.stopping)
        require(self.len_penalty >= 0, "len_penalty", "0 or more", self.len_penalty)
        require(self.len_penalty_form in LENGTH_PENALTY_FORMS, "len_penalty_form", " or ".join(LENGTH_PENALTY_FORMS),
                self.len_penalty_form)
        require(self.max_len_a >= 0, "max_len_a", "0 or more", self.max_len_a)
        require(self.max_len_b >= 0 and (self.max_len_a > 0 or self.max_len_b > 0), "max_len_b",
                "0 or more, and positive when max_len_a is 0", self.max_len_b)
        require(self.batch_size >= 1, "batch_size", "at least 1", self.batch_size)


# the command-line flag that sets each field in resolve_settings
_FLAGS = {"beam": "--beam", "nbest": "--nbest", "batch_size": "--batch-size", "stopping": "--stopping",
          "len_penalty": "--len-penalty"}


def resolve_settings(
    cfg: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    batch_size: int | None = None,
    greedy: bool = False,
    stopping: str | None = None,
    len_penalty: float | None = None,
) -> DecodeConfig:
    """The run's ``decode`` section with command-line values on top (None: keep the config's).

    ``greedy`` is beam 1. A value that breaks a rule is a one-line ``UserError`` naming its flag
    (the config's own values were checked when it was loaded).
    """
    if greedy and beam not in (None, 1):
        raise UserError("--greedy and --beam go separately (greedy search is beam 1)")
    beam = 1 if greedy else beam
    if nbest is None and beam is not None:
        nbest = min(cfg.nbest, beam)  # a smaller beam given alone keeps as many as it can
    changes = {"beam": beam, "nbest": nbest, "batch_size": batch_size, "stopping": stopping, "len_penalty": len_penalty}
    try:
        return dataclasses.replace(cfg, **{k: v for k, v in changes.items() if v is not None})
    except InvalidValue as err:
        raise UserError(f"{_FLAGS.get(err.field, err.field)} must be {err.rule}, got {err.value!r}") from None


@dataclass(frozen=True)
class DecodeRecord:
    """The ``decode`` object of an evaluation record (results.json): how its hypotheses were found, and how
    many sources were cut to fit the model (``cut_sources``). ``stopping`` None: a record from before the
    rule was named, whose beam search was fairseq's (``first_k``); ``oracle_length`` and
    ``len_penalty_form`` are written only when not the usual, so records from before those options
    read as they were written (``tree`` gives back the same keys in the same order)."""

    beam: int
    len_penalty: float
    max_len_a: float
    max_len_b: int
    batch_size: int
    cut_sources: int
    stopping: str | None = None
    oracle_length: bool = False
    len_penalty_form: str = "gnmt"

    @classmethod
    def of(cls, settings: DecodeConfig, cut_sources: int) -> DecodeRecord:
        """What an evaluation decoded with ``settings`` records."""
        return cls(beam=settings.beam, len_penalty=settings.len_penalty, max_len_a=settings.max_len_a,
                   max_len_b=settings.max_len_b, batch_size=settings.batch_size, cut_sources=cut_sources,
                   stopping=settings.stopping, oracle_length=settings.oracle_length,
                   len_penalty_form=settings.len_penalty_form)

    @classmethod
    def from_tree(cls, tree: dict) -> DecodeRecord:
        """The record's ``decode`` object as read from JSON; a ``ValueError`` names a key it lacks or
        does not know (the reader names the file)."""
        fields = dataclasses.fields(cls)
        unknown = sorted(set(tree) - {f.name for f in fields})
        missing = [f.name for f in fields if f.default is dataclasses.MISSING and f.name not in tree]
        if unknown or missing:
            raise ValueError(f"unknown key 'decode.{unknown[0]}'" if unknown else f"missing key 'decode.{missing[0]}'")
        return cls(**tree)

    def tree(self) -> dict:
        """The JSON form: the keys every record has, ``stopping`` where named, and the two options
        only where they are not the usual."""
        return {"beam": self.beam, "len_penalty": self.len_penalty, "max_len_a": self.max_len_a,
                "max_len_b": self.max_len_b, **({"stopping": self.stopping} if self.stopping is not None else {}),
                "batch_size": self.batch_size, "cut_sources": self.cut_sources,
                **({"oracle_length": True} if self.oracle_length else {}),
                **({"len_penalty_form": self.len_penalty_form} if self.len_penalty_form != "gnmt" else {})}

    def rule(self) -> dict:
        """What decides the hypotheses (not the batch size, nor the sources cut): greedy search has no
        stopping rule and no length penalty form; an unnamed rule is ``first_k`` (class doc)."""
        return {
            "beam": self.beam,
            "len_penalty": self.len_penalty,
            "max_len_a": self.max_len_a,
            "max_len_b": self.max_len_b,
            "stopping": None if self.beam == 1 else self.stopping or "first_k",
            "oracle_length": self.oracle_length,
            **({"len_penalty_form": self.len_penalty_form} if self.len_penalty_form != "gnmt" and self.beam > 1
               else {}),
        }
