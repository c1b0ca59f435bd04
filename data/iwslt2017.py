"""IWSLT 2017 fr-en (TED talks): a raw WIT3 release on disk, or the Hugging Face hub.

A WIT3 release folder (``fr-en/``) holds ``train.tags.fr-en.{fr,en}`` (one sentence per line,
interleaved with talk metadata lines such as ``<url>``, ``<talkid>``, ``<title>``,
``<description>``, ``<doc ...>``) and ``IWSLT17.TED.<set>.fr-en.{fr,en}.xml`` whose ``<seg id>``
elements hold the sentences. Splits (as the hub's ``iwslt2017-fr-en`` config): ``train``
(232,825 pairs), ``validation`` (dev2010, 890), ``tst2010`` ... ``tst2015`` each by name, and
``test`` = tst2010..tst2015 concatenated in order (8,597).
"""
from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from data.parallel_text import read_lines
from utils.errors import DataError

log = logging.getLogger(__name__)

HUB_REPO = "IWSLT/iwslt2017"
HUB_ARCHIVE = "data/2017-01-trnted/texts/{src}/{tgt}/{src}-{tgt}.zip"
TEST_SETS = ["tst2010", "tst2011", "tst2012", "tst2013", "tst2014", "tst2015"]
SPLIT_FILES = {"validation": "dev2010", **{name: name for name in TEST_SETS}}


def _find_release(path: Path, src: str, tgt: str) -> Path:
    """The folder holding train.tags.<src>-<tgt>.<src>: ``path`` itself or a folder below it."""
    name = f"train.tags.{src}-{tgt}.{src}"
    if (path / name).is_file():
        return path
    found = sorted(path.rglob(name))
    if not found:
        raise DataError(f"no WIT3 release in {path}: expected {name} (and IWSLT17.TED.*.xml files)")
    return found[0].parent


def read_train_tags(path: Path) -> list[str]:
    """Sentences of a train.tags file: lines that are not <meta> lines, stripped."""
    return [line.strip() for line in read_lines(path) if not line.lstrip().startswith("<")]


def read_segments(path: Path) -> list[str]:
    """Text of every <seg> element of a WIT3 XML file, in document order, stripped."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except ET.ParseError as err:
        raise DataError(f"{path} is not well-formed XML ({err})") from None
    return [(seg.text or "").strip() for seg in root.iter("seg")]


def read_wit3_dir(path: str | Path, src_lang: str = "fr", tgt_lang: str = "en") -> dict[str, tuple[list[str], list[str]]]:
    """Every split available in an unpacked WIT3 release (see the module docstring)."""
    root = _find_release(Path(path), src_lang, tgt_lang)
    pair = f"{src_lang}-{tgt_lang}"
    src_file, tgt_file = root / f"train.tags.{pair}.{src_lang}", root / f"train.tags.{pair}.{tgt_lang}"
    src, tgt = read_train_tags(src_file), read_train_tags(tgt_file)
    if len(src) != len(tgt):
        raise DataError(f"after dropping meta lines {src_file} has {len(src)} sentences, {tgt_file} has {len(tgt)}")
    splits = {"train": (src, tgt)}
    missing = []
    for split, name in SPLIT_FILES.items():
        files = [root / f"IWSLT17.TED.{name}.{pair}.{lang}.xml" for lang in (src_lang, tgt_lang)]
        if not all(f.is_file() for f in files):
            missing.append(name)
            continue
        s, t = read_segments(files[0]), read_segments(files[1])
        if len(s) != len(t):
            raise DataError(f"{files[0]} has {len(s)} segments, {files[1]} has {len(t)}")
        splits[split] = (s, t)
    if missing:
        log.warning("WIT3 release %s lacks %s", root, ", ".join(missing))
    tests = [splits[name] for name in TEST_SETS if name in splits]
    if tests:
        splits["test"] = ([s for t in tests for s in t[0]], [s for t in tests for s in t[1]])
    return splits


def read_iwslt_parquet(path: str | Path, src_lang: str = "fr", tgt_lang: str = "en") -> tuple[list[str], list[str]]:
    """A parquet file of the hub's converted revision: column ``translation`` of {fr, en} structs."""
    import pyarrow.parquet as pq

    try:
        column = pq.read_table(path, columns=["translation"]).column("translation").combine_chunks()
    except Exception as err:
        raise DataError(f"cannot read IWSLT parquet file {path}: {err}") from None
    return (column.field(src_lang).to_pylist(), column.field(tgt_lang).to_pylist())


def load_iwslt2017_hub(cache_dir: str | None = None, src_lang: str = "fr",
                       tgt_lang: str = "en") -> dict[str, tuple[list[str], list[str]]]:
    """Download the raw WIT3 archive of ``IWSLT/iwslt2017`` (it gives every split, tst20xx
    included) and parse it; fall back to the auto-converted parquet files (train, validation,
    test only). Needs the network; any failure is one ``DataError`` line."""
    from huggingface_hub import hf_hub_download

    archive_name = HUB_ARCHIVE.format(src=src_lang, tgt=tgt_lang)
    try:
        archive = hf_hub_download(HUB_REPO, archive_name, repo_type="dataset", cache_dir=cache_dir)
        target = Path(cache_dir or Path(archive).parent) / f"wit3-{src_lang}-{tgt_lang}"
        if not target.is_dir():
            staging = target.with_name(target.name + f".tmp{os.getpid()}")
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
            os.replace(staging, target)
        return read_wit3_dir(target, src_lang, tgt_lang)
    except DataError:
        raise
    except Exception as first:
        try:
            config = f"iwslt2017-{src_lang}-{tgt_lang}"
            return {split: read_iwslt_parquet(hf_hub_download(
                HUB_REPO, f"{config}/{split}/0000.parquet", repo_type="dataset",
                revision="refs/convert/parquet", cache_dir=cache_dir), src_lang, tgt_lang)
                for split in ("train", "validation", "test")}
        except Exception as second:
            reason = str(second).strip().splitlines()[0][:160] if str(second).strip() else type(second).__name__
            raise DataError(f"cannot download {HUB_REPO} from the Hugging Face hub ({reason}; first try: "
                            f"{type(first).__name__}); set data.dir to an unpacked WIT3 release") from None
