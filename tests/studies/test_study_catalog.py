"""The studies declared as data (studies/<name>.yaml, studies/catalog.py), loaded through the typed
config loader: what a declaration expands to (schemes, rows, inheritance, command-line overrides of
its own keys), one line naming the file and the key for each kind of bad declaration, and every
archive under report/ named by a declared study."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import models.positional
from studies.catalog import ROOT, load_studies, load_study
from utils.errors import ConfigError, UserError

BASE = ROOT / "configs" / "synthetic" / "base.yaml"


def declare(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text.replace("BASE", str(BASE)), encoding="utf-8")
    return path


def test_all_is_the_registry_in_its_order_minus_the_excluded(tmp_path, monkeypatch):
    path = declare(tmp_path, "every", "config: BASE\nschemes: all\nexclude: [xl, rope]\nseeds: [1, 2]\nout: runs/every\n")
    study = load_study(path)
    assert study.schemes == [s for s in models.positional.SCHEMES if s not in ("xl", "rope")]
    assert (study.name, study.seeds, study.out, study.archive, study.base_config) == (
        "every", [1, 2], Path("runs/every"), None, BASE)
    # a scheme registered later is in every "all" study with no other edit
    monkeypatch.setitem(models.positional.SCHEMES, "toy", models.positional.SCHEMES["none"])
    assert load_study(path).schemes[-1] == "toy"


def test_a_declaration_lists_schemes_seeds_archive_and_the_attention_sentence(tmp_path):
    declare(tmp_path, "small", "config: BASE\nschemes: [t5, none]\nseeds: [3]\nout: runs/small\n"
                               "archive: report/small\nattention_text: Le chat dort.\n")
    declare(tmp_path, "other", "config: BASE\nschemes: [rope]\nseeds: [1]\nout: runs/other\n")
    studies = load_studies(tmp_path)
    assert list(studies) == ["other", "small"]
    small = studies["small"]
    assert (small.schemes, small.seeds, small.archive, small.attention_text) == (
        ["t5", "none"], [3], ROOT / "report" / "small", "Le chat dort.")
    assert small.config("t5", 3).model.positional.name == "t5" and small.config("t5", 3).seed == 3


def test_rows_differ_in_config_and_seeds_and_a_study_inherits_another(tmp_path):
    """A labelled row is a scheme with its own overrides (after the study's) and seeds; a study file
    with ``base:`` starts from another's keys, its ``config`` path relative to the file naming it."""
    (tmp_path / "sub").mkdir()
    declare(tmp_path, "parent", "config: BASE\nschemes: [rope, alibi]\nseeds: [1, 2]\nout: runs/p\n"
                                "overrides: [train.max_steps=30]\nmetrics: [chrf]\n")
    path = declare(tmp_path / "sub", "child", "base: ../parent.yaml\nschemes: []\nrows:\n"
                                             "  short: {scheme: shape, overrides: [train.max_steps=10], seeds: [2]}\n"
                                             "  rope: {scheme: rope}\n"
                                             "compare: {rope: [short]}\nout: runs/c\n")
    child = load_study(path)
    assert (child.schemes, child.seeds_of("short"), child.seeds_of("rope"), child.metrics) == (
        ["short", "rope"], [2], [1, 2], ["chrf"])
    cfg = child.config("short", 2)
    assert (cfg.model.positional.name, cfg.train.max_steps, cfg.seed) == ("shape", 10, 2)  # the row's override last
    assert child.config("rope", 1).train.max_steps == 30 and child.base_config == BASE
    assert child.compare == {"rope": ["short"]}
    from studies.runs import queue

    assert queue(child) == [("rope", 1), ("rope", 2), ("short", 2)]  # each row with its own seeds (shape: embeddings, last)


def test_the_report_view_is_the_study_files_own_and_not_inherited(tmp_path):
    """``report:`` says how report.md shows a study; a study built on it with ``base:`` is another
    study and does not show under the same alias (reporting.sources would refuse two of one alias)."""
    from reporting.sources import report_studies

    declare(tmp_path, "parent", "config: BASE\nschemes: [rope]\nseeds: [1]\nout: runs/p\narchive: report/p\n"
                                "report: {alias: parent, test_sets: [test, test_long], caption: 'the grammar',"
                                " called: the parent}\n")
    declare(tmp_path, "child", "base: parent.yaml\nout: runs/c\narchive: report/c\n")
    declare(tmp_path, "own", "base: parent.yaml\nout: runs/o\narchive: report/o\n"
                             "report: {alias: own, test_sets: [test_long], caption: 'its own'}\n")
    studies = load_studies(tmp_path)
    assert studies["child"].report is None
    assert (studies["parent"].report.alias, studies["parent"].report.called) == ("parent", "the parent")
    assert (studies["own"].report.alias, studies["own"].report.test_sets) == ("own", ["test_long"])
    shown = report_studies(studies)
    assert list(shown) == ["own", "parent"]
    assert (shown["parent"].folder, shown["parent"].testsets, shown["parent"].study) == (
        "report/p", ("test", "test_long"), "parent")
    with pytest.raises(UserError, match="studies own and copy both give report.alias 'own'"):
        report_studies({"own": studies["own"], "copy": studies["own"]})


@pytest.mark.parametrize("body, message", [
    ("report: {alias: full2, test_sets: [test], caption: x}", "'report.alias' in"),
    ("report: {alias: full, caption: x}", "'report.test_sets' in"),
    ("report: {alias: full, test_sets: [test]}", "'report.caption' in"),
])
def test_a_bad_report_view_is_one_line(tmp_path, body, message):
    path = declare(tmp_path, "bad", f"config: BASE\nschemes: [rope]\nseeds: [1]\nout: runs/b\narchive: report/b\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_study(path)


def test_a_study_is_built_by_keywords():
    from studies.catalog import Study

    with pytest.raises(TypeError):
        Study("s", BASE, ["rope"], [1], Path("out"))  # the positional form, refused
    assert Study(name="s", base_config=BASE, schemes=["rope"], seeds=[1], out=Path("out")).schemes == ["rope"]


def test_the_command_line_overrides_the_studys_own_keys(tmp_path):
    path = declare(tmp_path, "s", "config: BASE\nschemes: [rope]\nseeds: [1]\nout: runs/s\n"
                                  "executor: {name: slurm, mem_gb: 16}\n")
    study = load_study(path, ["executor.name=submitit-local", "executor.mem_gb=64", "executor.account=lab",
                              "executor.poll_s=2.5"])
    assert (study.executor.name, study.executor.mem_gb, study.executor.account, study.executor.poll_s) == (
        "submitit-local", 64, "lab", 2.5)
    with pytest.raises(ConfigError, match=r"'executor.timeout_min' in the command line must be at least 1, got 0"):
        load_study(path, ["executor.timeout_min=0"])


@pytest.mark.parametrize("body,message", [
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nseed: 2\n", "unknown config key 'seed' in {path}; did you mean 'seeds'"),
    ("config: BASE\nschemes: all\nout: x\n", "{path}: missing key 'seeds'"),
    ("config: BASE\nseeds: [1]\nout: x\n", "{path}: missing key 'schemes' (or 'rows')"),
    ("config: BASE\nschemes: [rope, rotary]\nseeds: [1]\nout: x\n", "'schemes' in {path} must be registered scheme names (unknown: rotary; known: "),
    ("config: BASE\nschemes: all\nexclude: xl\nseeds: [1]\nout: x\n", "'exclude' in {path} must be list of str, got 'xl'"),
    ("config: BASE\nschemes: all\nseeds: [1, true]\nout: x\n", "'seeds[1]' in {path} must be int, got True"),
    ("config: nowhere.yaml\nschemes: all\nseeds: [1]\nout: x\n", "{path}: 'config' names nowhere.yaml, which is not a file"),
    ("- a list\n", "{path}: the top level must be a mapping"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\narchive: r\nranked_against: [a]\n", "'ranked_against' in {path} must be str or NoneType"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nranked_against: other\n",
     "{path}: 'ranked_against' names another study and needs this study's 'archive'"),
    ("config: BASE\nschemes: [rope]\nrows: {rope: {scheme: rope}}\nseeds: [1]\nout: x\n",
     "'rows' in {path} must be labels other than the schemes' names (given twice: rope)"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\neval_variants: {Oracle: {overrides: [decode.beam=1]}}\n",
     "'eval_variants' in {path} must be names of lower-case letters, digits and _ (not Oracle)"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\neval_variants: {o: {overrides: []}}\n",
     "'eval_variants.o.overrides' in {path} must be one or more KEY=VALUE config overrides"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\neval_variants: {o: {overrides: [decode.beam=1], rows: [alibi]}}\n",
     "{path}: 'eval_variants.o' names alibi, not rows of the study (rows: rope)"),
    ("config: BASE\nrows: {a: {scheme: rotary}}\nseeds: [1]\nout: x\n", "'rows.a.scheme' in {path} must be a registered scheme"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\neval_variants: {o: {overrides: [decode.beam=1]}}\n"
     "families: {f: {variants: [yarn], declared: 2026-11-28}}\n",
     "{path}: 'families.f.variants' names 'yarn', not an evaluation variant of the study (eval_variants: o)"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\ncompare: {rope: [t5]}\n", "{path}: 'compare.rope' names t5, not rows of the study"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\nmetrics: [bleurt]\n", "'metrics' in {path} must be metric names"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {name: pbs}\n",
     "'executor.name' in {path} must be one of inline, local, submitit-local, slurm"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {runs_per_job: 0}\n", "'executor.runs_per_job' in {path} must be at least 1"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {mem_gb: 1.5}\n", "'executor.mem_gb' in {path} must be int"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {cpu: 4}\n", "unknown config key 'executor.cpu' in {path}"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {partition: ''}\n", "'executor.partition' in {path} must be a name or null"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: [slurm]\n", "'executor' must be a mapping"),
    ("config: BASE\nschemes: all\nseeds: [1]\nout: x\nexecutor: {timeout_min: 1, signal_delay_s: 120}\n",
     "'executor.signal_delay_s' in {path} must be less than the time limit (timeout_min 1 = 60 s), got 120"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\ntest_sets: {secondary: [t16], declared: 2026-11-29, why: w}\n",
     "'test_sets.primary' in {path} must be a non-empty list of the test splits the confirmatory tests are read on"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\ntest_sets: {primary: [a, b], secondary: [b], declared: 2026-11-29, "
     "why: w}\n", "'test_sets.secondary' in {path} must be splits not also primary (both: b)"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\ntest_sets: {primary: [a], declared: soon, why: w}\n",
     "'test_sets.declared' in {path} must be the date and time (UTC) the test sets were declared"),
    ("config: BASE\nschemes: [rope]\nseeds: [1]\nout: x\ntest_sets: {primary: [a], declared: 2026-11-29}\n",
     "'test_sets.why' in {path} must be a sentence saying why these sets are primary"),
    ("config: [unclosed\n", "{path} line 2: invalid YAML"),
])
def test_a_bad_declaration_is_one_line_naming_the_file_and_the_key(tmp_path, body, message):
    path = declare(tmp_path, "bad", body)
    with pytest.raises(ConfigError) as err:
        load_study(path)
    said = str(err.value)
    # the key's file with its line (FILE:LINE), the line being the key's in the body
    lines = re.findall(rf"{re.escape(str(path))}:(\d+)", said)
    assert all(1 <= int(n) <= body.count("\n") + 1 for n in lines)
    assert message.format(path=path) in re.sub(rf"({re.escape(str(path))}):\d+", r"\1", said) and "\n" not in said


def test_ranked_against_must_name_a_study_with_an_archive(tmp_path):
    declare(tmp_path, "short", "config: BASE\nschemes: all\nseeds: [1]\nout: runs/short\n")
    path = declare(tmp_path, "long", "config: BASE\nschemes: all\nseeds: [1]\nout: x\narchive: r\nranked_against: short\n")
    with pytest.raises(ConfigError, match=r"long.yaml: 'ranked_against' names 'short', which is not a study with an archive"):
        load_studies(tmp_path)
    declare(tmp_path, "short", "config: BASE\nschemes: all\nseeds: [1]\nout: runs/short\narchive: report/short\n")
    assert load_studies(tmp_path)["long"].ranked_against == "short" and load_study(path).ranked_against == "short"


def test_an_interaction_family_names_another_declared_study(tmp_path):
    declare(tmp_path, "short", "config: BASE\nschemes: [sinusoidal, rope]\nseeds: [1]\nout: runs/short\n")
    body = ("config: BASE\nschemes: [sinusoidal, rope]\nseeds: [1]\nout: runs/full\n"
            "families: {budget: {interaction: OTHER, baseline: sinusoidal, rows: all, declared: 2026-11-28T02:40Z}}\n")
    declare(tmp_path, "full", body.replace("OTHER", "short"))
    full = load_studies(tmp_path)["full"]
    assert full.families["budget"].interaction == "short" and full.families["budget"].pairs == (("rope", "sinusoidal"),)
    assert full.own_families() == [] and str(full.families["budget"].declared) == "2026-11-28 02:40:00+00:00"
    assert full.other_studies() == ["short"]
    declare(tmp_path, "full", body.replace("OTHER", "long"))
    with pytest.raises(ConfigError, match=r"full.yaml: 'families.budget.interaction' names 'long', not another "
                                          r"declared study \(studies: full, short\)"):
        load_studies(tmp_path)


def test_a_family_of_variants_tests_each_row_variant_against_its_own_row(tmp_path):
    path = declare(tmp_path, "v", "config: BASE\nschemes: [sinusoidal, rope, alibi]\nseeds: [1]\nout: x\n"
                                  "eval_variants: {o: {overrides: [decode.beam=1]}, y: {overrides: [decode.beam=2], "
                                  "rows: [rope]}}\n"
                                  "families: {just-y: {variants: [y], declared: 2026-11-28}, every: {variants: all, "
                                  "pairs: [rope vs alibi], declared: 2026-11-28T09:30Z}}\n")
    families = load_study(path).families
    assert families["just-y"].pairs == (("rope+y", "rope"),)
    assert families["every"].pairs == (("rope", "alibi"), ("sinusoidal+o", "sinusoidal"), ("rope+o", "rope"),
                                 ("alibi+o", "alibi"), ("rope+y", "rope"))


def test_every_shipped_study_loads_and_each_of_its_runs_and_variants_has_a_config():
    studies = load_studies()
    assert {"demo", "multi30k", "multi30k-extrapolation", "multi30k-best", "iwslt2017"} <= set(studies)
    for study in studies.values():
        assert study.base_config.is_file() and study.schemes and study.seeds
        for label in study.schemes:
            cfg = study.config(label, study.seeds_of(label)[0])
            assert cfg.model.positional.name == study.row(label).scheme
            for variant in study.variants_of(label):  # a setting a row's scheme refuses fails here, not on a GPU
                assert study.variant_config(label, study.seeds_of(label)[0], variant).model.positional.name == (
                    cfg.model.positional.name)


def test_every_archive_under_report_is_a_declared_studys_and_holds_only_its_runs():
    """Each folder of report/ that holds tables or runs (the report's own figures, benchmark and
    readings aside) is the archive of a declared study, and each run archived there is one the study
    declares (a row and one of its seeds): naming the study remakes the archive. A new undeclared
    archive fails here."""
    from studies.runs import label_of

    declared = {study.archive: study for study in load_studies().values() if study.archive is not None}
    report = ROOT / "report"
    archives = {path.parent for path in report.rglob("comparison_*.md")} | {
        path.parent.parent for path in report.rglob("config.yaml")}
    archives -= {report / name for name in ("bench", "figures", "text")}
    assert archives, "no archive found under report/"
    undeclared = sorted(str(a.relative_to(ROOT)) for a in archives if a not in declared)
    assert not undeclared, f"archives no study declares: {undeclared}"
    for archive in archives:
        study = declared[archive]
        expected = {(label if seed == 1 else f"{label}-seed{seed}") + suffix for label in study.schemes
                    for seed in study.seeds_of(label) for suffix in ["", *(f"+{v}" for v in study.variants_of(label))]}
        held = {run.name for run in archive.iterdir() if (run / "config.yaml").is_file()}
        assert held <= expected, f"{archive}: runs its study does not declare: {sorted(held - expected)}"
        for run in held:  # a run's config is the one its study gives it
            import yaml

            config = yaml.safe_load((archive / run / "config.yaml").read_text(encoding="utf-8"))
            label = label_of(archive / run).split("+")[0]  # a variant's decode (<row>+<variant>) is its row's run
            assert config["model"]["positional"]["name"] == study.row(label).scheme


def test_a_study_tests_its_runs_on_the_concatenations_it_declares(tmp_path):
    """``concat: [k, ...]`` adds each split's k-sentence segments to the test sets its runs are scored
    on and its tables made for (``<split>_concat<k>``); a group of one is the split itself, refused."""
    config = tmp_path / "run.yaml"
    config.write_text("seed: 1\n", encoding="utf-8")
    path = tmp_path / "long.yaml"
    path.write_text(f"config: {config}\nschemes: [rope]\nseeds: [1]\nout: out\nconcat: [2, 8, 2]\n", encoding="utf-8")
    study = load_study(path)
    assert study.concat == [2, 8]
    assert study.test_sets(["t16", "t17"]) == ["t16", "t17", "t16_concat2", "t16_concat8", "t17_concat2", "t17_concat8"]
    assert load_study(path, ["concat=[]"]).test_sets(["t16"]) == ["t16"]
    with pytest.raises(ConfigError, match="concat"):
        load_study(path, ["concat=[1]"])
    assert load_study(path, ["buckets=[1-15, 21-]"]).buckets == ["1-15", "21-"]
    with pytest.raises(ConfigError, match="buckets"):
        load_study(path, ["buckets=[long]"])
    declared = load_studies()["multi30k-length"]
    cfg = declared.config("rope", 1)
    assert (cfg.data.max_src_words, cfg.data.max_tgt_words, declared.concat) == (15, 15, [2, 4, 8])
    assert cfg.train.cuda_graphs and cfg.train.static_shapes and declared.device == "cuda"
