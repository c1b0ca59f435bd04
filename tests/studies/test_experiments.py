"""The study driver (make demo / make reproduce-*): train, test, archive, compare, draw, resume."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studies.catalog import Study
from studies.driver import STUDIES, run_study
from studies.runs import declared_order, queue, run_dir_of
from studies.runs import finished as run_finished
from studies.tables import archived_runs, write_archive_tables
from tests.conftest import ROOT, TINY
from utils.errors import ConfigError, UserError


def make_study(tmp_path) -> Study:
    # One base config: each scheme's run is it with model.positional.name=<scheme> (no per-scheme files).
    base = tmp_path / "configs" / "base.yaml"
    base.parent.mkdir()
    base.write_text(TINY.format(root=ROOT, cache=tmp_path / "cache"), encoding="utf-8")
    return Study(name="tiny", base_config=base, schemes=["sinusoidal", "alibi"], seeds=[1], out=tmp_path / "runs",
                 overrides=["train.max_steps=20", "train.eval_every=10"], attention_text="Je la vois.",
                 archive=tmp_path / "archive")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Study, str]:
    """A two-scheme study run once (20 updates per scheme) and what it printed."""
    import contextlib
    import io

    study = make_study(tmp_path_factory.mktemp("study"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_study(study)
    return study, printed.getvalue()


def test_study_trains_archives_compares_and_draws(finished):
    study, out = finished
    for scheme in ("sinusoidal", "alibi"):
        archived = study.archive / scheme
        assert {p.name for p in archived.iterdir()} == {"config.yaml", "manifest.json", "metrics.jsonl", "eval"}
        results = json.loads((archived / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
        assert results["scheme"] == scheme and results["n_sentences"] == 30
        assert not (archived / "checkpoints").exists()  # only small files are archived
    for table in (study.out / "comparison_test.md", study.archive / "comparison_test.md"):
        rows = [line for line in table.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
        assert {row.split(" | ")[0].strip("| ") for row in rows[2:]} == {"sinusoidal", "alibi"}
    pictures = study.out / "pictures"
    assert any(pictures.glob("*curves*.png")) and any(pictures.glob("attention_*/*.png"))
    assert str(study.archive / "comparison_test.md") in out
    # the explorer page: both schemes' attention on the test set's first sources, the table, the pictures
    page = (study.out / "index.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))
    assert [run["scheme"] for run in data["runs"]] == ["sinusoidal", "alibi"]
    sources = (study.out / "sinusoidal" / "eval" / "test" / "srcs.txt").read_text(encoding="utf-8").splitlines()
    assert data["sources"] == sources[:20]
    assert [t["testset"] for t in data["tables"]] == ["test"]
    assert {row[0] for row in data["tables"][0]["rows"]} == {"sinusoidal", "alibi"}
    assert len(data["pictures"]) == 2 and all(p["src"].startswith("data:image/png;base64,") for p in data["pictures"])
    assert "[tiny] 2 runs: 2 trained, 0 kept (finished earlier), 0 failed\n" in out


def test_a_study_without_its_tail_archives_the_runs_and_writes_no_table(tmp_path, capsys):
    # --no-tail (a lent GPU's short call): trained, tested, archived; the tables come later from --table.
    study = make_study(tmp_path)
    study = Study(name=study.name, base_config=study.base_config, schemes=["sinusoidal"], seeds=[1], out=study.out, overrides=study.overrides,
                  archive=study.archive)
    run_study(study, tail=False)
    assert "no tables, pictures or page written (--no-tail)" in capsys.readouterr().out
    assert (study.archive / "sinusoidal" / "eval" / "test" / "results.json").is_file()
    written = [p.name for p in [*study.out.iterdir(), *study.archive.iterdir()] if p.is_file()]
    assert not [name for name in written if name.endswith(".md") or name.endswith(".html")], written
    assert not (study.out / "pictures").exists()
    assert study.archive / "comparison_test.md" in write_archive_tables(study)


def test_a_study_of_joined_sentences_archives_bleu_against_k_and_its_figure(tmp_path):
    """``concat: [2]``: the runs are tested on 2-sentence inputs too, and --table writes each row's
    BLEU (mean over seeds), its interval and length ratio at k = 1 and 2 (recomputed here with
    sacrebleu from the archived hypotheses) beside a figure with a panel per kind of scheme."""
    import dataclasses

    import numpy as np
    import sacrebleu

    from tests.scoring.test_statistics import two_level

    study = dataclasses.replace(make_study(tmp_path), concat=[2])
    run_study(study, tail=False)
    made = write_archive_tables(study)
    table, figure = study.archive / "joined_test.csv", study.archive / "joined_test.png"
    assert table in made and figure in made and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = table.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "scheme,k,segments,seeds,bleu,low,high,length_ratio,bleu_without_bp,seed_bleus"
    for scheme in ("alibi", "sinusoidal"):
        for k, name in ((1, "test"), (2, "test_concat2")):
            folder = study.out / scheme / "eval" / name  # the run's own files; the archive keeps hyps.txt.gz
            hyps, refs = (folder / "hyps.txt").read_text(encoding="utf-8").splitlines(), \
                (folder / "refs.txt").read_text(encoding="utf-8").splitlines()
            assert (study.archive / scheme / "eval" / name / "hyps.txt.gz").is_file()
            assert len(refs) == 30 // k
            score = sacrebleu.metrics.BLEU().corpus_score(hyps, [refs])
            drawn = two_level([hyps], refs, np.random.default_rng(12345).integers(0, len(refs), (1000, len(refs))), 0)
            with np.errstate(divide="ignore"):  # a zero precision: log -inf, BLEU without BP 0
                nobp = 100 * np.exp(np.mean(np.log(np.array(score.precisions) / 100)))  # sacreBLEU's precisions alone
            assert f"{scheme},{k},{len(refs)},1,{score.score:.2f},{np.percentile(drawn, 2.5):.2f}," \
                   f"{np.percentile(drawn, 97.5):.2f},{score.sys_len / score.ref_len:.3f},{nobp:.2f}," \
                   f"{score.score:.2f}" in lines


def test_a_second_start_keeps_finished_runs(finished, capsys):
    study, _ = finished
    kept = [study.out / "sinusoidal" / "checkpoints" / "best.pt",
            study.out / "sinusoidal" / "eval" / "test" / "results.json"]
    mtimes = [p.stat().st_mtime_ns for p in kept]
    run_study(study)
    out = capsys.readouterr().out
    assert "finished earlier, kept" in out and "[tiny] 2 runs: 0 trained, 2 kept (finished earlier), 0 failed\n" in out
    assert [p.stat().st_mtime_ns for p in kept] == mtimes  # neither trained nor tested again


def test_archive_alone_regenerates_the_table(finished, tmp_path):
    study, _ = finished
    # A copy of the archive without the run directories or checkpoints: the archive is all there is.
    alone = Study(name="alone", base_config=study.base_config, schemes=study.schemes, seeds=study.seeds, out=tmp_path / "no-runs",
                  archive=tmp_path / "archive")
    shutil.copytree(study.archive, alone.archive)
    (alone.archive / "comparison_test.md").unlink()
    assert [d.name for d in archived_runs(alone)] == ["alibi", "sinusoidal"]
    # every file written, each table's CSV beside it, in the order made: the test set's tables, then the cost
    assert write_archive_tables(alone) == [alone.archive / name for name in (
        "comparison_test.md", "comparison_test.csv", "groups_test.md", "groups_test.csv", "cost.md", "cost.csv")]
    before = (study.archive / "comparison_test.md").read_text(encoding="utf-8")
    assert (alone.archive / "comparison_test.md").read_text(encoding="utf-8") == before


def test_a_study_ranked_against_another_sets_the_two_orders_side_by_side(finished, tmp_path, capsys):
    study, _ = finished
    short = Study(name="short", base_config=study.base_config, schemes=study.schemes, seeds=study.seeds,
                  out=tmp_path / "a", archive=tmp_path / "short")
    long = Study(name="long", base_config=study.base_config, schemes=study.schemes, seeds=study.seeds, out=tmp_path / "b", archive=tmp_path / "long",
                 ranked_against="short")
    for target, bleus in ((short.archive, {"sinusoidal": 10.0, "alibi": 20.0}),
                          (long.archive, {"sinusoidal": 30.0, "alibi": 25.0})):
        shutil.copytree(study.archive, target)
        for scheme, bleu in bleus.items():  # the orders disagree: alibi first after the short budget only
            results = target / scheme / "eval" / "test" / "results.json"
            results.write_text(json.dumps({**json.loads(results.read_text(encoding="utf-8")), "bleu": bleu}),
                               encoding="utf-8")
    made = write_archive_tables(long, {"short": short, "long": long})
    tables = [path for path in made if path.suffix != ".csv"]  # each table's CSV is written beside it
    assert tables == [long.archive / "comparison_test.md", long.archive / "groups_test.md",
                      long.archive / "ranking_vs_short_test.md", long.archive / "ranking_vs_short_test.png",
                      long.archive / "cost.md"]
    assert set(made) - set(tables) == {t.with_suffix(".csv") for t in tables if t.name.startswith(("comparison", "groups", "cost"))}
    picture = tables[3].read_bytes()
    assert picture.startswith(b"\x89PNG") and len(picture) > 5_000
    ranking = tables[2].read_text(encoding="utf-8")
    assert "| rank (short, 20 updates) | BLEU (short, 20 updates) |" in ranking
    assert "| alibi | 1 | 20.00 | +10.00 | 2 | 25.00 | -5.00 | -15.00 |" in ranking
    assert "of these 2 schemes: -1.000, two-sided p = 1 (exact" in ranking
    # an absent optional input is skipped in one line, the rest written
    shutil.rmtree(short.archive)
    capsys.readouterr()
    assert "ranking_vs_short_test.md" not in [t.name for t in write_archive_tables(long, {"short": short, "long": long})]
    assert f"[long] skipped the ranking against 'short': no archived runs under {short.archive}" in capsys.readouterr().out
    assert write_archive_tables(long, {"long": long})[-2:] == [long.archive / "cost.md", long.archive / "cost.csv"]


def test_an_archive_with_several_seeds_sets_its_first_seeds_order_beside_all_seeds(finished, tmp_path):
    """What a single-seed table claimed, against what the seeds say: seed 1 put sinusoidal first,
    the mean over two seeds puts alibi first."""
    study, _ = finished
    seeded = Study(name="seeded", base_config=study.base_config, schemes=study.schemes, seeds=[1, 2],
                   out=tmp_path / "runs", archive=tmp_path / "archive")
    bleus = {("sinusoidal", 1): 20.0, ("alibi", 1): 10.0, ("sinusoidal", 2): 10.0, ("alibi", 2): 30.0}
    shutil.copytree(study.archive / "testsets", seeded.archive / "testsets")  # the runs' test sets come with them
    for (scheme, seed), bleu in bleus.items():
        run = seeded.archive / (scheme if seed == 1 else f"{scheme}-seed{seed}")
        shutil.copytree(study.archive / scheme, run)
        config = (run / "config.yaml").read_text(encoding="utf-8")
        assert config.startswith("seed: 1\n")
        (run / "config.yaml").write_text(f"seed: {seed}\n" + config.split("\n", 1)[1], encoding="utf-8")
        results = run / "eval" / "test" / "results.json"
        results.write_text(json.dumps({**json.loads(results.read_text(encoding="utf-8")), "bleu": bleu}),
                           encoding="utf-8")
    tables = [path for path in write_archive_tables(seeded) if path.suffix != ".csv"]  # each CSV beside its table
    assert tables == [seeded.archive / "comparison_test.md", seeded.archive / "groups_test.md",
                      seeded.archive / "comparison_seed1_test.md", seeded.archive / "ranking_seed1_vs_all_test.md",
                      seeded.archive / "cost.md"]
    def rows(path: Path) -> list[list[str]]:
        return [line.split(" | ")[:2] for line in path.read_text(encoding="utf-8").splitlines()[2:4]]

    assert rows(tables[0]) == [["| alibi", "2"], ["| sinusoidal", "2"]]  # means 20 and 15
    assert rows(tables[1]) == [["| alibi", "2"], ["| sinusoidal", "2"]]  # the groups: same order, best first
    assert rows(tables[2]) == [["| sinusoidal", "1"], ["| alibi", "1"]]  # seed 1: 20 and 10
    ranking = tables[3].read_text(encoding="utf-8")
    assert "| rank (seed 1 alone) | BLEU (seed 1 alone) | vs sinusoidal | rank (mean over all seeds) |" in ranking
    assert "| alibi | 2 | 10.00 | -10.00 | 1 | 20.00 | +5.00 | +15.00 |" in ranking
    assert "of these 2 schemes: -1.000" in ranking


def test_empty_archive_is_a_clear_error(tmp_path):
    """An archive with no runs names the command that fills it; a study with no archive at all says
    --table has nothing to remake and where the study writes its own tables."""
    from dataclasses import replace

    study = make_study(tmp_path)
    with pytest.raises(UserError, match=rf"no archived runs under .*: `python -m nmt study {study.name}` trains them"):
        write_archive_tables(study)
    with pytest.raises(UserError, match=rf"the '{study.name}' study keeps no archive for --table to remake: "
                                        rf"`python -m nmt study {study.name}` trains its runs and writes its tables"):
        write_archive_tables(replace(study, archive=None))


def test_a_run_left_with_another_config_is_refused_not_continued(finished, tmp_path):
    study, _ = finished
    changed = Study(name=study.name, base_config=study.base_config, schemes=["alibi"], seeds=study.seeds, out=study.out,
                    overrides=["train.max_steps=25", "train.eval_every=10"], archive=tmp_path / "archive")
    with pytest.raises(UserError, match=r"alibi was trained with another config .* move or delete"):
        run_study(changed)
    assert not (tmp_path / "archive").exists()


def test_changed_decoding_re_evaluates_without_retraining_and_tables_never_mix_decodings(finished, tmp_path):
    study, _ = finished
    out = tmp_path / "runs"
    shutil.copytree(study.out / "alibi", out / "alibi")
    best = out / "alibi" / "checkpoints" / "best.pt"
    trained = best.stat().st_mtime_ns
    results = out / "alibi" / "eval" / "test" / "results.json"
    assert json.loads(results.read_text(encoding="utf-8"))["decode"]["stopping"] == "exact"  # the default
    first_k = Study(name=study.name, base_config=study.base_config, schemes=["alibi"], seeds=study.seeds, out=out,
                    overrides=[*study.overrides, "decode.stopping=first_k"], archive=tmp_path / "archive")
    run_study(first_k)
    assert best.stat().st_mtime_ns == trained  # the recipe is unchanged: not trained again
    assert json.loads(results.read_text(encoding="utf-8"))["decode"]["stopping"] == "first_k"  # re-evaluated
    shutil.copytree(study.archive / "sinusoidal", first_k.archive / "sinusoidal")  # decoded with "exact"
    with pytest.raises(UserError, match=r'decoded differently on .test.*"stopping": "exact"'):
        write_archive_tables(first_k)


def test_command_line_overrides_are_not_archived(monkeypatch, capsys):
    import nmt.study as cli
    from studies.driver import STUDIES

    started = []
    monkeypatch.setattr(cli, "run_study", lambda study, device="cpu", parallel=1, tail=True: started.append(study))
    cli.main(["multi30k", "--out", "runs/variant", "train.max_steps=5"])
    cli.main(["multi30k", "--schemes", "rope"])
    variant, plain = started
    assert variant.archive is None and variant.overrides == ["train.max_steps=5"]
    assert "not archived" in capsys.readouterr().out
    # The study's own settings are untouched by a variant started earlier in the same process.
    assert plain.archive == STUDIES["multi30k"].archive is not None
    assert plain.overrides == [] and plain.schemes == ["rope"]
    # the study's own keys: where it runs keeps the archive, what its runs train does not
    cli.main(["multi30k", "study.executor.name=inline", "study.executor.poll_s=2", "--executor", "submitit-local"])
    cli.main(["multi30k", "study.overrides=[train.max_steps=5]"])
    elsewhere, retrained = started[2:]
    assert elsewhere.archive == plain.archive and elsewhere.executor.name == "submitit-local"
    assert elsewhere.executor.poll_s == 2.0 and elsewhere.overrides == []
    assert retrained.archive is None and retrained.overrides == ["train.max_steps=5"]
    cli.main(["multi30k", "--device", "cpu:0"])  # the study's own kind of device: archived
    assert started[-1].archive == plain.archive
    monkeypatch.setattr(cli, "resolve_device", lambda name: None)  # as on a machine with a GPU
    cli.main(["multi30k", "--device", "cuda"])  # another arithmetic (bf16 under train.amp: auto): not archived
    assert started[-1].archive is None and "--device cuda given" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="unknown config key 'executor.mem' in the command line; did you mean 'mem_gb'"):
        cli.main(["multi30k", "study.executor.mem=4"])


def test_the_tail_is_written_once_per_change_of_the_runs(finished, capsys):
    """A study re-run with nothing new (or a second command watching it) keeps the tables, pictures
    and page it wrote; a re-evaluated run writes them again."""
    study, _ = finished
    page = study.out / "index.html"
    written = page.stat().st_mtime_ns
    run_study(study)
    assert "are those of these 2 runs already: kept" in capsys.readouterr().out
    assert page.stat().st_mtime_ns == written
    record = study.out / "alibi" / "eval" / "test" / "results.json"
    os.utime(record)  # as a new evaluation would
    run_study(study)
    assert "already: kept" not in capsys.readouterr().out and page.stat().st_mtime_ns > written


def test_a_picture_that_cannot_be_drawn_is_one_line_and_the_study_ends_well(finished, tmp_path, monkeypatch, capsys):
    import studies.driver as driver

    study, _ = finished
    copy = Study(name=study.name, base_config=study.base_config, schemes=study.schemes, seeds=study.seeds,
                 out=tmp_path / "runs", overrides=study.overrides,
                 attention_text=study.attention_text, archive=tmp_path / "archive")
    for scheme in study.schemes:
        shutil.copytree(study.out / scheme, copy.out / scheme)

    def no_maps(*args, **kwargs):
        raise ValueError("no attention to draw")

    monkeypatch.setattr(driver, "best_run_maps", no_maps)
    run_study(copy)
    out = capsys.readouterr().out
    assert "[tiny] skipped the attention maps of " in out and ": no attention to draw" in out
    assert (copy.out / "index.html").is_file() and (copy.archive / "comparison_test.md").is_file()
    assert "done in" in out


def test_the_queue_gives_every_scheme_its_first_seed_before_any_second(tmp_path):
    study = Study(name="q", base_config=tmp_path / "base.yaml", schemes=["rope", "t5", "none"], seeds=[1, 2, 3], out=tmp_path)
    assert queue(study) == [("rope", 1), ("t5", 1), ("none", 1), ("rope", 2), ("t5", 2), ("none", 2),
                            ("rope", 3), ("t5", 3), ("none", 3)]
    # within a round, the schemes acting inside attention first (stable otherwise)
    mixed = Study(name="q", base_config=tmp_path / "base.yaml", schemes=["sinusoidal", "deberta", "shape", "rope"], seeds=[1], out=tmp_path)
    assert queue(mixed) == [("deberta", 1), ("rope", 1), ("sinusoidal", 1), ("shape", 1)]
    trained = [run_dir_of(mixed, scheme, seed) for scheme, seed in queue(mixed)]
    assert declared_order(mixed, trained) == [run_dir_of(mixed, s, 1) for s in mixed.schemes]


def test_the_multi30k_table_covers_every_registered_scheme():
    from models.positional import SCHEMES

    assert sorted(STUDIES["multi30k"].schemes) == sorted(SCHEMES)


def test_the_demo_names_one_scheme_of_every_family_at_least():
    """The demo keeps to its ten minutes by naming its schemes: it still shows every way a scheme
    acts (embeddings, q and k, a logit bias, values, a bias from the layer input, a base re-read at
    random positions), each read off the registered classes."""
    from models.positional import SCHEMES, PositionalEncoding, where_it_acts

    demo = STUDIES["demo"].schemes
    assert set(demo) <= set(SCHEMES) and len(demo) == len(set(demo))
    places = {where_it_acts(SCHEMES[name]) for name in demo}
    assert {"—", "embeddings", "q, k", "logits", "logits + values", "the base's"} <= places
    assert any(SCHEMES[name].token_state is not PositionalEncoding.token_state for name in demo)  # gates


def test_run_names_depend_on_the_seed_alone(tmp_path):
    one = make_study(tmp_path)
    three = Study(name=one.name, base_config=one.base_config, schemes=one.schemes, seeds=[1, 2, 3], out=one.out)
    assert run_dir_of(one, "rope", 1).name == run_dir_of(three, "rope", 1).name == "rope"
    assert [run_dir_of(three, "rope", s).name for s in three.seeds] == ["rope", "rope-seed2", "rope-seed3"]


def test_parallel_runs_keep_separate_logs_and_train_as_the_serial_ones(finished, tmp_path, capsys):
    study, _ = finished
    parallel = Study(name=study.name, base_config=study.base_config, schemes=study.schemes, seeds=study.seeds, out=tmp_path / "runs",
                     overrides=study.overrides, attention_text=study.attention_text, archive=tmp_path / "archive")
    run_study(parallel, parallel=2)
    # the progress (stderr, not a terminal here): a line as each run finishes, with the share of the updates
    progress = [line for line in capsys.readouterr().err.splitlines() if " runs done, " in line]
    assert [line.split(" runs done")[0] for line in progress[-2:]] == [f"[{study.name}] 1/2", f"[{study.name}] 2/2"]
    assert "100% of the updates" in progress[-1]
    for scheme, other in (("sinusoidal", "alibi"), ("alibi", "sinusoidal")):
        log = (parallel.out / "logs" / f"{scheme}.log").read_text(encoding="utf-8")
        assert str(parallel.out / scheme) in log and str(parallel.out / other) not in log

        def curve(run: Path) -> list[float]:
            return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
                    if json.loads(line)["kind"] == "train"]

        # same config and seed: the same loss curve whichever process arrangement trained it
        assert curve(parallel.out / scheme) == pytest.approx(curve(study.out / scheme), rel=1e-5)
        assert (parallel.archive / scheme / "eval" / "test" / "results.json").is_file()
    # the tail's pictures and page records were made by the workers: the same outputs as the serial study's
    def outputs(out: Path) -> set[str]:
        return {str(p.relative_to(out)) for p in (out / "pictures").rglob("*") if p.is_file()}

    assert outputs(parallel.out) == outputs(study.out) and any((parallel.out / "pictures" / "pe").glob("*.png"))

    def page(out: Path) -> dict:
        return json.loads(re.search(r'id="data">(.*?)</script>', (out / "index.html").read_text(encoding="utf-8"),
                                    re.S).group(1))

    serial, workers = page(study.out), page(parallel.out)
    assert [r["scheme"] for r in workers["runs"]] == [r["scheme"] for r in serial["runs"]] == study.schemes
    assert workers["sources"] == serial["sources"] and len(workers["pictures"]) == len(serial["pictures"]) == 2
    assert [len(r["sentences"]) for r in workers["runs"]] == [len(serial["sources"])] * 2
    assert [t["columns"] for t in workers["tables"]] == [t["columns"] for t in serial["tables"]]


def test_the_inline_pool_hands_back_results_and_errors_as_futures():
    from studies.workers import InlinePool

    pool = InlinePool()
    assert pool.submit(divmod, 7, 2).result() == (3, 1)
    failed = pool.submit(divmod, 1, 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()


def test_a_run_stopped_by_a_signal_is_not_kept_as_finished(finished, tmp_path):
    study, _ = finished
    run_dir = study.out / "sinusoidal"
    assert run_finished(run_dir)
    copy = tmp_path / "stopped"
    shutil.copytree(run_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["stopped_by"] = "SIGTERM"  # what train.py writes when a signal ends training early
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert not run_finished(copy)


def test_a_failed_parallel_run_is_named_with_its_log_and_the_others_finish(finished, tmp_path):
    study, _ = finished
    broken = Study(name=study.name, base_config=study.base_config, schemes=["sinusoidal", "alibi"], seeds=study.seeds, out=tmp_path / "runs",
                   overrides=study.overrides, archive=None)
    (broken.out / "alibi").mkdir(parents=True)
    (broken.out / "alibi" / "config.yaml").write_text("model: [not, a, mapping]\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"1 of 2 runs failed: .*alibi failed .*see .*logs/alibi\.log"):
        run_study(broken, parallel=2)
    assert run_finished(broken.out / "sinusoidal")


def test_an_interrupted_run_is_neither_tested_nor_archived(tmp_path, monkeypatch):
    import studies.runs as runs
    from training.loop import TrainResult

    study = make_study(tmp_path)
    monkeypatch.setattr(runs, "train", lambda cfg, run_dir, **kw: TrainResult(run_dir, 7, None, "SIGTERM"))
    first = queue(study)[0][0]  # the study stops at its first run
    with pytest.raises(UserError, match=rf"{first}: training stopped by SIGTERM at update 7; start the study again"):
        run_study(study)
    assert not (study.out / first / "eval").exists() and not study.archive.exists()


STOPPED_SCHEMES = ["sinusoidal", "alibi", "rope"]
STOPPED_STUDY = f"""
import sys
from pathlib import Path
from studies.catalog import Study
from studies.driver import run_study
from utils.cli import run_main
study = Study(name="tiny", base_config=Path(sys.argv[1]), schemes={STOPPED_SCHEMES!r}, seeds=[1], out=Path(sys.argv[2]),
              overrides=["train.max_steps=100000", "train.eval_every=100000"], attention_text="Je la vois.")
run_main(lambda: run_study(study, parallel=2))
"""
# the two runs that train first (queue order) and the one that never starts
STOPPED_QUEUE = [scheme for scheme, _ in queue(Study(name="tiny", base_config=Path("base.yaml"), schemes=STOPPED_SCHEMES,
                                                     seeds=[1], out=Path("out")))]
TRAINING, NEVER_STARTED = STOPPED_QUEUE[:2], STOPPED_QUEUE[2]


def _workers(pid: int) -> list[int]:
    """The study's live worker processes (spawned Python children)."""
    try:
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        return [p for p in children if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
    except FileNotFoundError:  # the study (or a child) has just ended: the callers then check why
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _stoppable_study(tmp_path):
    """A three-run study, two runs at a time, in its own session (as a terminal's job); yields
    (study, process, the worker pids the test saw) and kills whatever is left afterwards."""
    study = make_study(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_STUDY, str(study.base_config), str(study.out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: set[int] = set()
    try:
        yield study, proc, seen
    finally:
        for pid in [proc.pid, *seen]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _wait_for_training(study: Study, proc) -> list[int]:
    """Wait until both workers train; their pids."""
    logs = [study.out / "logs" / f"{scheme}.log" for scheme in TRAINING]
    deadline = time.monotonic() + 120
    while not all(log.is_file() and "training from update" in log.read_text() for log in logs):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    workers = _workers(proc.pid)
    assert len(workers) == 2
    return workers


def _assert_stopped_resumable(study: Study, signame: str) -> None:
    for scheme in TRAINING:  # each stopped after an update and can be resumed
        manifest = json.loads((study.out / scheme / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["stopped_by"] == signame
        assert (study.out / scheme / "checkpoints" / "last.pt").is_file() and not run_finished(study.out / scheme)
    assert not (study.out / NEVER_STARTED).exists()  # never started


def _stop_line(signum: int, stopped: int, not_started: int) -> str:
    return (f"error: stopped by {signal.Signals(signum).name}: 0 of 3 runs finished, {stopped} stopped or failed "
            f"(see their logs; a stopped run saved its last.pt), {not_started} not started; start the study "
            "again to continue")


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["kill-SIGTERM", "terminal-Ctrl-C"])
def test_a_signalled_parallel_study_stops_its_workers_and_leaves_resumable_runs(tmp_path, signum, to_group):
    """`kill` signals the study alone: before, it died and its workers trained on, orphaned. A
    terminal's Ctrl-C signals the study's process group: each worker must get it once (a second
    signal stops a training at once, without its checkpoint)."""
    with _stoppable_study(tmp_path) as (study, proc, seen):
        workers = _wait_for_training(study, proc)
        seen.update(workers)
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signum
        assert err.strip().splitlines()[-1] == _stop_line(signum, stopped=2, not_started=1)
        time.sleep(1)
        assert not [pid for pid in workers if _alive(pid)]  # no worker trains on
        _assert_stopped_resumable(study, signal.Signals(signum).name)


def test_a_ctrl_c_while_the_workers_start_reaches_each_once_and_starts_nothing(tmp_path):
    """Ctrl-C in the second a worker spends starting, still in the terminal's process group:
    before, it got the signal from the terminal (its default handler: KeyboardInterrupt in the
    middle of its imports, the pool broken, runs counted as failed) on top of the study's."""
    with _stoppable_study(tmp_path) as (study, proc, seen):
        deadline = time.monotonic() + 120
        while len(_workers(proc.pid)) < 2:  # spawned, still importing
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        seen.update(_workers(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGINT, err
        assert err.strip().splitlines()[-1] == _stop_line(signal.SIGINT, stopped=0, not_started=3), err
        assert "Traceback" not in err
        time.sleep(1)
        assert not [pid for pid in seen if _alive(pid)]
        assert not [scheme for scheme in ("sinusoidal", "alibi", "rope") if (study.out / scheme).exists()]


def test_workers_of_a_killed_study_stop_their_training_and_exit(tmp_path):
    """SIGKILL cannot be passed on: before, the workers of a killed study trained on for hours,
    orphaned. Each must notice, stop after its current update with last.pt saved, and exit."""
    with _stoppable_study(tmp_path) as (study, proc, seen):
        workers = _wait_for_training(study, proc)
        seen.update(workers)
        proc.kill()
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 60
        while [pid for pid in workers if _alive(pid)]:
            assert time.monotonic() < deadline, "a worker of the killed study is still running"
            time.sleep(0.2)
        _assert_stopped_resumable(study, "SIGTERM")


TAIL_STUDY = """
import sys
from pathlib import Path
from studies.catalog import Study
from studies.driver import run_study
from utils.cli import run_main
study = Study(name="tiny", base_config=Path(sys.argv[1]), schemes=sys.argv[3:], seeds=[1], out=Path(sys.argv[2]),
              overrides=["train.max_steps=20", "train.eval_every=10"], attention_text="Je la vois.")
run_main(lambda: run_study(study, parallel=2))
"""


def test_a_stop_signal_ends_the_tables_of_a_parallel_studys_tail_at_once(finished, tmp_path, monkeypatch):
    """The tail's tables are the study's own work: a stop signal while one is computed ends it there
    (a lent GPU's time limit once waited minutes on them), not after the last table."""
    from studies import table_kinds

    study, _ = finished
    out = tmp_path / "runs"
    for scheme in study.schemes:
        shutil.copytree(study.out / scheme, out / scheme)
    after_the_signal = []

    def slow_table(*args, **kwargs):  # the signal arrives while a long table is computed
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        after_the_signal.append("the table went on")
        raise AssertionError("not reached: the stop interrupts the table")

    monkeypatch.setattr(table_kinds, "compare", slow_table)
    stopped = Study(name="tiny", base_config=study.base_config, schemes=study.schemes, seeds=[1], out=out, overrides=study.overrides,
                    attention_text=study.attention_text)
    with pytest.raises(UserError, match=r"^stopped by SIGTERM: all 2 runs finished, the tables, pictures and "):
        run_study(stopped, parallel=2)
    assert after_the_signal == []


def test_a_stop_signal_during_a_parallel_studys_tail_exits_as_a_signal_and_keeps_its_runs(finished, tmp_path):
    """The runs are done and the workers draw the pictures and the page's records: a `kill` then
    stops the workers' jobs. Before, the study ended with the workers' own message and exit code 2,
    as if its input were wrong; a signal's end is 128 + its number, with one line saying what is
    done and how to finish."""
    study, _ = finished
    out = tmp_path / "runs"
    for scheme in study.schemes:
        shutil.copytree(study.out / scheme, out / scheme)
    proc = subprocess.Popen([sys.executable, "-c", TAIL_STUDY, str(study.base_config), str(out), *study.schemes],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:  # the count of runs ends the training part; the tail starts after it
            if "2 runs: 0 trained, 2 kept" in line:
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == (
        "error: stopped by SIGTERM: all 2 runs finished, the tables, pictures and explorer page not all written; "
        "start the study again to write them (its finished runs are kept)"), err
    assert "Traceback" not in err
    assert all(run_finished(out / scheme) for scheme in study.schemes)
    assert not (out / "index.html").exists()  # no page from a stopped tail
