"""IWSLT2017: the WIT3 parser and split logic on a miniature release, parquet, the hub routes.

No test touches the network: hub downloads are replaced, and offline mode is forced for the rest.
"""
from __future__ import annotations

import logging
import time
import zipfile

import pytest

from data import iwslt2017
from utils.errors import DataError


def train_tags(title: str, description: str, talks: tuple[list[str], list[str]], credits: tuple[str, str]) -> str:
    """A WIT3 ``train.tags`` file of two talks: their meta lines (which the reader drops) around each
    talk's lines, written as given (stray spaces, CR, tab and NBSP included)."""
    first, second = ("".join(line + "\n" for line in talk) for talk in talks)
    return ('<doc docid="535" genre="lectures">\n<url>http://www.ted.com/talks/jane_doe.html</url>\n'
            '<keywords>talks, science, art</keywords>\n<speaker>Jane Doe</speaker>\n<talkid>535</talkid>\n'
            f'<title>{title}</title>\n<description>TED Talk Subtitles and Transcript: {description}</description>\n'
            f'{first}</doc>\n<doc docid="536" genre="lectures">\n<url>http://www.ted.com/talks/john_roe.html</url>\n'
            f'<talkid>536</talkid>\n<reviewer href="http://www.ted.com/profiles/1">{credits[0]}</reviewer>\n'
            f'<translator href="http://www.ted.com/profiles/2">{credits[1]}</translator>\n{second}</doc>\n')


TRAIN_FR = train_tags("Jane Doe : Un titre", "une description.",
                      (["  Bonjour à tous.  \r", "Merci beaucoup & bonne nuit.", "", 'Il a dit "oui".'],
                       ["\tC'est la fin.\u00a0"]), ("Quelqu'un", "Quelqu'une"))
TRAIN_EN = train_tags("Jane Doe: A title", "a description.",
                      (["Hello everyone.", "Thank you very much & good night.", "", 'He said "yes".'], ["That's the end."]),
                      ("Someone", "Someone else"))
TRAIN_PAIRS = (["Bonjour à tous.", "Merci beaucoup & bonne nuit.", "", 'Il a dit "oui".', "C'est la fin."],
               ["Hello everyone.", "Thank you very much & good night.", "", 'He said "yes".', "That's the end."])


def xml(lang: str, segments: list[str]) -> str:
    """A WIT3 XML file: segments written as given (entities are the caller's)."""
    segs = "\n".join(f'<seg id="{i + 1}"> {s}  </seg>' for i, s in enumerate(segments))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n'
            f'<srcset setid="iwslt2017-dev2010" srclang="{lang}">\n'
            f'<doc docid="535" genre="lectures">\n<url>http://www.ted.com/talks/x.html</url>\n'
            f'<keywords>talks, science</keywords>\n<speaker>Jane Doe</speaker>\n<talkid>535</talkid>\n'
            f'<title>Un titre</title>\n<description>TED Talk: une &quot;description&quot;</description>\n'
            f'{segs}\n</doc>\n</srcset>\n</mteval>\n')


SETS = {
    "dev2010": (["Oui &amp; non.", "Un &quot;mot&quot; ici.", "Voilà."],
                ["Yes &amp; no.", "A &quot;word&quot; here.", "There."]),
    "tst2010": (["Deux."], ["Two."]),
    "tst2011": (["Trois.", "Trois bis."], ["Three.", "Three again."]),
    "tst2013": (["Quatre.", "Cinq &gt; quatre."], ["Four.", "Five &gt; four."]),
    "tst2015": (["Six."], ["Six."]),
}


def write_release(folder, sets=SETS, train=(TRAIN_FR, TRAIN_EN)):
    """A miniature WIT3 fr-en release in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README").write_text("IWSLT 2017 fr-en\n", encoding="utf-8")
    (folder / "train.tags.fr-en.fr").write_bytes(train[0].encode("utf-8"))
    (folder / "train.tags.fr-en.en").write_bytes(train[1].encode("utf-8"))
    for name, (fr, en) in sets.items():
        (folder / f"IWSLT17.TED.{name}.fr-en.fr.xml").write_text(xml("fr", fr), encoding="utf-8")
        (folder / f"IWSLT17.TED.{name}.fr-en.en.xml").write_text(xml("en", en), encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Force huggingface_hub's offline mode so that no test can reach (or wait for) the network."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_miniature_release_is_parsed_like_the_reference(tmp_path, caplog):
    write_release(tmp_path)
    with caplog.at_level(logging.WARNING):
        splits = iwslt2017.read_wit3_dir(tmp_path)
    # meta lines dropped, lines stripped (NBSP, tab, CR included), empty lines kept as the reference does
    assert splits["train"] == TRAIN_PAIRS
    # <seg> text stripped, XML entities kept as written (the reference does not decode them)
    assert splits["validation"] == (["Oui &amp; non.", "Un &quot;mot&quot; ici.", "Voilà."],
                                    ["Yes &amp; no.", "A &quot;word&quot; here.", "There."])
    assert splits["tst2013"] == (["Quatre.", "Cinq &gt; quatre."], ["Four.", "Five &gt; four."])
    assert list(splits) == ["train", "validation", "tst2010", "tst2011", "tst2013", "tst2015", "test"]
    assert splits["test"] == (["Deux.", "Trois.", "Trois bis.", "Quatre.", "Cinq &gt; quatre.", "Six."],
                              ["Two.", "Three.", "Three again.", "Four.", "Five &gt; four.", "Six."])
    assert "tst2012, tst2014" in caplog.text


def test_nested_folder_is_found(tmp_path):
    (tmp_path / "other").mkdir()
    write_release(tmp_path / "fr-en")
    splits = iwslt2017.read_wit3_dir(tmp_path)
    assert splits["train"] == TRAIN_PAIRS and splits["tst2010"] == (["Deux."], ["Two."])
    assert iwslt2017.read_wit3_dir(tmp_path / "fr-en") == splits
    write_release(tmp_path / "copy")
    with pytest.raises(DataError, match=r"several WIT3 releases in .* \(copy, fr-en\)"):
        iwslt2017.read_wit3_dir(tmp_path)


def test_missing_sets_leave_their_splits_out(tmp_path, caplog):
    write_release(tmp_path, sets={"tst2014": (["Un."], ["One."])})
    with caplog.at_level(logging.WARNING):
        splits = iwslt2017.read_wit3_dir(tmp_path)
    assert set(splits) == {"train", "tst2014", "test"} and splits["test"] == (["Un."], ["One."])
    assert "dev2010" in caplog.text and "tst2015" in caplog.text
    (tmp_path / "IWSLT17.TED.tst2014.fr-en.en.xml").unlink()  # one side only: the set is absent
    assert set(iwslt2017.read_wit3_dir(tmp_path)) == {"train"}


def test_missing_release_and_missing_training_files(tmp_path):
    with pytest.raises(DataError, match="WIT3 release folder not found"):
        iwslt2017.read_wit3_dir(tmp_path / "nowhere")
    folder = write_release(tmp_path / "fr-en")
    (folder / "train.tags.fr-en.fr").unlink()
    with pytest.raises(DataError, match=r"no WIT3 release in .*: expected train\.tags\.fr-en\.fr and "
                                        r"train\.tags\.fr-en\.en there or in a subfolder"):
        iwslt2017.read_wit3_dir(tmp_path)
    (folder / "train.tags.fr-en.fr").write_text(TRAIN_FR, encoding="utf-8")
    (folder / "train.tags.fr-en.en").unlink()
    with pytest.raises(DataError, match=r"WIT3 release .*fr-en has train\.tags\.fr-en\.fr but not train\.tags\.fr-en\.en"):
        iwslt2017.read_wit3_dir(tmp_path)
    with pytest.raises(DataError, match="is not a folder"):
        iwslt2017.read_wit3_dir(folder / "train.tags.fr-en.fr")


def test_mismatched_training_sides_are_an_error(tmp_path):
    write_release(tmp_path, train=(TRAIN_FR + "Encore une.\n", TRAIN_EN))
    with pytest.raises(DataError) as err:
        iwslt2017.read_wit3_dir(tmp_path)
    message = str(err.value)
    assert "train.tags.fr-en.fr has 6 sentences" in message and "train.tags.fr-en.en has 5" in message


def test_mismatched_xml_sides_are_an_error(tmp_path):
    write_release(tmp_path, sets={**SETS, "tst2012": (["Un.", "Deux."], ["One."])})
    with pytest.raises(DataError, match=r"tst2012\.fr-en\.fr\.xml has 2 sentences.*tst2012\.fr-en\.en\.xml has 1"):
        iwslt2017.read_wit3_dir(tmp_path)


def test_malformed_xml_is_an_error_naming_the_file(tmp_path):
    folder = write_release(tmp_path)
    (folder / "IWSLT17.TED.tst2010.fr-en.en.xml").write_text(
        '<mteval>\n<doc docid="1">\n<seg id="1"> oops </seg>\n</mteval>\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"IWSLT17\.TED\.tst2010\.fr-en\.en\.xml is not well-formed XML \(.*line 4"):
        iwslt2017.read_wit3_dir(tmp_path)
    (folder / "IWSLT17.TED.tst2010.fr-en.en.xml").write_text(xml("en", ["Bad & raw ampersand."]), encoding="utf-8")
    with pytest.raises(DataError, match="tst2010.fr-en.en.xml is not well-formed XML"):
        iwslt2017.read_wit3_dir(tmp_path)


def test_bad_utf8_in_train_tags_names_the_line(tmp_path):
    folder = write_release(tmp_path)
    (folder / "train.tags.fr-en.en").write_bytes(TRAIN_EN.encode() + b"caf\xe9\n")
    with pytest.raises(DataError, match=r"train\.tags\.fr-en\.en line 20 is not valid UTF-8"):
        iwslt2017.read_wit3_dir(tmp_path)


def write_parquet(path, pairs):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    struct = pa.struct([("en", pa.string()), ("fr", pa.string())])  # the hub's field order
    rows = [{"en": en, "fr": fr} for fr, en in pairs]
    pq.write_table(pa.table({"translation": pa.array(rows, type=struct)}), path)
    return path


def test_parquet_in_the_hub_format(tmp_path):
    path = write_parquet(tmp_path / "0000.parquet", [("Bonjour.", "Hello."), ("Oui &amp; non.", "Yes &amp; no.")])
    assert iwslt2017.read_iwslt_parquet(path) == (["Bonjour.", "Oui &amp; non."], ["Hello.", "Yes &amp; no."])
    assert iwslt2017.read_iwslt_parquet(path, "en", "fr") == (["Hello.", "Yes &amp; no."], ["Bonjour.", "Oui &amp; non."])


def test_parquet_errors_name_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pytest.raises(DataError, match="file not found"):
        iwslt2017.read_iwslt_parquet(tmp_path / "none.parquet")
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "other.parquet")
    with pytest.raises(DataError, match=r"cannot read .*other\.parquet as IWSLT parquet"):
        iwslt2017.read_iwslt_parquet(tmp_path / "other.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match=r"junk\.parquet"):
        iwslt2017.read_iwslt_parquet(tmp_path / "junk.parquet")


def zipped_release(tmp_path):
    """A fr-en.zip like the hub's: the release under a top folder fr-en/."""
    folder = write_release(tmp_path / "src" / "fr-en")
    archive = tmp_path / "fr-en.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted(folder.iterdir()):
            zf.write(file, f"fr-en/{file.name}")
    return archive


def test_hub_archive_route_unpacks_once_then_works_offline(tmp_path, monkeypatch):
    import huggingface_hub

    archive, calls = zipped_release(tmp_path), []

    def download(repo_id, filename, **kwargs):
        calls.append((repo_id, filename, kwargs.get("repo_type"), kwargs.get("revision")))
        return str(archive)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    cache = tmp_path / "cache"
    splits = iwslt2017.load_iwslt2017_hub(cache_dir=str(cache))
    assert calls == [("IWSLT/iwslt2017", "data/2017-01-trnted/texts/fr/en/fr-en.zip", "dataset", None)]
    assert splits["train"] == TRAIN_PAIRS and splits["tst2011"] == (["Trois.", "Trois bis."], ["Three.", "Three again."])
    assert len(splits["test"][0]) == 6
    assert [p.name for p in cache.iterdir()] == ["iwslt2017-wit3-fr-en"]  # no staging folder left behind

    def unreachable(*args, **kwargs):
        raise AssertionError("the unpacked release must be read without the hub")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    assert iwslt2017.load_iwslt2017_hub(cache_dir=str(cache)) == splits


def test_hub_falls_back_to_parquet_files(tmp_path, monkeypatch, caplog):
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    files = {
        "iwslt2017-fr-en/train/0000.parquet": [("Un.", "One."), ("Deux.", "Two.")],
        "iwslt2017-fr-en/train/0001.parquet": [("Trois.", "Three.")],
        "iwslt2017-fr-en/validation/0000.parquet": [("Oui.", "Yes.")],
        "iwslt2017-fr-en/test/0000.parquet": [("Non.", "No.")],
        "iwslt2017-de-en/train/0000.parquet": [("Eins.", "One.")],
    }
    for name, pairs in files.items():
        write_parquet(tmp_path / "hub" / name, pairs)

    def download(repo_id, filename, **kwargs):
        if filename.endswith(".zip"):
            raise EntryNotFoundError(f"404: {filename} is not in {repo_id}")
        assert kwargs["revision"] == "refs/convert/parquet" and kwargs["repo_type"] == "dataset"
        return str(tmp_path / "hub" / filename)

    def list_files(repo_id, repo_type=None, revision=None):
        assert (repo_id, repo_type, revision) == ("IWSLT/iwslt2017", "dataset", "refs/convert/parquet")
        return ["README.md", *sorted(files, reverse=True)]

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", list_files)
    with caplog.at_level(logging.WARNING):
        splits = iwslt2017.load_iwslt2017_hub(cache_dir=str(tmp_path / "cache"))
    assert splits == {"train": (["Un.", "Deux.", "Trois."], ["One.", "Two.", "Three."]),
                      "validation": (["Oui."], ["Yes."]), "test": (["Non."], ["No."])}
    assert "EntryNotFoundError" in caplog.text and "parquet" in caplog.text


def test_hub_network_failure_is_one_data_error(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    def no_network(repo_id, filename, **kwargs):
        calls.append(filename)
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    with pytest.raises(DataError) as err:
        iwslt2017.load_iwslt2017_hub(cache_dir=str(tmp_path))
    message = str(err.value)
    assert message.startswith("cannot reach the Hugging Face hub to download IWSLT/iwslt2017 (ConnectionError: ")
    assert message.endswith("; set data.dir to an unpacked WIT3 release") and "\n" not in message
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert calls == ["data/2017-01-trnted/texts/fr/en/fr-en.zip"]  # unreachable: no second attempt


def test_hub_failure_of_both_routes_is_one_data_error(tmp_path, monkeypatch):
    import huggingface_hub

    def broken(*args, **kwargs):
        raise RuntimeError("500 Server Error\nsecond line of a long hub message")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", broken)
    with pytest.raises(DataError, match=r"\(archive: RuntimeError: 500 Server Error; parquet: RuntimeError: "
                                        r"500 Server Error\); set data\.dir") as err:
        iwslt2017.load_iwslt2017_hub(cache_dir=str(tmp_path))
    assert "\n" not in str(err.value)


def test_real_hub_library_offline_fails_fast_with_a_data_error(tmp_path):
    """The real huggingface_hub calls, in offline mode (autouse fixture): no network, no hang."""
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"cannot reach the Hugging Face hub .*OfflineModeIsEnabled"):
        iwslt2017.load_iwslt2017_hub(cache_dir=str(tmp_path))
    assert time.perf_counter() - start < 10
