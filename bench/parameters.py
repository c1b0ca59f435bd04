"""Parameter counts per positional scheme for a config's model dimensions.

``python -m nmt bench parameters [--config FILE] [--vocab N] [key=value ...]`` prints one Markdown
row per scheme: total parameters and the positional encoding's own share.
"""
from __future__ import annotations

import argparse

from experiment.config import Config, load_config
from models.positional import SCHEMES
from models.transformer import Transformer


def parameter_counts(cfg: Config, vocab_size: int) -> dict[str, tuple[int, int]]:
    """{scheme: (total parameters, positional parameters)} with a joint vocabulary of vocab_size."""
    counts = {}
    for name in SCHEMES:
        cfg.model.positional.name = name
        model = Transformer(cfg.model, vocab_size, vocab_size, joint_vocab=True)
        total = sum(p.numel() for p in model.parameters())
        positional = sum(p.numel() for n, p in model.named_parameters() if "_pe." in n)
        counts[name] = (total, positional)
    return counts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench parameters", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="YAML config (default: the schema's defaults)")
    parser.add_argument("--vocab", type=int, default=None, help="joint vocabulary size (default: tokenizer.vocab_size)")
    parser.add_argument("overrides", nargs="*", help="section.key=value")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    vocab = args.vocab or cfg.tokenizer.vocab_size
    m = cfg.model
    print(f"d_model {m.d_model}, {m.n_heads} heads, {m.n_encoder_layers}+{m.n_decoder_layers} layers, "
          f"d_ff {m.d_ff}, joint vocabulary {vocab}, max_positions {m.positional.max_positions}\n")
    print("| scheme | parameters | positional parameters |\n| --- | ---: | ---: |")
    for name, (total, positional) in parameter_counts(cfg, vocab).items():
        print(f"| {name} | {total:,} | {positional:,} |")
