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

import numpy as np
import torch

from analysis import pictures
from analysis.results import run_label
from experiment.decode_config import DecodeConfig
from experiment.trained import TrainedRun
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


@dataclass
class SentenceAttention:
    """One translation's attention, teacher-forced on the translation: ``kinds`` maps encoder,
    decoder and cross to (per layer an (H, rows, columns) array, row labels, column labels)."""

    source: str
    translation: str
    source_tokens: int  # subword tokens before any cut (see ``cut``)
    cut: bool
    kinds: dict[str, tuple[list[np.ndarray], list[str], list[str]]]


@torch.no_grad()
def sentence_attention(run: TrainedRun, texts: list[str], settings: DecodeConfig) -> list[SentenceAttention]:
    """Translate ``texts`` (one batch, ``settings``), then run each translation back through the
    model teacher-forced with the attention weights kept. A source longer than the model's
    positions is cut (``cut``; the caller warns)."""
    tok, model = run.tokenizer, run.model
    device = next(model.parameters()).device
    encoded_texts = tok.encode_src(texts)
    ids = [seq[:run.max_source_tokens] for seq in encoded_texts]
    translations = [hyps[0].text for hyps in translate(model, ids, tok, settings, device)]
    result = []
    for text, full, src_ids, translation in zip(texts, encoded_texts, ids, translations):
        tgt_ids = tok.encode_tgt([translation])[0]
        src = torch.tensor([src_ids + [tok.eos_id]], device=device)
        tgt_in = torch.tensor([[tok.bos_id] + tgt_ids], device=device)
        encoded = model.encode(src, need_weights=True)
        decoded = model.decode(tgt_in, model.start_decoding(encoded), need_weights=True)
        src_labels = tok.src_pieces(src_ids) + ["</s>"]
        in_labels = ["<s>"] + tok.tgt_pieces(tgt_ids)
        out_labels = tok.tgt_pieces(tgt_ids) + ["</s>"]

        def arrays(layers: list[torch.Tensor]) -> list[np.ndarray]:
            return [w[0].float().cpu().numpy() for w in layers]

        kinds = {"encoder": (arrays(encoded.weights), src_labels, src_labels),
                 "decoder": (arrays(decoded.weights["decoder"]), out_labels, in_labels),
                 "cross": (arrays(decoded.weights["cross"]), out_labels, src_labels)}
        result.append(SentenceAttention(text, translation, len(full), len(full) > len(src_ids), kinds))
    return result


def attention_maps(run: TrainedRun, text: str, settings: DecodeConfig, out: Path, fmt: str = "png") -> AttentionMaps:
    """Translate ``text`` with ``settings``, then draw every layer's encoder, decoder and cross
    attention (per head and mean of heads) for that translation, teacher-forced, under ``out``,
    with the statistics in ``out/attention_stats.json``."""
    sentence = sentence_attention(run, [text], settings)[0]
    if sentence.cut:
        print(f"warning: the text has {sentence.source_tokens} subword tokens; cut to the first "
              f"{run.max_source_tokens} (model.positional.max_positions)", file=sys.stderr)
    translation, kinds = sentence.translation, sentence.kinds
    out, label = Path(out), run_label(run.run_dir)
    written, stats = [], []
    for kind, (layers, rows, cols) in kinds.items():
        for layer, w in enumerate(layers):
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
        "cut_from_tokens": sentence.source_tokens if sentence.cut else None,
        "source_tokens": kinds["encoder"][1],
        "target_tokens": kinds["cross"][1],
        "heads": stats,
    }
    stats_path = atomic_write_text(
        out / "attention_stats.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    )
    return AttentionMaps(translation, written, stats_path, summary)
