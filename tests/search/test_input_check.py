"""The translate command's warnings on inputs the model was not trained for (search.input_check)."""
from __future__ import annotations

from search.input_check import InputCheck

UNK = 1


def test_a_source_longer_than_any_training_source_is_flagged_once():
    check = InputCheck(longest=12, unk_id=UNK)
    assert check.warnings(1, "a b c", [5] * 12) == []  # as long as the longest: as trained
    first = check.warnings(2, "long " * 13, [5] * 13)
    assert len(first) == 1 and first[0].startswith("warning: line 2 has 13 subword tokens, more than the longest "
                                                   "training source (12)")
    assert check.warnings(3, "longer " * 40, [5] * 40) == []  # said once


def test_a_line_of_mostly_unknown_pieces_is_flagged_once():
    check = InputCheck(longest=None, unk_id=UNK)  # a run that records no training lengths: no length warning
    assert check.warnings(1, "x " * 80, [5] * 80) == []
    assert check.warnings(2, "un chat noir et blanc", [5, UNK, 6, 7, 8, 9]) == []  # one of five words
    found = check.warnings(3, "مرحبا بالعالم", [4, UNK, 4, UNK])
    assert found == ["warning: line 3: 2 of its 2 words hold pieces the tokenizer does not know (another language "
                     "or script than the training data?): its translation is a guess (said once; --quiet silences it)"]
    assert check.warnings(4, "другой язык", [UNK, UNK]) == []
    assert check.warnings(5, "", []) == []  # an empty line is no sign of anything
