"""Attention maps of one translation, and the numbers behind them.

Statistics (per layer and head): the mean entropy of the attention rows (nats) and the mean
distance of the attention mass from the diagonal, sum_j p_ij |i - j| averaged over rows; for
cross-attention from the length-scaled diagonal |i * S / T - j| (S source, T target length).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from analysis import pictures
from analysis.results import run_label
from experiment.trained import TrainedRun
from search.config import DecodeConfig
from search.translate import translate
from utils.io import atomic_write_text


def attention_stats(weights: torch.Tensor, cross: bool = False) -> list[dict]:
    """weights (H, Tq, Tk) of one layer -> per head {head, entropy, diagonal_distance}."""
    h, tq, tk = weights.shape
    p = weights.float().clamp_min(1e-12)
    entropy = -(p * p.log()).sum(-1).mean(-1)  # (H,)
    rows = torch.arange(tq, dtype=torch.float32)[:, None]
    cols = torch.arange(tk, dtype=torch.float32)[None, :]
    diagonal = rows * (tk / tq) if cross else rows
    distance = (weights.float() * (diagonal - cols).abs()).sum(-1).mean(-1)  # (H,)
    return [{"head": i, "entropy": float(entropy[i]), "diagonal_distance": float(distance[i])} for i in range(h)]


@dataclass
class AttentionMaps:
    """What ``attention_maps`` drew: the translation, the picture files, the statistics file and
    its content (per kind, layer and head)."""

    translation: str
    paths: list[Path]
    stats_path: Path
    summary: dict

    def mean(self, kind: str, key: str) -> float:
        """Mean of a statistic ("entropy", "diagonal_distance") over a kind's layers and heads."""
        rows = [s[key] for s in self.summary["heads"] if s["kind"] == kind]
        return sum(rows) / len(rows)


@torch.no_grad()
def attention_maps(run: TrainedRun, text: str, settings: DecodeConfig, out: Path, fmt: str = "png") -> AttentionMaps:
    """Translate ``text`` with ``settings``, then draw every layer's encoder, decoder and cross
    attention (per head and mean of heads) for that translation, teacher-forced, under ``out``,
    with the statistics in ``out/attention_stats.json``."""
    tok, model = run.tokenizer, run.model
    device = next(model.parameters()).device
    src_ids = tok.encode_src([text])[0]
    source_tokens = len(src_ids)
    if len(src_ids) > run.max_source_tokens:
        print(f"warning: the text has {len(src_ids)} subword tokens; cut to the first {run.max_source_tokens} "
              f"(model.positional.max_positions)", file=sys.stderr)
        src_ids = src_ids[:run.max_source_tokens]
    translation = translate(model, [src_ids], tok, settings, device)[0][0].text
    tgt_ids = tok.encode_tgt([translation])[0]
    src = torch.tensor([src_ids + [tok.eos_id]], device=device)
    tgt_in = torch.tensor([[tok.bos_id] + tgt_ids], device=device)
    encoded = model.encode(src, need_weights=True)
    decoded = model.decode(tgt_in, model.start_decoding(encoded), need_weights=True)
    src_labels = tok.src_pieces(src_ids) + ["</s>"]
    in_labels = ["<s>"] + tok.tgt_pieces(tgt_ids)
    out_labels = tok.tgt_pieces(tgt_ids) + ["</s>"]
    kinds = {"encoder": (encoded.weights, src_labels, src_labels),
             "decoder": (decoded.weights["decoder"], out_labels, in_labels),
             "cross": (decoded.weights["cross"], out_labels, src_labels)}
    out, label = Path(out), run_label(run.run_dir)
    written, stats = [], []
    for kind, (layers, rows, cols) in kinds.items():
        for layer, w in enumerate(layers):
            w = w[0].float().cpu().numpy()
            title = f"{label} — {kind} attention, layer {layer}"
            base = out / f"attention_{kind}_layer{layer}"
            written.append(pictures.attention_grid(w, rows, cols, title + ", per head",
                                                   base.with_name(base.name + f"_heads.{fmt}")))
            written.append(pictures.attention_mean(w, rows, cols, title + ", mean of heads",
                                                   base.with_name(base.name + f"_mean.{fmt}")))
            for row in attention_stats(torch.from_numpy(w), cross=kind == "cross"):
                stats.append({"kind": kind, "layer": layer, **row})
    summary = {
        "run": str(run.run_dir),
        "scheme": run.cfg.model.positional.name,
        "source": text,
        "translation": translation,
        "cut_from_tokens": source_tokens if source_tokens > run.max_source_tokens else None,
        "source_tokens": src_labels,
        "target_tokens": out_labels,
        "heads": stats,
    }
    stats_path = atomic_write_text(
        out / "attention_stats.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    )
    return AttentionMaps(translation, written, stats_path, summary)
