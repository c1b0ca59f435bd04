"""inference.py and test.py on the tiny trained runs of conftest.py."""
from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys

import pytest

from nmt import evaluate as test_cli
from tests.conftest import ROOT
from utils.errors import UserError


def cli(script: str, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script, *map(str, args)], cwd=ROOT, input=stdin,
                          capture_output=True, timeout=300)


def test_inference_translates_arguments_and_stdin_in_order(runs):
    """One line per input, in input order, whether the inputs come as arguments or on stdin; a
    blank input line stays a blank output line. The compared calls decode each sentence alone
    (--batch-size 1), so they do the same arithmetic and agree exactly on any CPU (a sentence
    batched with others may round differently). The fixture's model translates (test BLEU ~40 on
    any CPU), so three different sentences give three different, non-empty lines."""
    run = runs["sin1"]
    inputs = ["Je danse.", "Les chats mangent une pomme.", "Il regarde le chien."]
    args = cli("inference.py", "--run", run, "--batch-size", "1", *inputs)
    assert args.returncode == 0, args.stderr.decode()
    outputs = args.stdout.decode().splitlines()
    assert len(outputs) == 3 and all(outputs) and len(set(outputs)) == 3
    backwards = cli("inference.py", "--run", run, "--batch-size", "1", *inputs[::-1])
    assert backwards.stdout.decode().splitlines() == outputs[::-1]
    stdin = (inputs[0] + "\n\n" + inputs[1] + "\n" + inputs[2] + "\n").encode()
    piped = cli("inference.py", "--run", run, "--batch-size", "1", stdin=stdin)
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout.decode().splitlines() == [outputs[0], "", outputs[1], outputs[2]]
    for extra in ([], ["--greedy"]):  # batched (the default batch size), beam or greedy
        batched = cli("inference.py", "--run", run, *extra, *inputs)
        assert batched.returncode == 0 and len(batched.stdout.decode().splitlines()) == 3


def test_a_byte_order_mark_changes_no_translation(runs, tmp_path):
    """A BOM before the first line (what some editors write) is not part of the first sentence,
    whether the text comes on stdin or in a --src file; both engines see the same sentences."""
    text = "Je danse.\nIl regarde le chien.\n"
    plain = cli("inference.py", "--run", runs["sin1"], "--batch-size", "1", stdin=text.encode())
    marked = cli("inference.py", "--run", runs["sin1"], "--batch-size", "1", stdin=("\ufeff" + text).encode())
    assert plain.returncode == marked.returncode == 0 and marked.stdout == plain.stdout
    ref = tmp_path / "ref.en"
    ref.write_text("I dance.\nHe watches the dog.\n", encoding="utf-8")
    for name, prefix in (("plain", ""), ("marked", "\ufeff")):
        (tmp_path / f"{name}.fr").write_text(prefix + text, encoding="utf-8")
        done = cli("test.py", "--run", runs["sin1"], "--src", tmp_path / f"{name}.fr", "--ref", ref)
        assert done.returncode == 0, done.stderr.decode()
    folder = runs["sin1"] / "eval"
    assert (folder / "marked" / "srcs.txt").read_text(encoding="utf-8") == "Je danse.\nIl regarde le chien.\n"
    assert (folder / "marked" / "hyps.txt").read_bytes() == (folder / "plain" / "hyps.txt").read_bytes()
    assert (json.loads((folder / "marked" / "results.json").read_text())["bleu"]
            == json.loads((folder / "plain" / "results.json").read_text())["bleu"])


def test_compare_keeps_a_line_separator_inside_its_sentence(runs, tmp_path):
    """U+2028 inside a hypothesis is text: the files stay aligned (str.splitlines would split it
    and shift every later line)."""
    import shutil

    test_cli.main(["--run", str(runs["sin1"])])
    copy = tmp_path / "sin1"
    shutil.copytree(runs["sin1"], copy, ignore=shutil.ignore_patterns("checkpoints", "logs", "ctranslate2"))
    hyps = copy / "eval" / "test" / "hyps.txt"
    lines = hyps.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3].replace(" ", "\u2028", 1) if " " in lines[3] else lines[3] + "\u2028"
    hyps.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "table.md"
    test_cli.main(["--compare", str(runs["sin1"]), str(copy), "--out", str(out)])
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| sinusoidal (")]
    # both runs read (30 lines each: a shifted file is refused); one seed twice, so a row each
    assert [row.split(" | ")[1] for row in rows] == ["1", "1"]


def test_inference_nbest_prints_scored_lines_best_first(runs):
    result = cli("inference.py", "--run", runs["sin1"], "--nbest", "3", "Il regarde le chien.", "Je danse.")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 6
    scores = [float(line.split("\t")[0]) for line in lines]
    assert scores[:3] == sorted(scores[:3], reverse=True) and scores[3:] == sorted(scores[3:], reverse=True)


def test_inference_errors_and_warnings(runs, tmp_path):
    bad = cli("inference.py", "--run", runs["sin1"], stdin="Je danse.\ncaf\xe9\n".encode("latin-1"))
    assert bad.returncode == 2 and b"line 2 is not valid UTF-8" in bad.stderr and b"Traceback" not in bad.stderr
    long = cli("inference.py", "--run", runs["sin1"], "--greedy", " ".join(["chat"] * 1100))
    assert long.returncode == 0 and b"warning: line 1 has" in long.stderr and b"cut to the first 1023" in long.stderr
    missing = cli("inference.py", "--run", tmp_path / "nope", "x")
    assert missing.returncode == 2 and missing.stderr.decode().startswith("error: run directory not found")
    assert "python -m nmt train --config configs/synthetic/base.yaml --run-dir" in missing.stderr.decode()  # its remedy
    no_ckpt = cli("inference.py", "--run", runs["sin1"], "--checkpoint", "avg", "x")
    said = no_ckpt.stderr.decode()
    assert no_ckpt.returncode == 2 and "checkpoint 'avg' not found" in said and "nmt train --average" in said
    typo = cli("inference.py", "--run", runs["sin1"], "--checkpoint", "bset", "x").stderr.decode()
    assert "use best, last, avg or a .pt path" in typo and "best.pt" in typo and len(typo.strip().splitlines()) == 1


def test_test_py_scores_the_configured_split(runs):
    result = cli("test.py", "--run", runs["sin1"], "--beam", "2")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith("test: BLEU ")
    folder = runs["sin1"] / "eval" / "test"
    results = json.loads((folder / "results.json").read_text())
    for key in ("bleu", "signature", "chrf", "nltk_bleu4", "nltk_tokenization", "seed_char_bleu4", "n_sentences",
                "decode", "seconds", "sentences_per_second", "by_length", "bleu_ci95"):
        assert key in results, key
    assert results["n_sentences"] == 30 and results["decode"]["beam"] == 2
    # the fixture translates: measured BLEU 39-45 under ATEN_CPU_CAPABILITY=default, avx2 and AVX-512
    assert 20 <= results["bleu"] <= 100 and 0 < results["seed_char_bleu4"] <= 1
    assert results["bleu_ci95"][0] <= results["bleu"] <= results["bleu_ci95"][1]
    assert sum(b["n"] for b in results["by_length"]) == 30
    assert len((folder / "hyps.txt").read_text().splitlines()) == 30
    assert "nrefs:1" in results["signature"]


def test_test_py_on_a_file_pair_and_bad_pairs(runs, tmp_path):
    with gzip.open(tmp_path / "mine.fr.gz", "wt", encoding="utf-8") as f:
        f.write("Je danse.\nIl regarde le chien.\n")
    (tmp_path / "mine.en").write_text("I dance.\nHe watches the dog.\n", encoding="utf-8")
    ok = cli("test.py", "--run", runs["sin1"], "--src", tmp_path / "mine.fr.gz", "--ref", tmp_path / "mine.en")
    assert ok.returncode == 0, ok.stderr.decode()
    assert json.loads((runs["sin1"] / "eval" / "mine" / "results.json").read_text())["n_sentences"] == 2
    (tmp_path / "short.en").write_text("I dance.\n", encoding="utf-8")
    bad = cli("test.py", "--run", runs["sin1"], "--src", tmp_path / "mine.fr.gz", "--ref", tmp_path / "short.en")
    assert bad.returncode == 2 and b"line counts differ" in bad.stderr and b"Traceback" not in bad.stderr
    missing = cli("test.py", "--run", tmp_path / "nope")
    assert missing.returncode == 2


def test_compare_folds_seeds_and_tests_significance(runs, tmp_path):
    for name in ("sin1", "sin2", "rope1"):
        test_cli.main(["--run", str(runs[name])])
    out = tmp_path / "table.md"
    test_cli.main(["--compare", *(str(runs[n]) for n in ("sin1", "sin2", "rope1")), "--out", str(out)])
    table = out.read_text()
    lines = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0].startswith("| scheme | seeds | parameters | valid loss | BLEU | BLEU 95% CI")
    assert lines[0].endswith("| p vs sinusoidal | p MC SE | significant |")
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[1:]}
    assert set(rows) == {"sinusoidal", "rope"}
    assert " | 2 | " in rows["sinusoidal"] and "±" in rows["sinusoidal"]  # two seeds folded
    *_, p_value, error, significant = rows["rope"].strip(" |").split(" | ")
    assert 0.0 <= float(p_value) <= 1.0 and 0.0 < float(error) < 0.05  # 1,000 resamples: at most 0.032
    # the two sinusoidal seeds give a seed spread, so the verdict weighs training noise too: the
    # baseline's own spread, since it has several seeds (no pooled spread is used, nor named)
    assert significant in ("yes", "no", "yes (borderline)", "no (borderline)") and "the seed spread is the larger seed std of the two rows." in table
    assert "pooled" not in table
    assert "signature" in table and "nrefs:1" in table
    with open(out.with_suffix(".csv"), newline="") as f:
        assert len(list(csv.reader(f))) == 3
    with pytest.raises(UserError, match="no results for test set 'nope'"):
        test_cli.main(["--compare", str(runs["sin1"]), "--testset", "nope"])
    # --metrics chooses the metric columns, in its order; an unknown name is argparse's one line
    test_cli.main(["--compare", *(str(runs[n]) for n in ("sin1", "rope1")), "--out", str(out), "--metrics", "ter", "chrf++"])
    assert "| BLEU 95% CI | TER | chrF++ | p vs sinusoidal | p MC SE |" in out.read_text()
    with pytest.raises(SystemExit) as stop:
        test_cli.main(["--compare", str(runs["sin1"]), "--metrics", "meteor"])
    assert stop.value.code == 2


def test_a_reader_that_stops_early_ends_the_command_quietly():
    """`inference.py ... | head -1`: the closed pipe is not a traceback, and the exit code is 0."""
    code = ("from utils.cli import run_main\n"
            "def main():\n"
            "    for i in range(200000):\n"
            "        print('line', i)\n"
            "run_main(main)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "line 0\n"
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == ""



def test_translate_warns_once_about_inputs_it_was_not_trained_for_and_quiet_silences_it(runs):
    """The fixture trains on 3-6 word sentences: a 40-word line is past its longest training source, a
    line in another script is mostly unknown pieces; each is said once on stderr, the translations
    still come, one line each; --quiet leaves stderr empty."""
    long_line = " ".join(["Le chat regarde le chien."] * 8)
    inputs = ["Je danse.", long_line, "مرحبا بالعالم", long_line, "Привет мир"]
    proc = cli("inference.py", "--run", runs["sin1"], *inputs)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.decode().splitlines()) == 5
    warnings = [line for line in proc.stderr.decode().splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("warning: line 2 has ") and "more than the longest training source" in warnings[0]
    assert warnings[1].startswith("warning: line 3: 2 of its 2 words hold pieces the tokenizer does not know")
    quiet = cli("inference.py", "--run", runs["sin1"], "--quiet", *inputs)
    assert quiet.returncode == 0 and quiet.stderr.decode() == ""
    assert quiet.stdout.decode() == proc.stdout.decode()
