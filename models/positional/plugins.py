"""Schemes from outside the repository: a Python file a config or study names
(``model.positional.plugins: [my_pe.py]``, relative to the file naming it) or an installed package's
entry point in the group ``nmt.schemes`` (the entry point's name is the scheme's, its object the class).

A plugin file declares the schemes it adds as a mapping at module level::

    SCHEMES = {"my_pe": MyPositional}   # name -> PositionalEncoding subclass with its SchemeCard

Each is registered under its own name beside the built-ins (``register``) after the checks a built-in
passes by construction, each refused in one line naming the file: a name that clashes with a registered
scheme, a card missing a field (``REQUIRED_CARD_FIELDS``), a constructor that does not take
``(kind, model_cfg)``, options that are not a dataclass with defaults, and a file that does not import
(its error's last line and the file's line). ``SOURCES`` records where each plugin scheme came from —
its file's SHA-256, or its package and version — which a run's manifest keeps and a study's tables compare.
One plugin (a file's name, a package) holds its names in a process: loading it again, or another version of
it (a run's copy), registers the latest; the built-ins are ``models.positional.builtin_schemes()``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard
from models.positional.registry import SCHEMES
from utils.config import shown
from utils.errors import UserError

ENTRY_POINT_GROUP = "nmt.schemes"
REQUIRED_CARD_FIELDS = ("summary", "paper")  # what docs/schemes.md and the report's references read
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")  # no '+' (joins schemes) and no '-' (a run folder's -seedN)


class PluginError(UserError):
    """A plugin scheme refused: its file (or package) and the reason, in one line."""


@dataclass(frozen=True)
class PluginSource:
    """Where a plugin scheme came from: ``file`` (its path) and ``sha256`` of its bytes, or ``package``
    and ``version`` of the installed distribution whose entry point names it."""

    file: str = ""
    sha256: str = ""
    package: str = ""
    version: str = ""

    def record(self) -> dict[str, str]:
        """The manifest's form: the fields that are set, a file by its name (where it lay is not the plugin's)."""
        tree = {k: v for k, v in dataclasses.asdict(self).items() if v}
        if self.file:
            tree["file"] = Path(self.file).name
        return tree

    @property
    def plugin(self) -> str:
        """Which plugin it is, whatever its version: the file's name or the package's."""
        return f"file {Path(self.file).name}" if self.file else f"package {self.package}"

    @property
    def version_key(self) -> str:
        """What two runs of one plugin must share to sit in one table: the file's digest or the package's version."""
        return f"sha256 {self.sha256[:16]}" if self.sha256 else f"{self.package} {self.version}"


SOURCES: dict[str, PluginSource] = {}  # plugin scheme name -> its source (the built-ins have none)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_scheme(name: str, scheme: object, where: str) -> None:
    """Refuse, in one line naming ``where``, a scheme the suite could not serve: a bad name, not a
    ``PositionalEncoding`` subclass, a card missing a field, a constructor other than ``(kind, model_cfg)``,
    options that are not a dataclass whose fields all have defaults."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise PluginError(f"{where}: scheme name {name!r} must be lowercase letters, digits and _ (starting with a "
                          "letter): '+' joins schemes and '-' ends a run's folder name")
    if not (isinstance(scheme, type) and issubclass(scheme, PositionalEncoding)):
        raise PluginError(f"{where}: scheme '{name}' is {scheme!r}, not a subclass of "
                          "models.positional.PositionalEncoding")
    card = scheme.__dict__.get("card")
    if not isinstance(card, SchemeCard):
        raise PluginError(f"{where}: scheme '{name}' ({scheme.__name__}) declares no card = SchemeCard(...) of its own")
    missing = [f for f in REQUIRED_CARD_FIELDS if not str(getattr(card, f)).strip()]
    if missing:
        raise PluginError(f"{where}: scheme '{name}''s card is missing {' and '.join(missing)} (SchemeCard("
                          f"{', '.join(f'{f}=...' for f in missing)}): docs/schemes.md and the report's references "
                          "read them")
    try:
        inspect.signature(scheme).bind("encoder", None)
    except TypeError:
        raise PluginError(f"{where}: scheme '{name}''s constructor {scheme.__name__}{inspect.signature(scheme)} must "
                          "take (kind, model_cfg), as build_positional calls it") from None
    options = scheme.Options
    if options is not None:
        if not dataclasses.is_dataclass(options):
            raise PluginError(f"{where}: scheme '{name}''s Options must be a dataclass (its config section "
                              f"model.positional.{name}), got {options!r}")
        try:
            options()
        except TypeError as err:
            raise PluginError(f"{where}: scheme '{name}''s Options must give every field a default ({err})") from None


def register(name: str, scheme: type[PositionalEncoding], source: PluginSource, where: str) -> None:
    """Add ``scheme`` to the registry under ``name`` after ``check_scheme``; the same scheme from the same
    source again is a no-op, anything else under a registered name a clash."""
    check_scheme(name, scheme, where)
    if name in SCHEMES:
        if name in SOURCES and SOURCES[name].plugin == source.plugin:
            SCHEMES[name], SOURCES[name] = scheme, source  # the same plugin (again, or another version): the latest
            return
        holder = SCHEMES[name]
        owner = f"the plugin {SOURCES[name].version_key}" if name in SOURCES else "a built-in scheme"
        raise PluginError(f"{where}: scheme '{name}' clashes with the registered '{name}' ({owner}: "
                          f"{holder.__module__}.{holder.__qualname__}); give it another name")
    SCHEMES[name] = scheme
    SOURCES[name] = source


def _import_error(err: BaseException, path: Path) -> str:
    """The error's last line, and the line of the plugin file where it was raised when the traceback has one."""
    last = traceback.format_exception_only(type(err), err)[-1].strip()
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if Path(frame.filename) == path]
    if isinstance(err, SyntaxError) and err.lineno:
        lines.append(err.lineno)
    return f"{shown(path)}{f':{lines[-1]}' if lines else ''} does not import: {last}"


def load_file(path: str | Path) -> list[str]:
    """Import the plugin file ``path`` and register the schemes its ``SCHEMES`` mapping declares; their
    names, in its order. A file already loaded with the same bytes is not imported again."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PluginError(f"plugin file not found: {shown(path)}")
    digest = file_digest(path)
    source = PluginSource(file=str(path), sha256=digest)
    module_name = "nmt_plugin_" + re.sub(r"\W", "_", path.stem) + "_" + digest[:12]
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise PluginError(f"{shown(path)} is not a Python file a plugin can be")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 (whatever the file raises is reported in one line)
            del sys.modules[module_name]
            raise PluginError(_import_error(err, path)) from None
    declared = getattr(module, "SCHEMES", None)
    if not isinstance(declared, dict) or not declared:
        raise PluginError(f"{shown(path)} declares no schemes: it needs SCHEMES = {{'name': YourPositional}} at module "
                          "level")
    for name, scheme in declared.items():
        register(name, scheme, source, shown(path))
    return list(declared)


def load_installed(names: list[str] | None = None) -> list[str]:
    """Register the installed packages' schemes (entry points of ``ENTRY_POINT_GROUP``): those named in
    ``names``, or every one when None. Returns the names registered."""
    found = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if names is not None and entry.name not in names:
            continue
        dist = entry.dist
        source = PluginSource(package=dist.name if dist else entry.module, version=dist.version if dist else "")
        where = f"the entry point {entry.name} = {entry.value} ({source.package} {source.version})"
        try:
            scheme = entry.load()
        except Exception as err:  # noqa: BLE001 (the package's own error, in one line)
            raise PluginError(f"{where} does not import: {traceback.format_exception_only(type(err), err)[-1].strip()}") \
                from None
        register(entry.name, scheme, source, where)
        found.append(entry.name)
    return found
