"""Pictures of attention and of the positional encodings.

  python visualize.py attention --run DIR --text "..." [--out DIR]
  python visualize.py pe NAME... [--run DIR] [--out DIR]
  python visualize.py curves DIR... [--out DIR]
  python visualize.py length DIR... [--testset NAME] [--out DIR]

PNG by default (``--format svg`` for SVG). Default output folder: DIR/pictures for a run,
runs/pictures otherwise.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from utils.cli import run_main
from utils.errors import UserError


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Pictures of attention and positional encodings.")
    sub = p.add_subparsers(dest="command", required=True)
    att = sub.add_parser("attention", help="attention maps of one translation")
    att.add_argument("--run", required=True)
    att.add_argument("--text", required=True)
    att.add_argument("--checkpoint", default="best")
    att.add_argument("--beam", type=int, default=None)
    pe = sub.add_parser("pe", help="positional encodings: tables, distance profiles, PCA maps")
    pe.add_argument("names", nargs="+", help="scheme names (or 'all')")
    pe.add_argument("--run", help="use this run's learned parameters and dimensions")
    pe.add_argument("--checkpoint", default="best")
    pe.add_argument("--positions", type=int, default=128, help="positions shown for absolute encodings")
    pe.add_argument("--max-distance", type=int, default=64)
    cur = sub.add_parser("curves", help="training and validation curves of runs, overlaid")
    cur.add_argument("runs", nargs="+")
    length = sub.add_parser("length", help="BLEU by source length per run (from test.py results)")
    length.add_argument("runs", nargs="+")
    length.add_argument("--testset", default=None, help="default: each run's last test split")
    for parser in (att, pe, cur, length):
        parser.add_argument("--out", help="output folder")
        parser.add_argument("--format", choices=["png", "svg"], default="png")
    return p.parse_args(argv)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).strip("-") or "x"


def run_label(run_dir: Path) -> str:
    from utils.run_dir import load_run_config

    scheme = load_run_config(run_dir).model.positional.name
    return run_dir.name if run_dir.name == scheme else f"{run_dir.name} ({scheme})"


def attention(args) -> list[Path]:
    import torch

    from utils import pictures
    from utils.decoding import translate_ids
    from utils.loading import load_run, max_source_tokens
    from utils.pe_analysis import attention_stats
    from utils.run_dir import atomic_write_text

    run = load_run(args.run, args.checkpoint)
    tok, cfg = run.tokenizer, run.cfg
    src_ids = tok.encode_src([args.text])[0][:max_source_tokens(cfg)]
    translation = translate_ids(run.model, [src_ids], tok, cfg.decode, "cpu", beam=args.beam)[0]
    tgt_ids = tok.encode_tgt([translation])[0]
    src = torch.tensor([src_ids + [tok.eos_id]])
    tgt_in = torch.tensor([[tok.bos_id] + tgt_ids])
    with torch.no_grad():
        memory, mask, enc_w = run.model.encode(src, need_weights=True)
        _, _, dec_w = run.model.decode(tgt_in, memory, mask, need_weights=True)
    src_labels = tok.src_pieces(src_ids) + ["</s>"]
    in_labels = ["<s>"] + tok.tgt_pieces(tgt_ids)
    out_labels = tok.tgt_pieces(tgt_ids) + ["</s>"]
    out = Path(args.out or run.run_dir / "pictures")
    scheme = cfg.model.positional.name
    kinds = {"encoder": (enc_w, src_labels, src_labels), "decoder": (dec_w["decoder"], out_labels, in_labels),
             "cross": (dec_w["cross"], out_labels, src_labels)}
    written, stats = [], []
    for kind, (layers, rows, cols) in kinds.items():
        for layer, w in enumerate(layers):
            w = w[0].numpy()
            title = f"{run_label(run.run_dir)} — {kind} attention, layer {layer}"
            base = out / f"attention_{kind}_layer{layer}"
            written.append(pictures.attention_grid(w, rows, cols, title + ", per head",
                                                   base.with_name(base.name + f"_heads.{args.format}")))
            written.append(pictures.attention_mean(w, rows, cols, title + ", mean of heads",
                                                   base.with_name(base.name + f"_mean.{args.format}")))
            for row in attention_stats(torch.from_numpy(w), cross=kind == "cross"):
                stats.append({"kind": kind, "layer": layer, **row})
    summary = {"run": str(run.run_dir), "scheme": scheme, "source": args.text, "translation": translation,
               "source_tokens": src_labels, "target_tokens": out_labels, "heads": stats}
    stats_path = out / "attention_stats.json"
    atomic_write_text(stats_path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(f"translation: {translation}")
    for kind in kinds:
        rows = [s for s in stats if s["kind"] == kind]
        print(f"{kind}: mean entropy {sum(r['entropy'] for r in rows) / len(rows):.2f} nats, "
              f"mean distance from the diagonal {sum(r['diagonal_distance'] for r in rows) / len(rows):.2f} tokens")
    return written + [stats_path]


def pe(args) -> list[Path]:
    from models.positional import SCHEMES, build_positional, scheme_names
    from utils import pictures
    from utils.config import load_config
    from utils.pe_analysis import absolute_table, distance_profile, pca_2d

    names = list(SCHEMES) if args.names == ["all"] else args.names
    if args.run:
        from utils.loading import load_run

        run = load_run(args.run, args.checkpoint)
        modules = {"encoder": run.model.encoder_pe, "decoder": run.model.decoder_pe}
        trained = run.cfg.model.positional.name
        source = f"{run.run_dir.name}, trained"
        model_cfg = run.cfg.model
        out = Path(args.out or run.run_dir / "pictures")
    else:
        modules, trained, source = {}, None, "untrained"
        model_cfg = load_config(None).model
        out = Path(args.out or "runs/pictures")
    written = []
    for name in names:
        scheme_names(name)  # unknown names: one-line error
        if args.run and name != trained:
            raise UserError(f"--run {args.run} was trained with '{trained}', not '{name}'")
        model_cfg.positional.name = name
        for kind in ("encoder", "decoder"):
            module = modules.get(kind) or build_positional(model_cfg, kind)
            parts = list(module.parts) if hasattr(module, "parts") else [module]
            part_names = [n for n in name.split("+") if n != "none"] or ["none"]
            for part, part_name in zip(parts, part_names):
                tag = f"{part_name} ({kind}, {source}, d_model {model_cfg.d_model}, {model_cfg.n_heads} heads)"
                offsets, values, ylabel = distance_profile(part, part_name, args.max_distance)
                written.append(pictures.distance_profile_plot(
                    offsets, values, ylabel, f"{tag}: score contribution by relative position",
                    out / f"pe_{slug(part_name)}_{kind}_by_distance.{args.format}"))
                if kind == "encoder" or part_name == "learnable":
                    table = absolute_table(part, args.positions)
                    if table is not None:
                        written.append(pictures.position_heatmap(
                            table, f"{tag}: encoding of positions 0–{args.positions - 1}",
                            out / f"pe_{slug(part_name)}_{kind}_table.{args.format}"))
                        if part_name == "learnable":
                            written.append(pictures.pca_map(
                                pca_2d(table), f"{tag}: PCA map of the position vectors",
                                out / f"pe_{slug(part_name)}_{kind}_pca.{args.format}"))
    return written


def read_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir} has no metrics.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def curves(args) -> list[Path]:
    from utils import pictures

    series = {}
    for d in map(Path, args.runs):
        records = read_metrics(d)
        train = [r for r in records if r["kind"] == "train"]
        valid = [r for r in records if r["kind"] == "valid"]
        series[run_label(d)] = {
            "train loss": ([r["step"] for r in train], [r["loss"] for r in train]),
            "valid loss": ([r["step"] for r in valid], [r["loss"] for r in valid]),
            "valid BLEU": ([r["step"] for r in valid], [r["bleu"] for r in valid]),
        }
    out = Path(args.out or "runs/pictures")
    name = "curves_" + "_".join(slug(Path(d).name) for d in args.runs)[:120]
    return [pictures.curves(series, "Training and validation: " + ", ".join(series), out / f"{name}.{args.format}")]


def length(args) -> list[Path]:
    from utils import pictures
    from utils.run_dir import load_run_config

    series, testsets = {}, set()
    for d in map(Path, args.runs):
        testset = args.testset or load_run_config(d).data.test_splits[-1]
        path = d / "eval" / testset / "results.json"
        if not path.is_file():
            raise UserError(f"{d} has no results for '{testset}' (run: python test.py --run {d})")
        series[run_label(d)] = json.loads(path.read_text(encoding="utf-8"))["by_length"]
        testsets.add(testset)
    out = Path(args.out or "runs/pictures")
    name = "bleu_by_length_" + "_".join(sorted(testsets))
    return [pictures.bleu_by_length(series, f"BLEU by source length on {', '.join(sorted(testsets))}",
                                    out / f"{slug(name)}.{args.format}")]


def main(argv=None) -> None:
    args = parse_args(argv)
    written = {"attention": attention, "pe": pe, "curves": curves, "length": length}[args.command](args)
    for path in written:
        print(path)


if __name__ == "__main__":
    run_main(main)
