"""The translate command's warnings on inputs the model was not trained for (search.input_check)."""
from __future__ import annotations

from search.input_check import InputCheck

UNK = 1


def test_a_source_longer_than_any_training_source_is_flagged_once():
    check = InputCheck(longest=12, unknown_ids=frozenset({UNK}))
    assert check.warnings(1, "a b c", [5] * 12) == []  # as long as the longest: as trained
    first = check.warnings(2, "long " * 13, [5] * 13)
    assert len(first) == 1 and first[0].startswith("warning: line 2 has 13 subword tokens, more than the longest "
                                                   "training source (12)")
    assert check.warnings(3, "longer " * 40, [5] * 40) == []  # said once


def test_a_line_of_mostly_unknown_pieces_is_flagged_once():
    check = InputCheck(longest=None, unknown_ids=frozenset({UNK}))  # a run that records no training lengths: no length warning
    assert check.warnings(1, "x " * 80, [5] * 80) == []
    assert check.warnings(2, "un chat noir et blanc", [5, UNK, 6, 7, 8, 9]) == []  # one of five words
    found = check.warnings(3, "مرحبا بالعالم", [4, UNK, 4, UNK])
    assert found == ["warning: line 3: 2 of its 2 words hold pieces the tokenizer does not know (another language "
                     "or script than the training data?): its translation is a guess (said once; --quiet silences it)"]
    assert check.warnings(4, "другой язык", [UNK, UNK]) == []
    assert check.warnings(5, "", []) == []  # an empty line is no sign of anything


def test_byte_fallback_pieces_count_as_unknown_text_a_stretch_at_a_time():
    """A tokenizer with byte fallback spells an unknown character as its UTF-8 bytes (3 pieces for a
    CJK character): a stretch of such pieces is one unknown stretch, not one per byte."""
    b1, b2, b3 = 300, 301, 302
    check = InputCheck(longest=None, unknown_ids=frozenset({UNK, b1, b2, b3}))
    # one accented character unknown in one of five words: 3 byte pieces, one stretch, below half
    assert check.warnings(1, "un garçon mange une pomme", [5, b1, b2, b3, 6, 7, 8, 9]) == []
    found = check.warnings(2, "你好 世界", [b1, b2, b3, b1, b2, b3, 4, b1, b2, b3])
    assert len(found) == 1 and found[0].startswith("warning: line 2: 2 of its 2 words hold pieces")
