"""IWSLT 2017 French-English (TED talks): a raw WIT3 release on disk, or the Hugging Face hub.

Splits, as in the hub dataset ``IWSLT/iwslt2017``, config ``iwslt2017-fr-en``:
``train`` (232,825 pairs), ``validation`` (dev2010, 890), ``tst2010`` ... ``tst2015`` each by
name, and ``test`` = tst2010..tst2015 concatenated in that order (8,597 pairs).

Formats
-------
WIT3 release (the folder ``fr-en/`` of ``fr-en.zip``/``.tgz``):

- ``train.tags.fr-en.fr`` / ``train.tags.fr-en.en``: one sentence per line, line-aligned, with
  talk metadata lines in between (``<doc docid=...>``, ``<url>``, ``<keywords>``, ``<speaker>``,
  ``<talkid>``, ``<title>``, ``<description>``, ``<reviewer>``, ``<translator>``, ``</doc>``).
- ``IWSLT17.TED.<set>.fr-en.<lang>.xml`` for dev2010 and tst2010..tst2015: ``<seg id="N">``
  elements, one per line, hold the sentences.

Both kinds of file are read like the reference builder (the ``iwslt2017.py`` loading script of
the hub dataset), so that a release read here gives the same text as the hub's data: each line
is ``str.strip()``-ed; a line starting with ``<seg`` gives the text between the end of its
opening tag and the next ``<`` or ``>``, stripped; any other line starting with ``<`` is dropped;
every other line is a sentence (empty lines included). XML entities are NOT decoded
(``&amp;`` stays ``&amp;``, as in the hub's data and sacrebleu's IWSLT references). Lines end at
``\\n``, ``\\r\\n`` or ``\\r`` (Python's universal newlines, as the reference reads them). XML
files must also be well-formed XML.

Hub parquet (revision ``refs/convert/parquet``, ``iwslt2017-fr-en/<split>/NNNN.parquet``):
one column ``translation`` of structs ``{fr, en}``; splits train, validation and test only.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from data.config import HFDatasetSpec
from data.parallel_text import read_text
from utils.errors import DataError

log = logging.getLogger(__name__)

Pairs = tuple[list[str], list[str]]

HUB_REPO = "IWSLT/iwslt2017"
HUB_ARCHIVE = "data/2017-01-trnted/texts/{src}/{tgt}/{src}-{tgt}.zip"  # on the main revision
HUB_PARQUET_REVISION = "refs/convert/parquet"
HUB_PARQUET_SPLITS = ("train", "validation", "test")
TEST_SETS = ("tst2010", "tst2011", "tst2012", "tst2013", "tst2014", "tst2015")

# Split name -> WIT3 set, each read from "IWSLT17.TED.<set>.<src>-<tgt>.<lang>.xml";
# "train" reads "train.tags.<src>-<tgt>.<lang>", and "test" is TEST_SETS concatenated in order.
SPLIT_FILES: dict[str, str] = {"validation": "dev2010", **{name: name for name in TEST_SETS}}

def hub_dataset_spec(src_lang: str = "fr", tgt_lang: str = "en") -> HFDatasetSpec:
    """The hub dataset at its converted-parquet revision, as ``datasets`` loads it (datasets >= 4
    runs no loading scripts, so the scripted main revision is not used)."""
    return HFDatasetSpec(name=HUB_REPO, config=f"iwslt2017-{src_lang}-{tgt_lang}", revision=HUB_PARQUET_REVISION)


_NEWLINE = re.compile(r"\r\n|\r|\n")
_SEG_TEXT = re.compile(r"<seg[^>]*>([^<>]*)")


def _reference_lines(path: Path, text: str) -> list[str]:
    """Sentences of the ``text`` of a train.tags or XML file, by the reference builder's line
    rule (see the module docstring)."""
    lines = _NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if line.startswith("<seg"):
            match = _SEG_TEXT.match(line)
            if match is None:
                raise DataError(f"{path} line {number}: a <seg> tag that does not end on its line")
            out.append(match.group(1).strip())
        elif not line.startswith("<"):
            out.append(line)
    return out


def read_segments(path: Path) -> list[str]:
    """Sentences of a WIT3 XML file (its ``<seg>`` texts in document order, entities kept)."""
    text = read_text(path)
    try:
        ET.fromstring(text)
    except ET.ParseError as err:
        raise DataError(f"{path} is not well-formed XML ({err})") from None
    return _reference_lines(path, text)


def read_train_tags(path: Path) -> list[str]:
    """Sentences of a WIT3 ``train.tags`` file: its lines without the metadata lines."""
    return _reference_lines(path, read_text(path))


def _find_release(path: Path, src_train: str, tgt_train: str) -> Path:
    """``path`` itself or its one subfolder that holds the training files ``src_train`` and ``tgt_train``."""
    if not path.is_dir():
        raise DataError(f"WIT3 release folder not found: {path}" if not path.exists()
                        else f"WIT3 release path is not a folder: {path}")
    found = [path] if (path / src_train).is_file() else sorted(
        sub for sub in path.iterdir() if (sub / src_train).is_file())
    if not found:
        raise DataError(f"no WIT3 release in {path}: expected {src_train} and {tgt_train} there or in a subfolder")
    if len(found) > 1:
        raise DataError(f"several WIT3 releases in {path} ({', '.join(f.name for f in found)}): point at one")
    if not (found[0] / tgt_train).is_file():
        raise DataError(f"WIT3 release {found[0]} has {src_train} but not {tgt_train}")
    return found[0]


def _read_pair(src_file: Path, tgt_file: Path) -> Pairs:
    """Sentences of a train.tags or XML file pair, which must have as many on both sides."""
    read = read_segments if src_file.suffix == ".xml" else read_train_tags
    src, tgt = read(src_file), read(tgt_file)
    if len(src) != len(tgt):
        raise DataError(f"after dropping meta lines {src_file} has {len(src)} sentences, {tgt_file} has {len(tgt)}")
    return src, tgt


def read_wit3_dir(path: str | Path, src_lang: str = "fr", tgt_lang: str = "en") -> dict[str, Pairs]:
    """Every split of an unpacked WIT3 release folder (or of its one nested folder, e.g. ``fr-en/``).

    Returns ``{split: (source sentences, target sentences)}``: ``train``, and those of
    ``validation``, ``tst2010`` ... ``tst2015`` whose two XML files are present, plus ``test``
    (the present tst sets, in year order). Missing sets are logged as a warning; missing
    training files, unequal sentence counts or malformed XML raise ``DataError``.
    """
    pair = f"{src_lang}-{tgt_lang}"
    src_train, tgt_train = f"train.tags.{pair}.{src_lang}", f"train.tags.{pair}.{tgt_lang}"
    root = _find_release(Path(path), src_train, tgt_train)
    splits = {"train": _read_pair(root / src_train, root / tgt_train)}
    missing = []
    for split, name in SPLIT_FILES.items():
        src_file, tgt_file = (root / f"IWSLT17.TED.{name}.{pair}.{lang}.xml" for lang in (src_lang, tgt_lang))
        if src_file.is_file() and tgt_file.is_file():
            splits[split] = _read_pair(src_file, tgt_file)
        else:
            missing.append(name)
    if missing:
        log.warning("WIT3 release %s lacks %s: those splits are left out", root, ", ".join(missing))
    tests = [splits[name] for name in TEST_SETS if name in splits]
    if tests:
        splits["test"] = ([s for src, _ in tests for s in src], [t for _, tgt in tests for t in tgt])
    return splits


def read_iwslt_parquet(path: str | Path, src_lang: str = "fr", tgt_lang: str = "en") -> Pairs:
    """(source, target) sentences of one parquet file of the hub's converted revision, whose
    column ``translation`` holds ``{fr, en}`` structs."""
    import pyarrow.parquet as pq

    try:
        column = pq.read_table(path, columns=["translation"]).column("translation").combine_chunks()
        sides = column.field(src_lang), column.field(tgt_lang)
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except Exception as err:  # pyarrow raises several types; the message says which problem
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DataError(f"cannot read {path} as IWSLT parquet (column translation of {{{src_lang}, "
                        f"{tgt_lang}}} structs): {first_line}") from None
    if column.null_count or any(side.null_count for side in sides):
        raise DataError(f"{path} has rows without {src_lang} or {tgt_lang} text")
    return sides[0].to_pylist(), sides[1].to_pylist()


def _reason(err: BaseException) -> str:
    """One line about an exception, from the innermost cause (it says what really failed)."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = (str(err).strip().splitlines() or [""])[0]
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _unreachable(err: BaseException) -> bool:
    """Whether a hub error means the hub cannot be reached (then another download fails too)."""
    try:
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # older huggingface_hub
        from huggingface_hub.utils import LocalEntryNotFoundError
    return isinstance(err, (LocalEntryNotFoundError, ConnectionError, TimeoutError))


def _hub_error(reason: str) -> DataError:
    return DataError(f"cannot reach the Hugging Face hub to download {HUB_REPO} ({reason}); "
                     "set data.dir to an unpacked WIT3 release")


def _load_archive(unpacked: Path, src_lang: str, tgt_lang: str, cache_dir: str | None) -> dict[str, Pairs]:
    """Download the WIT3 zip (unless already unpacked), unpack it atomically, read it."""
    import huggingface_hub

    if not unpacked.is_dir():
        archive = huggingface_hub.hf_hub_download(
            repo_id=HUB_REPO, filename=HUB_ARCHIVE.format(src=src_lang, tgt=tgt_lang),
            repo_type="dataset", cache_dir=cache_dir)
        staging = unpacked.with_name(f"{unpacked.name}.tmp{os.getpid()}")
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
            os.replace(staging, unpacked)
        except OSError:
            if not unpacked.is_dir():  # else another process unpacked it first
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return read_wit3_dir(unpacked, src_lang, tgt_lang)


def _load_parquet(src_lang: str, tgt_lang: str, cache_dir: str | None) -> dict[str, Pairs]:
    """Download and read the converted parquet files (train, validation, test; maybe several each)."""
    import huggingface_hub

    config = f"iwslt2017-{src_lang}-{tgt_lang}"
    files = huggingface_hub.list_repo_files(HUB_REPO, repo_type="dataset", revision=HUB_PARQUET_REVISION)
    splits = {}
    for split in HUB_PARQUET_SPLITS:
        names = sorted(f for f in files if re.fullmatch(rf"{re.escape(config)}/{split}/\d+\.parquet", f))
        if not names:
            raise DataError(f"{HUB_REPO} revision {HUB_PARQUET_REVISION} has no {config}/{split}/*.parquet")
        parts = [read_iwslt_parquet(huggingface_hub.hf_hub_download(
            repo_id=HUB_REPO, filename=name, repo_type="dataset", revision=HUB_PARQUET_REVISION,
            cache_dir=cache_dir), src_lang, tgt_lang) for name in names]
        splits[split] = ([s for src, _ in parts for s in src], [t for _, tgt in parts for t in tgt])
    return splits


def load_iwslt2017_hub(cache_dir: str | None = None, src_lang: str = "fr",
                       tgt_lang: str = "en") -> dict[str, Pairs]:
    """All splits of IWSLT 2017 ``src_lang``-``tgt_lang`` from the Hugging Face hub (network
    needed once; afterwards the unpacked release in the cache is read without it).

    First the raw WIT3 zip of ``IWSLT/iwslt2017`` (main revision), unpacked into ``cache_dir``
    (default: the hub cache) and read with ``read_wit3_dir``: it gives every split, tst20xx
    included. If that fails for any reason other than an unreachable hub, the auto-converted
    parquet files (``refs/convert/parquet``) are used instead, which give only ``train``,
    ``validation`` and ``test``. Any failure is one ``DataError`` line, never a hub traceback.
    """
    import huggingface_hub.constants

    base = Path(cache_dir) if cache_dir else Path(huggingface_hub.constants.HF_HUB_CACHE)
    unpacked = base / f"iwslt2017-wit3-{src_lang}-{tgt_lang}"
    try:
        base.mkdir(parents=True, exist_ok=True)
        return _load_archive(unpacked, src_lang, tgt_lang, cache_dir)
    except Exception as err:
        if _unreachable(err):
            raise _hub_error(_reason(err)) from None
        archive_error = err
    log.warning("cannot use the WIT3 archive of %s (%s); trying its parquet files "
                "(splits train, validation, test only)", HUB_REPO, _reason(archive_error))
    try:
        return _load_parquet(src_lang, tgt_lang, cache_dir)
    except Exception as err:
        raise _hub_error(f"archive: {_reason(archive_error)}; parquet: {_reason(err)}") from None
