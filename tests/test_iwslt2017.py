"""IWSLT2017: the WIT3 parser and split logic on a miniature release, parquet, hub failures."""
from __future__ import annotations

import pytest

from data import iwslt2017
from utils.errors import DataError

TRAIN_FR = """<doc docid="1" genre="lectures">
<url>http://www.ted.com/talks/x</url>
<keywords>talks, science</keywords>
<speaker>Jane Doe</speaker>
<talkid>1</talkid>
<title>Jane Doe: Un titre</title>
<description>TED Talk Subtitles and Transcript: une description</description>
  Bonjour à tous.  
Merci beaucoup.
</doc>
<reviewer></reviewer>
<translator href="x">Someone</translator>
C'est la fin.
"""
TRAIN_EN = """<doc docid="1" genre="lectures">
<url>http://www.ted.com/talks/x</url>
<keywords>talks, science</keywords>
<speaker>Jane Doe</speaker>
<talkid>1</talkid>
<title>Jane Doe: A title</title>
<description>TED Talk Subtitles and Transcript: a description</description>
Hello everyone.
Thank you very much.
</doc>
<reviewer></reviewer>
<translator href="x">Someone</translator>
That's the end.
"""


def xml(segments: list[str]) -> str:
    segs = "\n".join(f'<seg id="{i + 1}"> {s} </seg>' for i, s in enumerate(segments))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<srcset setid="iwslt2017" srclang="french">\n'
            f'<doc docid="535" genre="lectures">\n<url>http://x</url>\n<description>d</description>\n'
            f'<talkid>535</talkid>\n<title>t</title>\n{segs}\n</doc>\n</srcset>\n</mteval>\n')


SETS = {"dev2010": (["Oui &amp; non.", "Un &quot;mot&quot;."], ["Yes &amp; no.", "A &quot;word&quot;."]),
        "tst2010": (["Deux."], ["Two."]), "tst2011": (["Trois."], ["Three."]),
        "tst2013": (["Quatre.", "Cinq."], ["Four.", "Five."])}


def write_release(root, sets=SETS, train=(TRAIN_FR, TRAIN_EN)):
    folder = root / "fr-en"
    folder.mkdir(parents=True)
    (folder / "train.tags.fr-en.fr").write_text(train[0], encoding="utf-8")
    (folder / "train.tags.fr-en.en").write_text(train[1], encoding="utf-8")
    for name, (fr, en) in sets.items():
        (folder / f"IWSLT17.TED.{name}.fr-en.fr.xml").write_text(xml(fr), encoding="utf-8")
        (folder / f"IWSLT17.TED.{name}.fr-en.en.xml").write_text(xml(en), encoding="utf-8")
    return folder


def test_miniature_release_is_parsed_like_the_reference(tmp_path):
    write_release(tmp_path)
    splits = iwslt2017.read_wit3_dir(tmp_path)  # the release sits in a nested fr-en/ folder
    assert splits["train"] == (["Bonjour à tous.", "Merci beaucoup.", "C'est la fin."],
                               ["Hello everyone.", "Thank you very much.", "That's the end."])
    assert splits["validation"] == (['Oui & non.', 'Un "mot".'], ['Yes & no.', 'A "word".'])
    assert splits["tst2011"] == (["Trois."], ["Three."])
    assert splits["test"] == (["Deux.", "Trois.", "Quatre.", "Cinq."], ["Two.", "Three.", "Four.", "Five."])
    assert "tst2012" not in splits  # missing years are simply absent
    assert set(splits) == {"train", "validation", "tst2010", "tst2011", "tst2013", "test"}


def test_mismatched_training_sides_are_an_error(tmp_path):
    write_release(tmp_path, train=(TRAIN_FR + "Encore une.\n", TRAIN_EN))
    with pytest.raises(DataError, match="train.tags.fr-en.fr has 4 sentences"):
        iwslt2017.read_wit3_dir(tmp_path)


def test_malformed_xml_and_missing_release(tmp_path):
    (tmp_path / "empty").mkdir()
    folder = write_release(tmp_path)
    (folder / "IWSLT17.TED.tst2010.fr-en.en.xml").write_text("<mteval><seg>oops</mteval>", encoding="utf-8")
    with pytest.raises(DataError, match="tst2010.fr-en.en.xml is not well-formed XML"):
        iwslt2017.read_wit3_dir(tmp_path)
    with pytest.raises(DataError, match="no WIT3 release"):
        iwslt2017.read_wit3_dir(tmp_path / "empty")


def test_parquet_in_the_hub_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"translation": [{"en": "Hello.", "fr": "Bonjour."}, {"en": "Yes.", "fr": "Oui."}]})
    pq.write_table(table, tmp_path / "0000.parquet")
    assert iwslt2017.read_iwslt_parquet(tmp_path / "0000.parquet") == (["Bonjour.", "Oui."], ["Hello.", "Yes."])


def test_hub_failure_is_one_data_error(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    def offline(*args, **kwargs):
        calls.append(args[1])
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(DataError, match="set data.dir to an unpacked WIT3 release"):
        iwslt2017.load_iwslt2017_hub(cache_dir=str(tmp_path))
    assert calls[0].endswith("fr-en.zip") and calls[1].endswith("train/0000.parquet")
