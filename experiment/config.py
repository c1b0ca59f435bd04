"""The whole experiment's config: ``seed`` and the sections data, tokenizer, model, train, decode.

Each section is a dataclass in the lowest layer that may hold it: beside the code that reads it
where that code sits below this module (``data.config``, ``tokenizer.config``, ``models.config``
with the positional schemes' options), here in ``experiment`` where its readers sit above
(``experiment.train_config``, ``experiment.decode_config``); this module assembles them and loads
YAML files into the result (``utils.config`` does the inheritance, overrides and validation).
The resolved config is what a run saves as ``config.yaml`` and reloads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from data.config import DataConfig
from experiment.decode_config import DecodeConfig
from experiment.train_config import TrainConfig
from models.config import TEST_TIME_SECTIONS, ModelConfig
from tokenizer.config import TokenizerConfig
from utils.config import build, config_hash, dump_config, load_structured, to_dict


@dataclass
class Config:
    """The whole experiment."""

    seed: int = 1  # seeds the run's randomness: initialisation, dropout, batch order
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML experiment file (with its ``base`` parents), apply ``section.key=value``
    overrides, validate. With no path the schema defaults are the starting point."""
    return load_structured(Config, path, overrides)


def from_dict(tree: dict, origin: dict[str, str] | None = None, default_source: str = "the config") -> Config:
    """A validated ``Config`` from a nested mapping (e.g. a run's config.yaml)."""
    return build(Config, tree, origin, default_source)


def recipe_hash(cfg: Config) -> str:
    """``config_hash`` of what shapes the trained model: the config without its ``decode``
    section and the model's test-time settings (``models.config.TEST_TIME_SECTIONS``). They do not
    change training (a run is re-evaluated, not retrained, when they change); each evaluation
    records its own decoding in ``results.json``, and a study's variant is a row of its own."""
    tree = to_dict(cfg)
    tree.pop("decode", None)
    for section in TEST_TIME_SECTIONS:
        tree["model"].pop(section, None)
    return config_hash(tree)


__all__ = ["Config", "load_config", "from_dict", "to_dict", "dump_config", "config_hash", "recipe_hash"]
