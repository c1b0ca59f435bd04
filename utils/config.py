"""YAML configuration: inheritance, command-line overrides, and validation against a typed schema.

A config file may name parent files under the key ``base`` (a path or a list of paths, relative to
the file); parents are deep-merged in order, then the file itself on top. Command-line overrides
``section.key=value`` (value parsed as YAML) come last. The merged mapping is validated against a
schema of dataclasses: an unknown key or a wrong type raises ``ConfigError`` with a one-line message
naming the key, the file it came from and the closest valid names.

This module is the ground: the machinery (``load_structured``, ``build``, ``to_dict``, ``dump_config``,
``config_hash``) and the sections that need nothing above it (data, tokenizer, train, decode).
``models.config`` owns the model section (its positional part is collected from the scheme
registry) and ``experiment.config`` assembles the whole experiment's ``Config``.

The resolved config (``to_dict``) is what a run saves as ``config.yaml`` and reloads.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from utils.errors import ConfigError

T = TypeVar("T")


class InvalidValue(ConfigError):
    """Raised by a section's ``__post_init__``: ``field`` (relative to the section) breaks ``rule``.
    Validation turns it into a ``ConfigError`` naming the whole key and the file it came from."""

    def __init__(self, field: str, rule: str, value: Any):
        super().__init__(f"'{field}' must be {rule}, got {value!r}")
        self.field, self.rule, self.value = field, rule, value


def require(ok: bool, field: str, rule: str, value: Any) -> None:
    """``InvalidValue(field, rule, value)`` unless ``ok``."""
    if not ok:
        raise InvalidValue(field, rule, value)


# --------------------------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------------------------


@dataclass
class HFDatasetSpec:
    """``data.hf``: a translation corpus read with Hugging Face ``datasets`` (``data.source: hf``).

    ``name``: a hub dataset id (``wmt/wmt14``) or a local folder — one written by
    ``Dataset(Dict).save_to_disk``, or parquet / JSON Lines files, either directly in
    ``<folder>/<split>/`` or in the hub's converted layout ``<folder>/<config>/<split>/``.
    Each row holds either a ``translation`` dict keyed by language code (``translation_field``, as
    IWSLT, WMT and OPUS on the hub) or two text columns (``src_column``, ``tgt_column``).
    """

    name: str = ""
    config: str = ""  # the dataset's configuration (hub: e.g. fr-en), if it has several
    revision: str = ""  # hub branch, tag or commit ("" = main)
    split_map: dict[str, str] = field(default_factory=dict)  # our split name -> the dataset's
    translation_field: str = "translation"
    src_column: str = ""  # both set: two text columns instead of the translation dict
    tgt_column: str = ""

    def __post_init__(self) -> None:
        require(bool(self.src_column) == bool(self.tgt_column), "src_column",
                "set together with tgt_column (or neither)", self.src_column)


@dataclass
class SplitSpec:
    """One split of the synthetic corpus: its size and its French length range (words)."""

    size: int = 1000
    min_words: int = 3
    max_words: int = 12

    def __post_init__(self) -> None:
        require(self.size >= 1, "size", "at least 1", self.size)
        require(self.min_words >= 1, "min_words", "at least 1", self.min_words)
        require(self.max_words >= self.min_words, "max_words", f"at least min_words ({self.min_words})",
                self.max_words)


def _default_synthetic_splits() -> dict[str, SplitSpec]:
    return {
        "train": SplitSpec(size=20000, min_words=3, max_words=12),
        "validation": SplitSpec(size=500, min_words=3, max_words=12),
        "test": SplitSpec(size=500, min_words=3, max_words=12),
        "test_long": SplitSpec(size=500, min_words=16, max_words=30),
    }


@dataclass
class DataConfig:
    """Where the (French, English) pairs come from and which splits play which role."""

    source: Literal["synthetic", "parallel_text", "iwslt2017", "hf"] = "synthetic"
    # Seeds the data itself (the synthetic grammar's sentences), not the run: runs that differ in
    # their ``seed`` (training randomness) share their data and test sets.
    seed: int = 1
    # parallel_text: folder holding <split>.<src_lang>[.gz] / <split>.<tgt_lang>[.gz];
    # iwslt2017: an unpacked raw WIT3 release (empty: download from the Hugging Face hub).
    dir: str = ""
    src_lang: str = "fr"
    tgt_lang: str = "en"
    train_split: str = "train"
    valid_split: str = "validation"
    test_splits: list[str] = field(default_factory=lambda: ["test"])
    # Training pairs with more tokens than this (either side) are dropped, as are empty pairs.
    max_len: int = 256
    # Length-extrapolation studies: training and validation pairs whose source has more than this
    # many words (whitespace-separated) are dropped; test splits never. 0: no limit.
    max_src_words: int = 0
    synthetic: dict[str, SplitSpec] = field(default_factory=_default_synthetic_splits)
    hf: HFDatasetSpec = field(default_factory=HFDatasetSpec)  # data.source: hf
    # Where tokenized splits and trained tokenizers are cached across runs (keyed by fingerprint).
    cache_dir: str = "runs/cache"

    def __post_init__(self) -> None:
        require(self.max_len >= 1, "max_len", "at least 1", self.max_len)
        require(self.max_src_words >= 0, "max_src_words", "0 (no limit) or more", self.max_src_words)
        require(len(self.test_splits) >= 1, "test_splits", "a list of at least one split name", self.test_splits)


@dataclass
class TokenizerConfig:
    """Subword tokenizer: SentencePiece trained on the training split, or a pretrained HF one."""

    type: Literal["sentencepiece", "pretrained"] = "sentencepiece"
    model_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both languages (allows tied embeddings)
    character_coverage: float = 1.0
    # Sentences sampled (per language) to train SentencePiece; 0 uses them all.
    input_sentence_size: int = 1000000
    # tokenizer.type=pretrained: a Hugging Face name or a local folder.
    name: str = "Helsinki-NLP/opus-mt-fr-en"

    def __post_init__(self) -> None:
        require(self.vocab_size >= 8, "vocab_size", "at least 8 (4 special pieces and some text)", self.vocab_size)
        require(0 < self.character_coverage <= 1, "character_coverage", "in (0, 1]", self.character_coverage)
        require(self.input_sentence_size >= 0, "input_sentence_size", "0 (all) or more", self.input_sentence_size)


@dataclass
class TrainConfig:
    """Optimisation and batching."""

    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1.0  # with schedule inverse_sqrt: the factor in front of d_model^-0.5 * ...
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    schedule: Literal["inverse_sqrt", "linear", "cosine", "warmup_exp", "constant"] = "inverse_sqrt"
    warmup_steps: int = 4000
    label_smoothing: float = 0.1
    max_tokens: int = 4096  # token budget per batch (padded source or target tokens)
    batch_size: int = 0  # sentences per batch; 0 uses max_tokens
    max_steps: int = 0  # 0: no step limit
    max_epochs: int = 20
    lr_decay: float = 0.95  # schedule warmup_exp: multiplier per epoch after warm-up
    clip_norm: float = 0.0  # 0: no gradient clipping
    accumulate: int = 1  # batches per optimizer update
    num_workers: int = 0
    amp: Literal["auto", "none", "bf16", "fp16"] = "auto"  # auto: bf16 on CUDA when supported, fp32 on CPU
    compile: bool = False  # torch.compile the model
    deterministic: bool = False  # torch.use_deterministic_algorithms
    eval_every: int = 0  # validate every N updates; 0: at the end of each epoch
    valid_bleu_sentences: int = 0  # greedy-translate this many validation sentences for BLEU; 0: all
    best_metric: Literal["bleu", "loss", "accuracy"] = "bleu"
    patience: int = 0  # stop after this many validations without improvement; 0: never
    keep_last: int = 3  # step_<N>.pt checkpoints kept besides last.pt and best.pt
    log_every: int = 50  # updates between log lines / TensorBoard points

    def __post_init__(self) -> None:
        require(self.lr >= 0, "lr", "0 or more (0 freezes the weights)", self.lr)
        require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas", "two values in [0, 1)",
                self.betas)
        require(self.eps > 0, "eps", "positive", self.eps)
        require(self.weight_decay >= 0, "weight_decay", "0 or more", self.weight_decay)
        require(0 <= self.label_smoothing < 1, "label_smoothing", "in [0, 1)", self.label_smoothing)
        require(self.max_tokens >= 1, "max_tokens", "at least 1", self.max_tokens)
        require(self.lr_decay > 0, "lr_decay", "positive", self.lr_decay)
        require(self.max_epochs >= 1, "max_epochs", "at least 1", self.max_epochs)
        require(self.accumulate >= 1, "accumulate", "at least 1", self.accumulate)
        require(self.log_every >= 1, "log_every", "at least 1", self.log_every)
        for name in ("warmup_steps", "batch_size", "max_steps", "clip_norm", "num_workers", "eval_every",
                     "valid_bleu_sentences", "patience", "keep_last"):
            require(getattr(self, name) >= 0, name, "0 or more", getattr(self, name))


@dataclass
class DecodeConfig:
    """Translation settings (validation BLEU, test.py, inference.py)."""

    beam: int = 5  # 1: greedy
    len_penalty: float = 1.0  # GNMT alpha: score / ((5 + len) / 6)^alpha
    max_len_a: float = 1.5  # output length limit a * source_length + b
    max_len_b: int = 10
    batch_size: int = 64  # sentences translated at once
    # beam search stops a sentence when no live hypothesis can beat its K finished ones ("exact"),
    # or as soon as K have finished ("first_k", fairseq's rule); see search/beam.py
    stopping: str = "exact"

    def __post_init__(self) -> None:
        require(self.beam >= 1, "beam", "at least 1 (1: greedy)", self.beam)
        require(self.stopping in ("exact", "first_k"), "stopping", "exact or first_k", self.stopping)
        require(self.len_penalty >= 0, "len_penalty", "0 or more", self.len_penalty)
        require(self.max_len_a >= 0, "max_len_a", "0 or more", self.max_len_a)
        require(self.max_len_b >= 0 and (self.max_len_a > 0 or self.max_len_b > 0), "max_len_b",
                "0 or more, and positive when max_len_a is 0", self.max_len_b)
        require(self.batch_size >= 1, "batch_size", "at least 1", self.batch_size)


# --------------------------------------------------------------------------------------------
# Loading and merging
# --------------------------------------------------------------------------------------------

COMMAND_LINE = "the command line"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def _merge(dst: dict, src: dict, origin: dict[str, str] | None, source: str, prefix: str = "") -> None:
    """Deep-merge src into dst in place; record in ``origin`` (if given) which file set each key."""
    for key, value in src.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge(dst[key], value, origin, source, dotted + ".")
        else:
            dst[key] = _copy(value)
            if origin is not None:
                _record_origin(value, origin, source, dotted)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _record_origin(value: Any, origin: dict[str, str], source: str, dotted: str) -> None:
    origin[dotted] = source
    if isinstance(value, dict):
        for k, v in value.items():
            _record_origin(v, origin, source, f"{dotted}.{k}")


def _load_tree(path: Path, origin: dict[str, str], stack: tuple[Path, ...] = ()) -> dict:
    path = path.resolve()
    if path in stack:
        chain = " -> ".join(str(p) for p in (*stack, path))
        raise ConfigError(f"config inheritance cycle: {chain}")
    raw = _read_yaml(path)
    parents = raw.pop("base", [])
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise ConfigError(f"{path}: 'base' must be a file name or a list of file names")
    merged: dict = {}
    for parent in parents:
        parent_path = (path.parent / parent) if not os.path.isabs(parent) else Path(parent)
        if not parent_path.exists():
            raise ConfigError(f"{path}: base file not found: {parent}")
        _merge(merged, _load_tree(parent_path, origin, (*stack, path)), origin, str(parent_path))
    # Keys of the parents keep the origin recorded while loading them; this file's keys win.
    _merge(merged, raw, origin, str(path))
    return merged


def parse_override(text: str) -> tuple[str, Any]:
    """``section.key=value`` -> (dotted key, value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like section.key=value")
    key, value_text = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override '{text}' has an empty key")
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else ""
    except yaml.YAMLError:
        value = value_text
    return key, value


def apply_overrides(tree: dict, overrides: list[str], origin: dict[str, str]) -> None:
    """Set each ``a.b.c=value`` in the nested mapping, creating sections as needed."""
    for text in overrides:
        key, value = parse_override(text)
        parts = key.split(".")
        node = tree
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if not isinstance(child, dict):
                if child is not None:
                    raise ConfigError(
                        f"override '{text}': '{'.'.join(parts[: i + 1])}' is not a section")
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
        _record_origin(value, origin, COMMAND_LINE, key)


def load_structured(schema: type[T], path: str | Path | None = None,
                    overrides: list[str] | None = None) -> T:
    """Read a YAML file (with its ``base`` parents), apply overrides, validate against ``schema``.

    ``schema`` is a dataclass whose fields all have defaults (the experiment's ``Config``); with
    no path its defaults are the starting point (overrides still apply).
    """
    origin: dict[str, str] = {}
    # Start from the schema defaults so that a partial section (e.g. one synthetic split's size)
    # keeps the default entries beside it.
    tree = to_dict(schema())
    if path is not None:
        _merge(tree, _load_tree(Path(path), origin), None, "")
    apply_overrides(tree, list(overrides or []), origin)
    return build(schema, tree, origin, default_source=str(path) if path else COMMAND_LINE)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def build(schema: type[T], tree: dict, origin: dict[str, str] | None = None,
          default_source: str = "the config") -> T:
    """A validated ``schema`` instance from a nested mapping (unknown keys and wrong types are
    ``ConfigError``s naming the key and the file it came from)."""
    return _build(schema, tree, "", origin or {}, default_source)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"mapping of {_type_name(typing.get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _build(cls: type, tree: Any, prefix: str, origin: dict[str, str], default_source: str) -> Any:
    where = origin.get(prefix.rstrip("."), default_source)
    if not isinstance(tree, dict):
        raise ConfigError(f"{where}: '{prefix.rstrip('.')}' must be a mapping, got {tree!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else (
                f"; valid keys: {', '.join(names)}")
            raise ConfigError(
                f"unknown config key '{dotted}' in {origin.get(dotted, default_source)}{hint}")
        kwargs[key] = _check(hints[key], value, dotted, origin, default_source)
    try:
        return cls(**kwargs)
    except InvalidValue as err:
        dotted = f"{prefix}{err.field}"
        where = origin.get(dotted, origin.get(prefix.rstrip("."), default_source))
        raise ConfigError(f"config key '{dotted}' in {where} must be {err.rule}, got {err.value!r}") from None


def _check(tp: Any, value: Any, dotted: str, origin: dict[str, str], default_source: str) -> Any:
    """Return value converted to type tp, or raise ConfigError naming key, type and value."""

    def fail() -> typing.NoReturn:
        where = origin.get(dotted, default_source)
        raise ConfigError(
            f"config key '{dotted}' in {where} must be {_type_name(tp)}, got {value!r}")

    if dataclasses.is_dataclass(tp):
        return _build(tp, value, dotted + ".", origin, default_source)
    org = typing.get_origin(tp)
    if org is Literal:
        if value not in typing.get_args(tp):
            fail()
        return value
    if org in (Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _check(arg, value, dotted, origin, default_source)
            except ConfigError:
                continue
        fail()
    if org is list:
        if not isinstance(value, (list, tuple)):
            fail()
        (item,) = typing.get_args(tp)
        return [_check(item, v, f"{dotted}[{i}]", origin, default_source)
                for i, v in enumerate(value)]
    if org is dict:
        if not isinstance(value, dict):
            fail()
        _, item = typing.get_args(tp)
        return {str(k): _check(item, v, f"{dotted}.{k}", origin, default_source)
                for k, v in value.items()}
    if tp is type(None):
        if value is not None:
            fail()
        return None
    if tp is bool:
        if not isinstance(value, bool):
            fail()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail()
        return value
    if tp is float:
        if isinstance(value, str):
            # YAML 1.1 reads exponents without a dot (3e-4) as strings.
            try:
                return float(value)
            except ValueError:
                fail()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail()
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            fail()
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported schema type {tp!r} for {dotted}")  # a bug in the schema


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------


def to_dict(cfg: Any) -> dict:
    """The resolved config as plain Python data (what a run writes to config.yaml)."""
    return dataclasses.asdict(cfg)


def dump_config(cfg: Any) -> str:
    """YAML text of the resolved config."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True)


def config_hash(cfg: Any) -> str:
    """Short stable hash of a (sub)config or of its ``to_dict`` tree, for fingerprints and manifests."""
    blob = json.dumps(cfg if isinstance(cfg, dict) else to_dict(cfg), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
