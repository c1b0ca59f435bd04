"""Long inputs from short ones (data/concatenated.py): k consecutive sentences joined, the leftovers
left out, sources and references grouped alike; ``nmt test --concat`` evaluates them as test sets."""
from __future__ import annotations

import json

import pytest

from data.concatenated import concatenate, concatenated_name
from utils.errors import UserError


def test_groups_are_consecutive_aligned_and_the_leftovers_left_out():
    sources = [f"s{i} " for i in range(7)]  # stray whitespace is not doubled at the joins
    targets = [f"t{i}" for i in range(7)]
    src, ref = concatenate(sources, targets, 3)
    assert src == ["s0 s1 s2", "s3 s4 s5"] and ref == ["t0 t1 t2", "t3 t4 t5"]  # s6 / t6: too few for a group
    assert concatenate(sources, targets, 1) == ([s.strip() for s in sources], targets)
    assert concatenate(sources, targets, 7) == (["s0 s1 s2 s3 s4 s5 s6"], [" ".join(targets)])
    for k in (1, 2, 4):  # every segment holds exactly k sentences, source and reference alike
        src, ref = concatenate(sources, targets, k)
        assert len(src) == len(ref) == 7 // k
        assert all(len(s.split()) == len(r.split()) == k for s, r in zip(src, ref))
    assert concatenated_name("test_2016_flickr", 8) == "test_2016_flickr_concat8"
    assert concatenated_name("test", 1) == "test"


@pytest.mark.parametrize("sources, targets, k, message", [
    (["a"], ["b"], 0, "group sizes of at least 1, got 0"),
    (["a", "b"], ["c"], 2, "2 sources but 1 references"),
    (["a"], ["b"], 2, "1 sentences make no group of 2"),
])
def test_bad_groupings_are_one_line_errors(sources, targets, k, message):
    with pytest.raises(UserError, match=message):
        concatenate(sources, targets, k)


def test_the_test_command_scores_the_concatenated_sets_against_the_joined_references(runs, tmp_path):
    from nmt import evaluate as test_cli

    run = runs["sin1"]
    source, reference = tmp_path / "few.fr", tmp_path / "few.en"
    french = ["Le chat dort .", "La femme lit .", "Un homme mange .", "Le chien court .", "Elle chante ."]
    english = ["The cat sleeps .", "The woman reads .", "A man eats .", "The dog runs .", "She sings ."]
    source.write_text("\n".join(french) + "\n", encoding="utf-8")
    reference.write_text("\n".join(english) + "\n", encoding="utf-8")
    test_cli.main(["--run", str(run), "--src", str(source), "--ref", str(reference), "--name", "few",
                   "--concat", "1", "2", "2"])
    folder = run / "eval" / "few_concat2"
    assert (folder / "refs.txt").read_text(encoding="utf-8").splitlines() == [
        "The cat sleeps . The woman reads .", "A man eats . The dog runs ."]
    assert (folder / "srcs.txt").read_text(encoding="utf-8").splitlines() == [
        "Le chat dort . La femme lit .", "Un homme mange . Le chien court ."]
    record = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert record["testset"] == "few_concat2" and record["n_sentences"] == 2
    assert len((folder / "hyps.txt").read_text(encoding="utf-8").splitlines()) == 2
    assert (run / "eval" / "few" / "results.json").is_file() and not (run / "eval" / "few_concat1").exists()
    with pytest.raises(UserError, match="make no group of 8"):
        test_cli.main(["--run", str(run), "--src", str(source), "--ref", str(reference), "--name", "none",
                       "--concat", "8"])
    assert not (run / "eval" / "none").exists()  # refused before anything was decoded
