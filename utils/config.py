"""YAML configuration: inheritance, command-line overrides, and validation against a typed schema.

A config file may name parent files under the key ``base`` (a path or a list of paths, relative to
the file); parents are deep-merged in order, then the file itself on top. Command-line overrides
``section.key=value`` (value parsed as YAML) come last. The merged mapping is validated against a
schema of dataclasses: an unknown key or a wrong type raises ``ConfigError`` with a one-line message
naming the key, the file it came from and the closest valid names.

This module is the machinery only (``load_structured``, ``build``, ``require``, ``to_dict``,
``dump_config``, ``config_hash``); each section lives beside the code that reads it
(``data.config``, ``tokenizer.config``, ``models.config``, ``experiment.train_config``, ``experiment.decode_config``)
and ``experiment.config`` assembles them into the experiment's ``Config`` (ARCHITECTURE.md, Configs).

The resolved config (``to_dict``) is what a run saves as ``config.yaml`` and reloads.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import types
import typing
from collections.abc import Callable
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
# Loading and merging
# --------------------------------------------------------------------------------------------

COMMAND_LINE = "the command line"


class _Loader(yaml.SafeLoader):
    """YAML's safe loader without implicit timestamps: ``2026-11-28`` stays the string written (a
    declared date is checked by the field that holds it, not turned into a ``date``)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {shown(path)}{_nearest_file(path)}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader without timestamps
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
        value = yaml.load(value_text, Loader=_Loader) if value_text.strip() else ""
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
                origin[".".join(parts[: i + 1])] = COMMAND_LINE  # a section the command line made
            node = child
        node[parts[-1]] = value
        _record_origin(value, origin, COMMAND_LINE, key)


def load_structured(schema: type[T], path: str | Path | None = None,
                    overrides: list[str] | None = None, origin: dict[str, str] | None = None,
                    prepare: Callable[[dict, dict[str, str], str], None] | None = None) -> T:
    """Read a YAML file (with its ``base`` parents), apply overrides, validate against ``schema``.

    ``schema`` is a dataclass whose fields all have defaults (the experiment's ``Config``); with
    no path its defaults are the starting point (overrides still apply). ``origin``, when given, is
    filled with the file (or ``COMMAND_LINE``) that set each dotted key, so that a caller can resolve
    a path relative to the file that named it. ``prepare(tree, origin, default_source)``, when given, sees
    (and may change) the merged tree before it is checked: what the schema depends on is registered there.
    """
    origin = {} if origin is None else origin
    # Start from the schema defaults so that a partial section (e.g. one synthetic split's size)
    # keeps the default entries beside it.
    tree = to_dict(schema())
    if path is not None:
        _merge(tree, _load_tree(Path(path), origin), None, "")
    apply_overrides(tree, list(overrides or []), origin)
    default_source = str(path) if path else COMMAND_LINE
    if prepare is not None:
        prepare(tree, origin, default_source)
    return build(schema, tree, origin, default_source=default_source)


def shown(path: str | Path) -> str:
    """A file as an error names it: relative to the working folder when it lies under it."""
    if str(path) == COMMAND_LINE:
        return COMMAND_LINE
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _nearest_file(path: Path) -> str:
    """"; did you mean X?" naming the YAML file beside ``path`` (or in the nearest folder that exists)
    whose name is closest to its name; "" when none is close."""
    folder = Path(path).parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    if folder == folder.parent:  # no folder of it exists short of the root: nothing to look through
        return ""
    # the folder and its subfolders one level down, never deeper (a mistyped path high up must not walk a disk)
    candidates = {str(p.relative_to(folder)): p for pattern in ("*.y*ml", "*/*.y*ml") for p in folder.glob(pattern)}
    wanted = str(Path(path).relative_to(folder)) if Path(path).is_relative_to(folder) else Path(path).name
    close = difflib.get_close_matches(wanted, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {shown(candidates[close[0]])}?" if close else ""


def _key_line(path: Path, dotted: str) -> int | None:
    """The line (1-based) of key ``dotted`` in the YAML file ``path`` — the deepest of its parts found;
    None when the file cannot be read or holds none of it."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line = None
    for part in re.sub(r"\[\d+\]", "", dotted).split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        if match is None:
            break
        line, node = match[0].start_mark.line + 1, match[1]
    return line


def _where(origin: dict[str, str], default_source: str, *keys: str) -> str:
    """Where the first of ``keys`` that ``origin`` knows was set, for an error: ``FILE:LINE`` (the file
    relative to the working folder) or "the command line"; ``default_source`` when none is known."""
    key = next((k for k in keys if k in origin), None)
    source = origin[key] if key is not None else default_source
    if source in (COMMAND_LINE, "the config") or not Path(source).is_file():
        return shown(source)
    line = _key_line(Path(source), key) if key else None
    return f"{shown(source)}:{line}" if line else shown(source)


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
    where = _where(origin, default_source, prefix.rstrip("."))
    if not isinstance(tree, dict):
        raise ConfigError(f"{where}: '{prefix.rstrip('.')}' must be a mapping, got {tree!r}")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        # a section whose default is a subclass of its declared type (a schema extended at run time,
        # as the positional section's per-scheme options) is checked against that subclass
        factory = f.default_factory
        if dataclasses.is_dataclass(hints[f.name]) and factory not in (dataclasses.MISSING, hints[f.name]):
            made = factory if isinstance(factory, type) else type(factory())  # a function: what it makes now
            if issubclass(made, hints[f.name]):
                hints[f.name] = made
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else (
                f"; valid keys: {', '.join(names)}")
            raise ConfigError(
                f"unknown config key '{dotted}' in {_where(origin, default_source, dotted)}{hint}")
        kwargs[key] = _check(hints[key], value, dotted, origin, default_source)
    try:
        return cls(**kwargs)
    except InvalidValue as err:
        dotted = f"{prefix}{err.field}"
        where = _where(origin, default_source, dotted, prefix.rstrip("."))
        raise ConfigError(f"config key '{dotted}' in {where} must be {err.rule}, got {err.value!r}") from None


def _check(tp: Any, value: Any, dotted: str, origin: dict[str, str], default_source: str) -> Any:
    """Return value converted to type tp, or raise ConfigError naming key, type and value."""

    def fail() -> typing.NoReturn:
        where = _where(origin, default_source, dotted)
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
    ok, converted = _scalar(tp, value, dotted)
    if not ok:
        fail()
    return converted


def _scalar(tp: Any, value: Any, dotted: str) -> tuple[bool, Any]:
    """Whether ``value`` is of the scalar type ``tp`` (None, bool, int, float, str, Any), and it
    converted (an int or a YAML exponent string to float)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is type(None):
        return value is None, None
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads exponents without a dot (3e-4) as strings
            try:
                return True, float(value)
            except ValueError:
                return False, value
        return number, float(value) if number else value
    if tp is str:
        return isinstance(value, str), value
    if tp is Any:
        return True, value
    raise TypeError(f"unsupported schema type {tp!r} for {dotted}")  # a bug in the schema


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    """A nested tree as dotted keys (``{"train": {"lr": 1}}`` -> ``{"train.lr": 1}``); an empty
    section stays a value."""
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def to_dict(cfg: Any) -> dict:
    """The resolved config as plain Python data (what a run writes to config.yaml)."""
    return dataclasses.asdict(cfg)


def dump_config(cfg: Any) -> str:
    """YAML text of the resolved config (or of its ``to_dict`` tree)."""
    return yaml.safe_dump(cfg if isinstance(cfg, dict) else to_dict(cfg), sort_keys=False, allow_unicode=True)


def config_hash(cfg: Any) -> str:
    """Short stable hash of a (sub)config or of its ``to_dict`` tree, for fingerprints and manifests."""
    blob = json.dumps(cfg if isinstance(cfg, dict) else to_dict(cfg), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
