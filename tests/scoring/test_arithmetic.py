"""One arithmetic per table: runs of two machines (CPU model, kernel set, threads; GPU model; torch;
precision) are refused by every table command — ``nmt test --compare``, a study's ``--table`` —
unless a flag allows the mix, and then the caption lists it. Tiny archives written here."""
from __future__ import annotations

import json

import pytest

from experiment.config import load_config, to_dict
from scoring.arithmetic import arithmetic_note
from scoring.metrics import bootstrap_samples
from studies.archive import migrate_archive
from studies.catalog import load_study
from studies.tables import write_archive_tables
from tests.conftest import ARITHMETIC, ARITHMETIC_NOTE
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run
from utils.errors import UserError

H100 = {"device": "NVIDIA H100 80GB HBM3", "cpu": "Intel(R) Xeon(R) Processor", "cpu_kernels": "AVX512", "threads": 1,
        "packages": {"torch": "2.11.0"}, "precision": "bf16"}


def runs(tmp_path, manifests: dict[tuple[str, int], dict]) -> list:
    """One evaluated run per (scheme, seed), its manifest the given one (``None``: no manifest)."""
    refs = corpus(24, 31)
    indices = bootstrap_samples(len(refs), 20)
    config = to_dict(load_config(None))
    dirs = []
    for i, ((scheme, seed), manifest) in enumerate(manifests.items()):
        folder = tmp_path / f"{scheme}-{seed}"
        write_evaluated_run(folder, config, scheme, seed, degrade(refs, 0.1 + 0.05 * i, i), refs, indices)
        if manifest is None:
            (folder / "manifest.json").unlink()
        else:
            timing = {"started": "2026-11-27T00:00:00+00:00", "train_seconds": 60.0}  # what the cost table reads
            (folder / "manifest.json").write_text(json.dumps({**manifest, **timing}), encoding="utf-8")
        dirs.append(folder)
    return dirs


AMD = {**ARITHMETIC, "cpu": "AMD EPYC"}


@pytest.mark.parametrize("field, other", [
    ("cpu", {**ARITHMETIC, "cpu": "AMD EPYC"}),
    ("kernels", {**ARITHMETIC, "cpu_kernels": "AVX512"}),
    ("threads", {**ARITHMETIC, "threads": 2}),
    ("torch", {**ARITHMETIC, "packages": {"torch": "2.11.0"}}),
    ("precision", {**ARITHMETIC, "precision": "bf16"}),
    ("device", H100),
    ("cpu", {key: value for key, value in ARITHMETIC.items() if key != "cpu"}),  # unrecorded: different
])
def test_each_field_of_the_arithmetic_refuses_a_mix_naming_the_runs_and_the_field(tmp_path, field, other):
    first, second = runs(tmp_path, {("sinusoidal", 1): ARITHMETIC, ("rope", 1): other})
    with pytest.raises(UserError) as err:
        arithmetic_note({"sinusoidal": [first], "rope": [second]})
    message = str(err.value)
    assert message.startswith(f"{first} and {second} ran in different arithmetic ({field}: ")
    assert "\n" not in message and "mixed_arithmetic: true" in message and "--allow-mixed-arithmetic" in message


def test_two_runs_that_both_lack_a_field_are_not_shown_alike(tmp_path):
    # (an old manifest's device name "cpu (x86_64, 1 threads)" would record them: migrated on read)
    bare = {**{key: value for key, value in ARITHMETIC.items() if key != "threads"}, "device": "cpu"}
    first, second = runs(tmp_path, {("sinusoidal", 1): bare, ("sinusoidal", 2): bare})
    with pytest.raises(UserError, match=r"\(threads: recorded by neither manifest, and an unrecorded field counts as different\); "):
        arithmetic_note({"sinusoidal": [first, second]})
    # no manifest at all: a CPU run of unknown model, refused beside a recorded one
    third, fourth = runs(tmp_path / "none", {("sinusoidal", 1): ARITHMETIC, ("rope", 1): None})
    with pytest.raises(UserError, match=r"\(cpu: Test CPU vs not recorded\)"):
        arithmetic_note({"sinusoidal": [third], "rope": [fourth]})


def test_a_run_whose_threads_changed_while_training_is_of_no_one_thread_count(tmp_path):
    """--threads auto re-divided the cores mid-run (manifest ``thread_changes``): the run's floats come from
    two thread counts, so it is refused beside a run of either, its threads named as changed."""
    from scoring.arithmetic import arithmetic_of

    changed = {**ARITHMETIC, "threads": 1, "thread_changes": [{"update": 40, "threads": 1}]}
    first, second = runs(tmp_path, {("sinusoidal", 1): ARITHMETIC, ("rope", 1): changed})
    assert arithmetic_of(second).threads is None and arithmetic_of(first).threads == 1
    assert "threads changed during training" in arithmetic_of(second).describe()
    with pytest.raises(UserError, match=r"ran in different arithmetic \(threads: "):
        arithmetic_note({"sinusoidal": [first], "rope": [second]})


def test_runs_of_two_commits_are_refused_unless_the_study_declares_it_and_then_listed(tmp_path):
    from scoring.arithmetic import allows

    first, second, third = runs(tmp_path, {("sinusoidal", 1): {**H100, "git_commit": "e98339a0c1"},
                                           ("rope", 1): {**H100, "git_commit": "e98339a0c1"},
                                           ("alibi", 1): {**H100, "git_commit": "59c68fb77f"}})
    assert arithmetic_note({"sinusoidal": [first], "rope": [second]}) == (
        "Arithmetic: every run NVIDIA H100 80GB HBM3, torch 2.11.0, bf16. Code: every run at commit e98339a.")
    for allowance in (False, frozenset({"arithmetic"})):  # the arithmetic allowed is not the code allowed
        with pytest.raises(UserError) as err:
            arithmetic_note({"sinusoidal": [first], "rope": [second], "alibi": [third]}, allowance)
        assert str(err.value) == (f"{first} and {third} were trained at different commits (e98339a vs 59c68fb); a "
                                  "table must not mix them unless declared (mixed_code: true in the study file, "
                                  "--allow-mixed-arithmetic for nmt test --compare)")
    assert arithmetic_note({"sinusoidal": [first], "rope": [second], "alibi": [third]}, frozenset({"code"})).endswith(
        "Code mixed, declared for this table: 2 runs at e98339a, 1 run at 59c68fb.")
    assert allows(True, "code") and allows(frozenset({"code"}), "code") and not allows(frozenset({"arithmetic"}), "code")
    # runs that recorded no commit (made by hand) say nothing of it
    bare = runs(tmp_path / "bare", {("sinusoidal", 1): H100})[0]
    assert "Code" not in arithmetic_note({"sinusoidal": [bare]})


def test_gpu_runs_share_the_card_not_the_host(tmp_path):
    other_host = {**H100, "cpu": "AMD EPYC", "cpu_kernels": "AVX2", "threads": 2}
    first, second = runs(tmp_path, {("sinusoidal", 1): H100, ("rope", 1): other_host})
    assert arithmetic_note({"sinusoidal": [first], "rope": [second]}) == (
        "Arithmetic: every run NVIDIA H100 80GB HBM3, torch 2.11.0, bf16.")
    third = runs(tmp_path / "h200", {("alibi", 1): {**H100, "device": "NVIDIA H200"}})[0]
    with pytest.raises(UserError, match=r"\(device: NVIDIA H100 80GB HBM3 vs NVIDIA H200\)"):
        arithmetic_note({"sinusoidal": [first], "alibi": [third]})


def test_compare_refuses_two_machines_unless_allowed_and_then_lists_the_mix(tmp_path, capsys):
    from nmt.evaluate import main

    dirs = runs(tmp_path, {("sinusoidal", 1): ARITHMETIC, ("sinusoidal", 2): AMD, ("rope", 1): AMD, ("rope", 2): AMD})
    with pytest.raises(UserError, match=r"ran in different arithmetic \(cpu: Test CPU vs AMD EPYC\)"):
        main(["--compare", *map(str, dirs)])
    out = tmp_path / "table" / "comparison_test.md"
    with pytest.raises(UserError):
        main(["--compare", *map(str, dirs), "--out", str(out), "--groups"])
    assert not out.parent.exists() or not any(out.parent.iterdir())  # nothing half-written
    main(["--compare", *map(str, dirs), "--out", str(out), "--groups", "--allow-mixed-arithmetic"])
    mix = ("Arithmetic mixed, allowed for this table (a run's unrecorded field counts as different): 3 runs CPU AMD "
           "EPYC, kernels AVX2, 1 thread, torch 2.13.0+cpu, fp32; 1 run CPU Test CPU, kernels AVX2, 1 thread, torch "
           "2.13.0+cpu, fp32. Rows whose seeds ran in different arithmetic: sinusoidal.")
    assert out.read_text(encoding="utf-8").rstrip("\n").endswith(mix)
    assert (out.parent / "groups_test.md").read_text(encoding="utf-8").rstrip("\n").endswith(mix)
    capsys.readouterr()
    # one machine: no flag needed, and the caption says which
    same = runs(tmp_path / "same", {("sinusoidal", 1): ARITHMETIC, ("rope", 1): ARITHMETIC})
    main(["--compare", *map(str, same)])
    assert capsys.readouterr().out.rstrip("\n").endswith(ARITHMETIC_NOTE)


def test_a_study_table_refuses_an_archive_of_two_machines_unless_the_study_allows_it(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    runs(archive, {("sinusoidal", 1): ARITHMETIC, ("rope", 1): AMD})
    migrate_archive(archive)  # to the layout a study archives in
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  positional:\n    name: sinusoidal\n", encoding="utf-8")
    declared = (f"config: {config}\nschemes: [sinusoidal, rope]\nseeds: [1]\nout: {tmp_path / 'out'}\n"
                f"archive: {archive}\nmetrics: [chrf]\n")
    (tmp_path / "mixed.yaml").write_text(declared, encoding="utf-8")
    with pytest.raises(UserError, match=r"rope-1 and \S+sinusoidal-1 ran in different arithmetic \(cpu: AMD EPYC vs Test CPU\)"):
        write_archive_tables(load_study(tmp_path / "mixed.yaml"), studies={})
    assert not (archive / "comparison_test.md").exists()
    study = load_study(tmp_path / "mixed.yaml", ["mixed_arithmetic=true"])
    tables = write_archive_tables(study, studies={})
    table = (archive / "comparison_test.md").read_text(encoding="utf-8")
    assert "Arithmetic mixed, allowed for this table" in table and "1 run CPU AMD EPYC" in table
    assert archive / "groups_test.md" in tables


PINS = {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PINNED = {**ARITHMETIC, "cpu_kernels": "AVX2", "threads": 1, "math_pins": PINS}


def test_pinned_runs_of_two_cpu_models_share_one_arithmetic_and_the_caption_lists_the_cpus(tmp_path):
    first, second, third = runs(tmp_path, {("sinusoidal", 1): {**PINNED, "cpu": "AMD EPYC"},
                                           ("rope", 1): {**PINNED, "cpu": "Intel(R) Xeon(R) Platinum 8480+"},
                                           ("rope", 2): {**PINNED, "cpu": "AMD EPYC"}})
    note = arithmetic_note({"sinusoidal": [first], "rope": [second, third]})
    assert note.startswith("Arithmetic: every run CPU arithmetic pinned (kernels AVX2, MKL_CBWR=AVX2, "
                           "ONEDNN_MAX_CPU_ISA=AVX2), 1 thread, torch ")
    assert "; CPUs: AMD EPYC (2 runs), Intel(R) Xeon(R) Platinum 8480+ (1 run)." in note


@pytest.mark.parametrize("field, other", [
    ("pins", {**PINNED, "math_pins": {"MKL_CBWR": "AVX2"}}),  # oneDNN unpinned: the CPU model counts again
    ("pins", {**PINNED, "math_pins": {**PINS, "MKL_CBWR": "COMPATIBLE"}}),
    ("pins", {**PINNED, "threads": 2}),  # two threads split sums by the machine's scheduling: not pinned
    ("kernels", {**PINNED, "cpu_kernels": "DEFAULT"}),
    ("pins", {**ARITHMETIC, "cpu": "Intel(R) Xeon(R) Platinum 8480+"}),  # an unpinned run of another CPU
])
def test_a_pinned_run_beside_one_pinned_otherwise_or_unpinned_is_refused(tmp_path, field, other):
    first, second = runs(tmp_path, {("sinusoidal", 1): {**PINNED, "cpu": "AMD EPYC"}, ("rope", 1): other})
    with pytest.raises(UserError, match=rf"ran in different arithmetic \({field}: "):
        arithmetic_note({"sinusoidal": [first], "rope": [second]})
