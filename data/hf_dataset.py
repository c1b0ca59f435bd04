"""Translation corpora through Hugging Face ``datasets`` (``data.source: hf``, and IWSLT2017 from the hub).

``load_hf_splits(spec, ...)`` returns named splits of (source, target) sentences from

- the hub: ``datasets.load_dataset(name, config, revision=..., split=...)``, cached under
  ``<data.cache_dir>/datasets`` (memory-mapped Arrow), so the network is needed once;
- a local folder written by ``save_to_disk`` (``datasets.load_from_disk``);
- a local folder of parquet or JSON Lines files, in the hub's converted layout
  ``<folder>/<config>/<split>/*.parquet`` or directly ``<folder>/<split>/*`` — read by the same
  ``load_dataset`` call as the hub (the folder in place of the hub id).

Rows hold a ``translation`` dict keyed by language code (``{"fr": ..., "en": ...}``) or two text
columns. A missing split, field or language key, a non-string value, or a hub that cannot be
reached for a corpus that is not cached is one ``DataError`` line naming the dataset and split.
When the hub cannot be reached at all (no network), the loader goes straight to offline mode
(the cache only) instead of retrying for half a minute.
"""
from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from data.config import HFDatasetSpec
from utils.errors import DataError

log = logging.getLogger(__name__)

Pairs = tuple[list[str], list[str]]
SAVED_MARKERS = ("dataset_dict.json", "dataset_info.json", "state.json")  # save_to_disk folders
FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the hub's endpoint opens within ``timeout`` seconds."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _first_line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return text if len(text) <= 200 else text[:197] + "..."


def _local_files(folder: Path, config: str, split: str) -> tuple[str, list[str]] | None:
    """(builder, files) of a split in a local folder of parquet / JSON Lines files, or None."""
    for base in ([folder / config] if config else []) + [folder]:
        candidates = sorted(p for p in (base / split).glob("*") if p.suffix in FILE_BUILDERS) \
            if (base / split).is_dir() else \
            sorted(p for p in base.glob(f"{split}*") if p.is_file() and p.suffix in FILE_BUILDERS)
        if candidates:
            builders = {FILE_BUILDERS[p.suffix] for p in candidates}
            if len(builders) > 1:
                raise DataError(f"{base / split}: mixes parquet and JSON files")
            return builders.pop(), [str(p) for p in candidates]
    return None


def _load_split(spec: HFDatasetSpec, split: str, cache_dir: str):
    """One split as a ``datasets.Dataset`` (memory-mapped), from the hub or a local folder."""
    import datasets

    datasets.disable_progress_bars()  # the loader logs its own line per split

    where = f"dataset {spec.name}" + (f" ({spec.config})" if spec.config else "")
    folder = Path(spec.name).expanduser()
    if folder.is_dir():
        if any((folder / marker).is_file() for marker in SAVED_MARKERS):
            loaded = datasets.load_from_disk(str(folder))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise DataError(f"{where} has no split '{split}' (it has: {', '.join(loaded)}); "
                                    f"map ours to its names with data.hf.split_map")
                return loaded[split]
            return loaded  # a single saved Dataset serves every split asked for
        found = _local_files(folder, spec.config, split)
        if found is None:
            raise DataError(f"{where}: no split '{split}' in {folder} (expected {split}/*.parquet or "
                            f"*.jsonl, or {spec.config or '<config>'}/{split}/*, or a save_to_disk folder)")
        builder, files = found
        return datasets.load_dataset(builder, data_files={split: files}, split=split, cache_dir=cache_dir)
    if spec.name.startswith((".", "/", "~")):
        raise DataError(f"data.hf.name: folder not found: {spec.name}")
    import huggingface_hub.constants

    offline = not hub_reachable()
    previous = huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE
    huggingface_hub.constants.HF_HUB_OFFLINE = datasets.config.HF_HUB_OFFLINE = offline or previous[1]
    try:
        return datasets.load_dataset(spec.name, spec.config or None, revision=spec.revision or None, split=split,
                                     cache_dir=cache_dir)
    except ValueError as err:  # an unknown split or config
        raise DataError(f"{where}: {_first_line(err)}") from None
    except Exception as err:  # noqa: BLE001 - hub and cache failures come in many types
        if offline:
            raise DataError(f"{where} split '{split}' is not in the local cache ({cache_dir}) and the Hugging Face "
                            f"hub cannot be reached; provide the corpus as a local folder (data.hf.name: FOLDER "
                            f"written by save_to_disk, or parquet/JSON files)"
                            + (" or, for IWSLT2017, an unpacked WIT3 release (data.dir)" if "iwslt" in
                               spec.name.lower() else "")) from None
        raise DataError(f"cannot load {where} split '{split}': {_first_line(err)}") from None
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = previous


class ArrowTexts(Sequence[str]):
    """One side of a split read lazily from an Arrow string column (memory-mapped from the
    ``datasets`` cache): only the sentences asked for become Python strings, so a corpus larger
    than memory can be hashed, sampled, filtered and tokenized chunk by chunk. ``index`` (kept
    rows, in order) makes a filtered view without copying the column."""

    def __init__(self, column, index: np.ndarray | None = None):
        self.column, self.index = column, index

    def __len__(self) -> int:
        return len(self.column) if self.index is None else len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            if self.index is None:
                return self.column.slice(start, max(0, stop - start)).to_pylist()
            return self.column.take(self.index[start:stop]).to_pylist()
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i = i % len(self)
        return self.column[int(i if self.index is None else self.index[i])].as_py()

    def take(self, keep) -> ArrowTexts:
        """The view of rows ``keep`` (positions in this sequence)."""
        keep = np.asarray(keep, dtype=np.int64)
        return ArrowTexts(self.column, keep if self.index is None else self.index[keep])


def _arrow_table(dataset):
    """The split's Arrow table without copying it (a memory-mapped dataset stays mapped)."""
    if getattr(dataset, "_indices", None) is None:
        return dataset.data.table
    return dataset.with_format("arrow")[:]


def _texts(dataset, spec: HFDatasetSpec, src_lang: str, tgt_lang: str, where: str) -> tuple[ArrowTexts, ArrowTexts]:
    """The (source, target) sides of a split as lazy sequences over its Arrow columns, checked
    (field, language keys, string type, no nulls) without converting them to Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _arrow_table(dataset)
    if spec.src_column:
        missing = [c for c in (spec.src_column, spec.tgt_column) if c not in table.column_names]
        if missing:
            raise DataError(f"{where} has no column {missing[0]!r} (columns: {', '.join(table.column_names)})")
        columns = [table.column(spec.src_column), table.column(spec.tgt_column)]
        labels = [spec.src_column, spec.tgt_column]
    else:
        field = spec.translation_field
        if field not in table.column_names:
            raise DataError(f"{where} has no column {field!r} (columns: {', '.join(table.column_names)}); "
                            f"set data.hf.translation_field, or data.hf.src_column and tgt_column")
        column = table.column(field)
        if not pa.types.is_struct(column.type):
            raise DataError(f"{where}: column {field!r} holds {column.type}, not a dict keyed by language")
        keys = [column.type.field(i).name for i in range(column.type.num_fields)]
        for lang in (src_lang, tgt_lang):
            if lang not in keys:
                raise DataError(f"{where}: {field!r} has no {lang!r} key (keys: {', '.join(keys)})")
        if column.null_count:
            raise DataError(f"{where}: {field!r} is empty (null) in row {pc.index(column.is_null(), True).as_py()}")
        columns = [pa.chunked_array([chunk.field(lang) for chunk in column.chunks], type=column.type.field(lang).type)
                   for lang in (src_lang, tgt_lang)]
        labels = [f"{field}.{src_lang}", f"{field}.{tgt_lang}"]
    for values, label in zip(columns, labels):
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            raise DataError(f"{where}: {label} holds {values.type} values, not text")
        if values.null_count:
            raise DataError(f"{where}: {label} is empty (null) in row {pc.index(values.is_null(), True).as_py()}")
    return ArrowTexts(columns[0]), ArrowTexts(columns[1])


def load_hf_splits(spec: HFDatasetSpec, src_lang: str, tgt_lang: str, splits: list[str],
                   cache_dir: str) -> dict[str, tuple[ArrowTexts, ArrowTexts]]:
    """Our splits ``splits`` (renamed by ``spec.split_map``) as lazy (source, target) sequences."""
    if not spec.name:
        raise DataError("data.source is hf but data.hf.name is empty (a hub dataset id or a local folder)")
    out = {}
    for split in splits:
        theirs = spec.split_map.get(split, split)
        dataset = _load_split(spec, theirs, cache_dir)
        out[split] = _texts(dataset, spec, src_lang, tgt_lang, f"dataset {spec.name} split '{theirs}'")
        log.info("split %s: %d pairs from %s split %s", split, len(out[split][0]), spec.name, theirs)
    return out
