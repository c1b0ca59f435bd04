"""Pictures of attention and of the positional encodings.

  python -m nmt visualize attention --run DIR --text "..." [--out DIR]
  python -m nmt visualize pe NAME... [--run DIR] [--out DIR]
  python -m nmt visualize curves DIR... [--by-scheme [--mark N]] [--out DIR]
  python -m nmt visualize length DIR... [--testset NAME] [--out DIR]
  python -m nmt visualize explore --runs DIR... --src FILE [--sentences N] --out PAGE.html

(or ``python visualize.py``, the same flags).

PNG by default (``--format svg`` for SVG). Default output folder: DIR/pictures for a run,
runs/pictures otherwise. ``explore`` writes one self-contained HTML page (``analysis.explorer``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from nmt.options import DECODE_THREADS, add_threads_argument
from utils.cli import with_examples
from utils.errors import UserError
from utils.threads import threads_claimed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nmt visualize", description="Pictures of attention and positional encodings.")
    sub = p.add_subparsers(dest="command", required=True)
    att = sub.add_parser("attention", help="attention maps of one translation")
    att.add_argument("--run", required=True, metavar="DIR", help="run directory")
    att.add_argument("--text", required=True, help="the French sentence to translate and draw")
    att.add_argument("--checkpoint", default="best", help="best | last | avg | PATH (default best)")
    att.add_argument("--beam", type=int, default=None, help="beam size of the translation (default: the run's decode.beam)")
    add_threads_argument(att, f"this machine's free share of its cores, at most {DECODE_THREADS} for decoding")
    pe = sub.add_parser("pe", help="positional encodings: tables, distance profiles, PCA maps")
    pe.add_argument("names", nargs="+", help="scheme names (or 'all')")
    pe.add_argument("--run", help="use this run's learned parameters and dimensions")
    pe.add_argument("--checkpoint", default="best", help="with --run: best | last | avg | PATH (default best)")
    pe.add_argument("--positions", type=int, default=128, help="positions shown for absolute encodings (default 128)")
    pe.add_argument("--max-distance", type=int, default=64, help="offsets -N..N in the distance profiles (default 64)")
    cur = sub.add_parser("curves", help="training and validation curves of runs, overlaid")
    cur.add_argument("--by-scheme", action="store_true",
                     help="validation BLEU in a panel per scheme, a curve per seed, sinusoidal's mean in each")
    cur.add_argument("--mark", type=int, default=None, help="with --by-scheme: draw a dotted line at this update")
    cur.add_argument("runs", nargs="+", metavar="DIR", help="run directories (their metrics.jsonl)")
    length = sub.add_parser("length", help="BLEU and length ratio by source length, a line per scheme "
                                           "(from test.py results), and its table")
    length.add_argument("runs", nargs="+", metavar="DIR", help="run directories, tested (DIR/eval/)")
    length.add_argument("--testset", nargs="+", default=None,
                        help="test set(s), pooled (default: the first run's data.test_splits)")
    length.add_argument("--min-count", type=int, default=60, help="fewest sentences in a length bucket (default 60)")
    length.add_argument("--by-kind", action="store_true",
                        help="also a panel per kind of scheme (sinusoidal grey in each) and, for the rows decoded "
                             "under test-time settings (<row>+<setting>), a panel per row")
    length.add_argument("--folder-labels", action="store_true",
                        help="name each row by its runs' folder name, the seed suffix dropped (a study archive's "
                             "labels: shaw-clip4-seed2 -> shaw-clip4; default: the scheme, and the settings that set "
                             "it apart where two rows share one)")
    exp = sub.add_parser("explore", help="one self-contained HTML page: the runs' attention side by side, "
                                         "sentence/kind/layer/head chosen in the browser")
    exp.add_argument("--runs", nargs="+", required=True, help="run folders")
    exp.add_argument("--src", required=True, help="text file, one source sentence per line")
    exp.add_argument("--sentences", type=int, default=20, help="the first N sentences of --src (default 20)")
    exp.add_argument("--out", required=True, help="the page to write (.html)")
    exp.add_argument("--title", default="Attention explorer", help="the page's title")
    add_threads_argument(exp, f"this machine's free share of its cores, at most {DECODE_THREADS} for decoding")
    for parser in (att, pe, cur, length):
        parser.add_argument("--out", help="output folder (default: DIR/pictures for a run, else runs/pictures)")
        parser.add_argument("--format", choices=["png", "svg"], default="png", help="picture format (default png)")
    return with_examples(p, "python -m nmt visualize attention --run runs/synthetic/sinusoidal --text \"Je la regarde.\"",
                         "python -m nmt visualize pe sinusoidal rope alibi")


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.command in ("attention", "explore"):  # the ones that decode: threads claimed before torch loads
        with threads_claimed(args.threads, f"visualize {args.command}", cap=DECODE_THREADS):
            return draw(args)
    return draw(args)


def draw(args: argparse.Namespace) -> None:
    """The command (its threads claimed where it decodes)."""
    if args.command == "attention":
        from analysis.attention import attention_maps
        from experiment.decode_config import resolve_settings
        from experiment.trained import load_run

        run = load_run(args.run, args.checkpoint)
        maps = attention_maps(run, args.text, resolve_settings(run.cfg.decode, beam=args.beam),
                              Path(args.out or run.run_dir / "pictures"), args.format)
        print(f"translation: {maps.translation}")
        for kind in ("encoder", "decoder", "cross"):
            print(f"{kind}: mean entropy {maps.mean(kind, 'entropy'):.2f} nats, mean distance from the "
                  f"diagonal {maps.mean(kind, 'diagonal_distance'):.2f} tokens")
        written = [*maps.paths, maps.stats_path]
    elif args.command == "pe":
        from analysis.pe import pe_pictures

        written = pe_pictures(args.names, args.out, args.run, args.checkpoint, args.positions, args.max_distance,
                              args.format)
    elif args.command == "explore":
        from analysis.explorer import explore, read_sources

        if args.sentences < 1:
            raise UserError(f"--sentences must be at least 1, got {args.sentences}")
        written = [explore(args.runs, read_sources(Path(args.src), args.sentences), Path(args.out), args.title)]
    elif args.command == "curves":
        from analysis.results import training_curves

        if args.by_scheme:
            from analysis.results import validation_panels

            written = [validation_panels(args.runs, Path(args.out or "runs/pictures"), mark=args.mark, fmt=args.format)]
        else:
            written = [training_curves(args.runs, Path(args.out or "runs/pictures"), args.format)]
    else:
        from analysis.results import length_by_kind, length_study
        from studies.runs import label_of

        out = Path(args.out or "runs/pictures")
        labels = {Path(run): label_of(Path(run)) for run in args.runs} if args.folder_labels else None
        written = length_study(args.runs, out, args.testset, args.format, args.min_count, labels)
        if args.by_kind:
            written += length_by_kind(args.runs, out, args.testset, args.format, args.min_count, labels=labels)
    for path in written:
        print(path)

