"""What the translate command warns about before it translates: inputs the model was not trained
for, which it would otherwise turn into fluent nonsense without a word.

Two signs, each warned about once per command (the first line that shows it, on stderr):
a source longer in subword tokens than the longest training source (the run's manifest,
``longest_training_tokens``: positions past it were never read in training, where most schemes
degrade), and a source where unknown text (``<unk>``, or a tokenizer's byte-fallback pieces: each
run of consecutive such pieces counted once, as one stretch of unknown characters) reaches half
its words (another language or script than the training data's).
"""
from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN_SHARE = 0.5  # stretches of unknown pieces, over the line's words, from which a line is flagged


@dataclass
class InputCheck:
    """``longest``: the longest training source in subword tokens (None: the run does not record it);
    ``unknown_ids``: the pieces that stand for unknown text (``Tokenizer.unknown_src_ids``).
    ``warned``: the signs already reported."""

    longest: int | None
    unknown_ids: frozenset[int]
    warned: set[str] = field(default_factory=set)

    def warnings(self, number: int, text: str, ids: list[int]) -> list[str]:
        """The warnings line ``number`` (its ``text`` and source ``ids``) raises that were not raised before."""
        found = []
        if self.longest and len(ids) > self.longest and "long" not in self.warned:
            self.warned.add("long")
            found.append(f"warning: line {number} has {len(ids)} subword tokens, more than the longest training "
                         f"source ({self.longest}): the model never read positions that far and may translate it "
                         f"poorly (said once; --quiet silences it)")
        words = len(text.split())
        marks = [i in self.unknown_ids for i in ids]
        unknown = sum(mark and not (j and marks[j - 1]) for j, mark in enumerate(marks))  # stretches of them
        if words and unknown >= UNKNOWN_SHARE * words and "unknown" not in self.warned:
            self.warned.add("unknown")
            found.append(f"warning: line {number}: {min(unknown, words)} of its {words} words hold pieces the "
                         f"tokenizer does not know (another language or script than the training data?): its "
                         f"translation is a guess (said once; --quiet silences it)")
        return found
