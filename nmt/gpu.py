"""``python -m nmt gpu ACTION``: spend a lent GPU on the runs the archive lacks, and bring them home.

    prep     (here) fill .gpu/ with what the GPU machine lacks: wheels of pytorch-ignite, nltk and
             submitit for its CPython 3.12, and a copy of the Multi30k data; name .gpu in the call's carry
    wave     (there) the queue's next runs (gpu/queue.yaml) within --limit seconds, each finished
             run packed at once into OUT/<study>.tar.xz; gpu/wave.sh (make gpu-wave) sets it up
    unpack   (here) the packs into their archives, each study's tables remade, what changed printed
    check    (there) Transformer-base per scheme on the GPU: trains, checks, prints speed (gpu.check)
    tree-size  the tracked tree's bytes, the largest folders first: what a call's copy carries (gpu.tree_size)

A wave refuses to start (one line each, exit 2) when this machine's GPU or torch differ from the
study's archived runs, a module the runs import is missing, or the data is.
"""
from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from utils.cli import with_examples
from utils.errors import UserError
from utils.paths import ROOT
from utils.threads import AUTO, threads_claimed

# the actions that are tools of their own (``python -m nmt gpu check --help``): each module has
# ``build_parser()`` and ``main(argv)``, imported only when named (gpu.check loads torch)
TOOLS = {"check": "gpu.check", "tree-size": "gpu.tree_size"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt gpu", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawTextHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    prep = actions.add_parser("prep", help="fill .gpu/ (wheels, data) for a GPU call's carry",
                              description="Fill .gpu/ here with what the GPU machine lacks (gpu.prep).")
    prep.add_argument("--folder", default=str(ROOT / ".gpu"), help="where (default: .gpu in the checkout)")
    prep.add_argument("--data", help="the Multi30k folder to copy (default: $MULTI30K_DIR, else ../shared/data/"
                      "multi30k-fr-en)")
    wave = actions.add_parser("wave", help="train the queue's next runs on this GPU, packing each as it finishes",
                              description="On the GPU machine: the queue's next runs within the call's limit "
                              "(gpu.wave).")
    wave.add_argument("--out", required=True, help="the folder whose files the call brings back ($OUT)")
    wave.add_argument("--limit", type=float, required=True, help="the call's time limit in seconds")
    wave.add_argument("--margin", type=float, default=45.0, help="seconds kept at the end to stop and pack "
                      "(default 45)")
    wave.add_argument("--parallel", type=int, help="runs trained at once (default: all of an entry's)")
    wave.add_argument("--queue", default=None, help="the queue file (default gpu/queue.yaml)")
    wave.add_argument("--device", default="cuda", help="default cuda")
    wave.add_argument("--mps", action="store_true", help="run the entry under CUDA MPS (nvidia-cuda-mps-control)")
    wave.add_argument("--check", action="store_true", help="the preflight and the plan only: train nothing")
    unpack = actions.add_parser("unpack", help="bring packs home: archive, tables, what changed",
                                description="Here: a wave's packs into their archives, tables remade (gpu.unpack).")
    unpack.add_argument("packs", nargs="+", metavar="FILE", help="<study>.tar.xz files of a wave")
    unpack.add_argument("--no-tables", action="store_true", help="unpack only (the tables later: nmt study NAME --table)")
    return with_examples(parser, "python -m nmt gpu prep",
                         "python -m nmt gpu unpack multi30k-full.tar.xz")


def wave(args: argparse.Namespace) -> int:
    from gpu.queue import QUEUE, load_queue, pending_runs, plural
    from gpu.wave import mps_daemon, preflight, run_wave, this_machine

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_file = (out / "wave.log").open("a", encoding="utf-8")

    def log(line: str) -> None:
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    entries = load_queue(Path(args.queue) if args.queue else QUEUE)
    ready = [e for e in entries if not e.hold and pending_runs(e)]
    machine = this_machine() if args.device.startswith("cuda") else None
    if machine is not None:
        log(f"[wave] this machine: {machine.gpu}, torch {machine.torch}")
    problems = preflight(ready, machine)
    for problem in problems:
        log(f"error: {problem}")
    if problems:
        return 2
    if args.check:
        for entry in entries:
            log(f"[wave] {entry.describe()}: " + (f"on hold ({entry.hold})" if entry.hold else
                                                 f"{plural(len(pending_runs(entry)), 'run')} the archive lacks"))
        return 0
    with mps_daemon(args.mps, log):
        summary = run_wave(entries, out, args.limit, ROOT, margin_s=args.margin, device=args.device,
                           parallel=args.parallel, log=log)
    return 0 if summary.stopped_by in (None, "the deadline") else 128 + 15


def unpack(args: argparse.Namespace) -> None:
    from gpu.unpack import unpack as unpack_pack
    from studies.catalog import load_studies

    studies = load_studies()
    for path in map(Path, args.packs):
        if not path.is_file():
            raise UserError(f"{path}: no such pack")
    for path in map(Path, args.packs):
        print(unpack_pack(path, ROOT, studies, tables=not args.no_tables).summary(), flush=True)


def main(argv: list[str] | None = None) -> int | None:
    argv = list(argv or [])
    if argv and argv[0] in TOOLS:  # under --threads auto's share, as a bench tool (OMP_NUM_THREADS wins)
        with threads_claimed(AUTO, f"gpu {argv[0]}"):
            return importlib.import_module(TOOLS[argv[0]]).main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.action == "prep":
        from gpu.prep import prepare

        for line in prepare(Path(args.folder), Path(args.data) if args.data else None):
            print(line)
        return None
    if args.action == "unpack":
        unpack(args)
        return None
    return wave(args)
