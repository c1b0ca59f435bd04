"""Re-segmentation of a joined hypothesis onto its k references (mwerSegmenter's criterion):
hand-made cases, and on random small cases the least summed edit distance found by trying every
segmentation, with a Levenshtein distance written here."""
from __future__ import annotations

import itertools
import random

import pytest

from scoring.resegment import resegment


def levenshtein(a: list[str], b: list[str]) -> int:
    table = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return table[-1][-1]


def total(segments: list[str], references: list[str]) -> int:
    return sum(levenshtein(s.split(), r.split()) for s, r in zip(segments, references))


def brute_force(hypothesis: str, references: list[str]) -> int:
    words = hypothesis.split()
    best = None
    for cuts in itertools.combinations_with_replacement(range(len(words) + 1), len(references) - 1):
        bounds = [0, *cuts, len(words)]
        cost = total([" ".join(words[a:b]) for a, b in zip(bounds, bounds[1:])], references)
        best = cost if best is None else min(best, cost)
    return best


def test_one_reference_is_the_hypothesis_itself():
    assert resegment("  a  man   rides a horse ", ["a man rides a horse"]) == ["a man rides a horse"]
    assert resegment("something else entirely", ["a man"]) == ["something else entirely"]


def test_a_perfect_hypothesis_splits_at_the_sentence_ends():
    refs = ["a man rides a horse .", "two dogs play .", "it rains ."]
    assert resegment(" ".join(refs), refs) == refs


def test_words_moved_across_a_boundary_go_where_they_cost_least():
    # "z" ends the first reference but was translated after the second sentence
    assert resegment("x y p q r z", ["x y z", "p q r"]) == ["x y", "p q r z"]
    # a dropped word: the boundary still falls between the sentences
    assert resegment("a b d e f", ["a b c", "d e f"]) == ["a b", "d e f"]


def test_a_sentence_left_untranslated_is_an_empty_segment():
    assert resegment("a b e f", ["a b", "c d", "e f"]) == ["a b", "", "e f"]
    assert resegment("", ["a", "b"]) == ["", ""]


def test_a_word_that_fits_either_segment_stays_in_the_earlier_one():
    assert resegment("a b extra c d", ["a b", "c d"]) == ["a b extra", "c d"]


@pytest.mark.parametrize("seed", range(40))
def test_the_summed_distance_is_the_least_of_every_segmentation(seed):
    rng = random.Random(seed)
    vocabulary = list("abcdef")
    k = rng.randint(1, 4)
    references = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 4))) for _ in range(k)]
    words = " ".join(references).split()
    for _ in range(rng.randint(0, 4)):  # edits: drop, insert or replace a word
        action, where = rng.choice("dir"), rng.randint(0, len(words))
        if action == "d" and words:
            words.pop(min(where, len(words) - 1))
        elif action == "i":
            words.insert(where, rng.choice(vocabulary))
        elif words:
            words[min(where, len(words) - 1)] = rng.choice(vocabulary)
    hypothesis = " ".join(words)
    segments = resegment(hypothesis, references)
    assert len(segments) == k and " ".join(s for s in segments if s).split() == words  # a partition, in order
    assert total(segments, references) == brute_force(hypothesis, references)


def test_bleu_by_position_scores_each_sentence_of_a_joined_input_apart(tmp_path):
    import sacrebleu

    from scoring.positions import position_points, positions_csv
    from tests.studies.test_archive import evaluated_runs

    runs = evaluated_runs(tmp_path)  # test and test_concat2 (k = 2) of 40 sentences, three runs
    refs = (runs["rope-1"] / "eval" / "test" / "refs.txt").read_text(encoding="utf-8").splitlines()
    halves = [" ".join(r.split()[:max(1, len(r.split()) // 2)]) for r in refs]
    foreign = [" ".join(f"zz{j}" for j in range(len(r.split()))) for r in refs]  # no word of any reference
    joined = {"rope-1": [f"{refs[i]} {foreign[i + 1]}" for i in range(0, 40, 2)],  # the second sentence lost
              "sinusoidal-1": [f"{halves[i]} {refs[i + 1]}" for i in range(0, 40, 2)],  # the first one halved
              "sinusoidal-2": [f"{refs[i]} {refs[i + 1]}" for i in range(0, 40, 2)]}  # both right
    for name, hyps in joined.items():
        (runs[name] / "eval" / "test_concat2" / "hyps.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    points = position_points(list(runs.values()), "test", [2])
    bleu = {(row, p.position): p for row, ps in points.items() for p in ps}
    assert (bleu["rope", 1].bleu, bleu["rope", 2].bleu) == (pytest.approx(100.0), pytest.approx(0.0))
    first_half = sacrebleu.corpus_bleu([halves[i] for i in range(0, 40, 2)], [[refs[i] for i in range(0, 40, 2)]]).score
    assert bleu["sinusoidal", 1].seed_bleus == pytest.approx((first_half, 100.0))
    assert bleu["sinusoidal", 1].bleu == pytest.approx((first_half + 100.0) / 2)
    assert bleu["sinusoidal", 2].seed_bleus == pytest.approx((100.0, 100.0)) and bleu["sinusoidal", 2].sentences == 20
    lines = positions_csv(points).splitlines()
    assert lines[0] == "scheme,k,position,sentences,seeds,bleu,seed_bleus"
    assert "rope,2,2,20,1,0.00,0.00" in lines and f"sinusoidal,2,1,20,2,{(first_half + 100) / 2:.2f}," \
        f"{first_half:.2f};100.00" in lines
