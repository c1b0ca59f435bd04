"""The explorer: one self-contained HTML page (no server, no network; data and scripts inline)
for comparing runs' attention side by side in a browser.

What the page holds, per run: each of the first N sentences translated (the run's own decoding
settings) and its encoder, decoder and cross attention, teacher-forced on that translation
(``analysis.attention.sentence_attention``, the numbers behind the PNG maps), every layer and
head, weights rounded to ``DECIMALS`` places and stored as integers; and the scheme's distance
profile per stack (``models.positional.distance_profile``, the function behind the PE pictures).
A study's page also holds its comparison table (the CSV ``scoring.compare`` writes) as a sortable
head, and its training-curve and BLEU-by-length pictures inline.

The page's script (``explorer.html``) draws each chosen run's heatmap as SVG cells carrying
``data-row``, ``data-col`` and ``data-weight``; the browser tests read those back.
"""
from __future__ import annotations

import base64
import csv
import json
import sys
from pathlib import Path

import numpy as np

from analysis.attention import SentenceAttention, sentence_attention
from analysis.results import run_label
from experiment.decode_config import resolve_settings
from experiment.trained import load_run
from models.positional import components, distance_profile
from utils.errors import UserError
from utils.io import atomic_write_text

DECIMALS = 3
TEMPLATE = Path(__file__).with_name("explorer.html")
PROFILE_DISTANCE = 32  # offsets -32..32 in the distance profiles


def quantised(weights: np.ndarray) -> list[int]:
    """(rows, cols) weights -> row-major integers in units of 10^-DECIMALS (the page divides)."""
    return np.rint(np.asarray(weights, dtype=np.float64) * 10 ** DECIMALS).astype(np.int64).ravel().tolist()


def _sentence_record(sentence: SentenceAttention) -> dict:
    tokens = {"src": sentence.kinds["encoder"][1], "tgt_in": sentence.kinds["decoder"][2],
              "tgt_out": sentence.kinds["decoder"][1]}
    # attention[kind][layer][head]: (rows x cols) integers, rows/cols as in ``KIND_AXES`` of the page
    attention = {kind: [[quantised(head) for head in layer] for layer in layers]
                 for kind, (layers, _, _) in sentence.kinds.items()}
    return {"translation": sentence.translation, "cut": sentence.cut, "tokens": tokens, "attention": attention}


def _profiles(run) -> list[dict]:
    """The distance profile of each stack's positional parts: offsets, one line per head (or one)."""
    result = []
    for stack, module in (("encoder", run.model.encoder_pe), ("decoder", run.model.decoder_pe)):
        for part in components(module.eval()):
            profile = distance_profile(part, PROFILE_DISTANCE)
            values = profile.values.detach().float().cpu().numpy()
            result.append({"stack": stack, "label": profile.label, "offsets": profile.offsets.tolist(),
                           "values": np.round(values, 4).tolist()})
    return result


def run_record(run_dir: Path, sources: list[str], device: str = "cpu") -> dict:
    """What the page holds of one run (see the module docstring)."""
    run = load_run(run_dir, "best", device)
    sentences = sentence_attention(run, sources, resolve_settings(run.cfg.decode))
    cut = sum(s.cut for s in sentences)
    if cut:
        print(f"warning: {run_dir}: {cut} of {len(sources)} sentences are longer than "
              f"{run.max_source_tokens} subword tokens and were cut", file=sys.stderr)
    model = run.cfg.model
    return {"label": run_label(run.run_dir), "dir": str(run.run_dir), "scheme": model.positional.name,
            "heads": model.n_heads, "layers": {"encoder": model.n_encoder_layers, "decoder": model.n_decoder_layers,
                                               "cross": model.n_decoder_layers},
            "profiles": _profiles(run), "sentences": [_sentence_record(s) for s in sentences]}


def read_sources(path: Path, count: int) -> list[str]:
    """The first ``count`` non-empty lines of ``path``."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--src {path}: no such file")
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except UnicodeDecodeError as err:
        raise UserError(f"--src {path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    sources = [line for line in lines if line][:count]
    if not sources:
        raise UserError(f"--src {path}: no sentences in the file")
    return sources


def table_record(csv_path: Path) -> dict:
    """A comparison table (``scoring.compare``'s CSV) as {testset, columns, rows}."""
    with open(csv_path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return {"testset": csv_path.stem.removeprefix("comparison_"), "columns": rows[0], "rows": rows[1:]}


def picture_record(path: Path) -> dict:
    """A PNG inline (a data URI), titled by its file name."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return {"title": Path(path).stem.replace("_", " "), "src": f"data:image/png;base64,{data}"}


def render(data: dict) -> str:
    """The page: the template with ``data`` inline as JSON (``</`` escaped for the script tag)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return TEMPLATE.read_text(encoding="utf-8").replace("/*DATA*/null", payload)


def write_page(records: list[dict], sources: list[str], out: Path, title: str = "Attention explorer",
               tables: list[Path] = (), pictures: list[Path] = ()) -> Path:
    """Write the page of runs already recorded (``run_record`` of each, on ``sources``) to ``out``
    (atomically), with the comparison ``tables`` (CSV) and ``pictures`` (PNG) that exist; returns it."""
    if not records:
        raise UserError("explore: no runs given")
    data = {"title": title, "decimals": DECIMALS, "sources": sources, "runs": records,
            "tables": [table_record(Path(t)) for t in tables if Path(t).is_file()],
            "pictures": [picture_record(Path(p)) for p in pictures if Path(p).is_file()]}
    return atomic_write_text(Path(out), render(data))


def explore(run_dirs: list[Path], sources: list[str], out: Path, title: str = "Attention explorer",
            tables: list[Path] = (), pictures: list[Path] = (), device: str = "cpu") -> Path:
    """Write the explorer page for ``run_dirs`` on ``sources`` to ``out`` (atomically); returns it."""
    if not run_dirs:
        raise UserError("explore: no runs given")
    return write_page([run_record(Path(d), sources, device) for d in run_dirs], sources, out, title, tables, pictures)
