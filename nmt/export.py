"""``python -m nmt export --run DIR [--checkpoint best] --format ctranslate2|hf --out DIR2 [--quantization int8] [KEY=VALUE ...]``

Converts a trained run (model and tokenizer pieces) for CTranslate2, the C++ inference engine
(``search/ctranslate2.py`` says which schemes its Transformer spec expresses), or for `transformers`
(``export/huggingface.py``: ``AutoModelForSeq2SeqLM.from_pretrained(DIR2)``). The folder is
written whole or not at all; ``ctranslate2.Translator(DIR2)`` loads it, and ``inference.py
--engine ctranslate2`` uses it (exporting on first use into the run directory). ``KEY=VALUE``
overrides change the run's decoding or test-time settings first (``decode.beam=4``,
``model.length_scaling.logn=true``: the training lengths come from the run's manifest); a folder
for `transformers` carries them in its config, a setting an engine cannot express is refused in one line.
"""
from __future__ import annotations

import argparse

from utils.cli import with_examples
from utils.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nmt export", description="Export a trained run for another engine.")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory")
    p.add_argument("--checkpoint", default="best", help="best | last | avg | PATH (default best)")
    p.add_argument("--format", required=True, choices=["ctranslate2", "hf"],
                   help="target: ctranslate2, or hf (a transformers folder: from_pretrained, generate)")
    p.add_argument("--out", required=True, metavar="DIR2", help="output folder (replaced if it exists)")
    p.add_argument("--quantization", default=None, choices=["int8", "int8_float32", "int16", "float16"],
                   help="store the weights quantized (default: float32; CTranslate2 can also quantize on load)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="decoding or test-time settings changed first (decode.beam=4, model.length_scaling.logn=true)")
    return with_examples(p, "python -m nmt export --run runs/synthetic/sinusoidal --format ctranslate2 --out runs/ct2/sinusoidal",
                         "python -m nmt export --run runs/synthetic/sinusoidal --format hf --out runs/hf/sinusoidal",
                         "python -m nmt export --run runs/synthetic/rope --format hf --out runs/hf/rope-yarn "
                         "model.length_scaling.rotary=yarn")


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from experiment.trained import load_run, with_training_lengths

    run = load_run(args.run, args.checkpoint, "cpu", overrides=with_training_lengths(args.run, args.overrides))
    if args.format == "hf":
        from export.huggingface import export_hf

        if args.quantization:
            raise UserError("--quantization is for --format ctranslate2 (transformers folders hold float32 weights)")
        out = export_hf(run, args.out)
    else:
        from search.ctranslate2 import export_ctranslate2

        out = export_ctranslate2(run, args.out, args.quantization)
    print(f"exported {run.run_dir} ({run.cfg.model.positional.name}, {run.checkpoint.name}) to {out}")
