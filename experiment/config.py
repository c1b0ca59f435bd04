"""The whole experiment's config: ``seed`` and the sections data, tokenizer, model, train, decode.

Each section is a dataclass in the lowest layer that may hold it: beside the code that reads it
where that code sits below this module (``data.config``, ``tokenizer.config``, ``models.config``
with the positional schemes' options), here in ``experiment`` where its readers sit above
(``experiment.train_config``, ``experiment.decode_config``); this module assembles them and loads
YAML files into the result (``utils.config`` does the inheritance, overrides and validation).
The resolved config is what a run saves as ``config.yaml`` and reloads.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from data.config import DataConfig
from experiment.decode_config import DecodeConfig
from experiment.train_config import TrainConfig
from models.config import TEST_TIME_SECTIONS, ModelConfig, prepare_schemes
from models.positional.plugins import SOURCES
from models.positional.registry import scheme_parts
from tokenizer.config import TokenizerConfig
from utils.config import COMMAND_LINE, build, config_hash, dump_config, load_structured, shown, to_dict
from utils.errors import ConfigError

PLUGINS_KEY = "model.positional.plugins"


@dataclass
class Config:
    """The whole experiment."""

    seed: int = 1  # seeds the run's randomness: initialisation, dropout, batch order
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def register_plugins(tree: dict, origin: dict[str, str], default_source: str) -> None:
    """Before ``tree`` is checked: make its plugin files (``model.positional.plugins``) absolute — relative
    to the file that named them, the working folder for the command line — and register them and any
    installed package's scheme its ``model.positional.name`` names (``models.config.prepare_schemes``)."""
    positional = tree.get("model", {}).get("positional", {}) if isinstance(tree.get("model"), dict) else {}
    if not isinstance(positional, dict):
        return  # the schema check names the wrong type
    files = positional.get("plugins") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return  # the schema check says what it must be
    source = origin.get(PLUGINS_KEY, default_source)
    folder = Path(source).parent if source not in (COMMAND_LINE, "the config") and Path(source).is_file() else Path.cwd()
    resolved = [(folder / f).resolve() for f in files]
    for named, path in zip(files, resolved, strict=True):
        if not path.is_file():
            raise ConfigError(f"config key '{PLUGINS_KEY}' in {shown(source)}: plugin file {named} not found "
                              f"({shown(path)})")
    positional["plugins"] = [str(p) for p in resolved]
    name = positional.get("name")
    names = scheme_parts(name) if isinstance(name, str) else []
    sections = [key for key, value in positional.items() if isinstance(value, dict)]  # an installed scheme's options
    prepare_schemes(resolved, [*names, *sections])


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML experiment file (with its ``base`` parents), apply ``section.key=value``
    overrides, validate. With no path the schema defaults are the starting point. Plugin schemes the
    config names are registered first (``register_plugins``)."""
    return load_structured(Config, path, overrides, prepare=register_plugins)


def from_dict(tree: dict, origin: dict[str, str] | None = None, default_source: str = "the config") -> Config:
    """A validated ``Config`` from a nested mapping (e.g. a run's config.yaml: ``default_source`` its path,
    which relative plugin files are found beside)."""
    origin = origin or {}
    register_plugins(tree, origin, default_source)
    return build(Config, tree, origin, default_source)


def plugin_digests(cfg: Config) -> list[str]:
    """The SHA-256 of each plugin file of ``cfg``: what a recipe depends on (not where the file lies)."""
    return [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in cfg.model.positional.plugins]


def own_tree(cfg: Config) -> dict:
    """``to_dict(cfg)`` without the option sections of plugin schemes ``cfg`` does not use (registered in
    this process by another config, they are not this run's: a process that reloads it lacks them)."""
    tree = to_dict(cfg)
    used = set(scheme_parts(cfg.model.positional.name))  # unchecked: a recipe blanks the name
    for name in SOURCES:
        if name not in used:
            tree["model"]["positional"].pop(name, None)
    return tree


def model_identity(cfg: Config) -> dict:
    """The model section as a checkpoint records it (and a run's config must match to load it): the plugin
    files by their SHA-256 (a run's copy lies elsewhere than the file it trained from), none: no key; other
    plugins' options left out (``own_tree``)."""
    tree = own_tree(cfg)["model"]
    if tree["positional"]["plugins"]:
        tree["positional"]["plugins"] = plugin_digests(cfg)
    else:
        del tree["positional"]["plugins"]  # checkpoints from before plugins hold no such key
    return tree


def recipe_hash(cfg: Config) -> str:
    """``config_hash`` of what shapes the trained model: the config without its ``decode``
    section and the model's test-time settings (``models.config.TEST_TIME_SECTIONS``). They do not
    change training (a run is re-evaluated, not retrained, when they change); each evaluation
    records its own decoding in ``results.json``, and a study's variant is a row of its own. A plugin
    file counts by its bytes (``plugin_digests``); other plugins' options not at all (``own_tree``)."""
    tree = own_tree(cfg)
    tree.pop("decode", None)
    for section in TEST_TIME_SECTIONS:
        tree["model"].pop(section, None)
    if tree["model"]["positional"]["plugins"]:
        tree["model"]["positional"]["plugins"] = plugin_digests(cfg)
    else:
        del tree["model"]["positional"]["plugins"]  # recipes from before plugins keep their hash
    return config_hash(tree)


__all__ = ["Config", "load_config", "from_dict", "register_plugins", "plugin_digests", "model_identity", "own_tree",
           "to_dict", "dump_config", "config_hash", "recipe_hash"]
