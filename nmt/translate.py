"""Translate with a trained run: ``python -m nmt translate --run DIR [TEXT ...]`` (or ``python
inference.py``, the same flags).

Without TEXT, every line of standard input is translated (streamed in batches, output in input
order, one line per input line; with ``--nbest K``, K lines ``score<TAB>translation`` each).
An empty line gives an empty line; a line longer than the model reads is cut, with a warning. An
input the model was not trained for — longer than its longest training source, or mostly pieces its
tokenizer does not know — is translated with one warning on stderr (``search.input_check``; each sign
once; ``--quiet`` silences them and the engine line).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from nmt.options import DECODE_THREADS, add_run_arguments, add_search_arguments
from utils.cli import with_examples
from utils.errors import UserError
from utils.threads import ThreadChoice, threads_claimed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nmt translate", description="Translate French to English with a trained run.")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory")
    add_run_arguments(p)
    add_search_arguments(p, greedy=True)
    p.add_argument("--nbest", type=int, default=None,
                   help="print the K best translations of each line, K <= beam (default: the run's decode.nbest)")
    p.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default: decode.batch_size)")
    p.add_argument("--quiet", action="store_true",
                   help="no warnings about inputs the model was not trained for, no engine line (errors still print)")
    p.add_argument("texts", nargs="*", help="sentences to translate (default: standard input)")
    return with_examples(p, "python -m nmt translate --run runs/synthetic/sinusoidal \"Je la regarde.\"",
                         "echo \"Nous aimons la voiture rouge.\" | python -m nmt translate --run runs/synthetic/sinusoidal --nbest 2")


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def read_stdin_lines() -> Iterator[tuple[int, str]]:
    """(line number, text) of standard input, lines ending at '\\n' (a '\\r' before it dropped),
    a byte-order mark before the first line dropped; bytes that are not UTF-8 are a one-line error."""
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
            yield number, text.removeprefix("\ufeff") if number == 1 else text
        except UnicodeDecodeError as err:
            raise UserError(f"standard input line {number} is not valid UTF-8 "
                            f"(byte 0x{raw[err.start]:02x} at column {err.start + 1})") from None


def batches(lines: Iterator[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    batch = []
    for item in lines:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main(argv=None) -> None:
    args = parse_args(argv)
    with threads_claimed(args.threads, "translate", cap=DECODE_THREADS) as threads:  # before torch loads
        run(args, threads)


def run(args: argparse.Namespace, threads: ThreadChoice) -> None:
    """The command, its threads claimed."""
    from experiment.decode_config import resolve_settings
    from experiment.manifest import read_manifest
    from experiment.trained import load_run
    from search.engines import choose_engine
    from search.input_check import InputCheck
    from search.translate import translate
    from utils.device import resolve_device

    device = resolve_device(args.device)
    if args.greedy and args.nbest is not None and args.nbest > 1:
        raise UserError("--nbest needs beam search (drop --greedy)")
    run = load_run(args.run, args.checkpoint, device)
    settings = resolve_settings(run.cfg.decode, beam=args.beam, nbest=args.nbest, batch_size=args.batch_size,
                                greedy=args.greedy, stopping=args.stopping, len_penalty=args.len_penalty)
    choice = choose_engine(run, settings, args.engine, device, args.compute_type, threads.count())
    limit, tok, out = run.max_source_tokens, run.tokenizer, sys.stdout
    longest = (read_manifest(run.run_dir).longest_training_tokens or {}).get("source")
    check = InputCheck(longest, tok.unknown_src_ids, warned={"long", "unknown"} if args.quiet else set())
    lines = enumerate(args.texts, start=1) if args.texts else read_stdin_lines()
    for number, batch in enumerate(batches(lines, settings.batch_size)):
        if number == 0 and not args.quiet:  # once the input reads: bad input stays a one-line error
            print(choice.line(), file=sys.stderr)
        texts = [text for _, text in batch]
        ids = tok.encode_src(texts)
        for (number, text), seq in zip(batch, ids):
            for warning in check.warnings(number, text, seq):
                print(warning, file=sys.stderr)
            if len(seq) > limit:
                print(f"warning: line {number} has {len(seq)} subword tokens; cut to the first {limit} "
                      f"(model.positional.max_positions)", file=sys.stderr)
        ids = [seq[:limit] for seq in ids]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        found = dict(zip(todo, translate(run.model, [ids[i] for i in todo], tok, settings, device, choice.engine)))
        for i in range(len(texts)):
            hyps = found.get(i)
            if settings.nbest == 1:
                out.write((hyps[0].text if hyps else "") + "\n")
            else:
                for hyp in hyps or []:
                    out.write(f"{hyp.score:.4f}\t{hyp.text}\n")
                for _ in range(settings.nbest - len(hyps or [])):  # an empty line keeps its K lines
                    out.write(f"{0.0:.4f}\t\n")
        out.flush()

