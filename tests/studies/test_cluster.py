"""A study through a real scheduler: the one-node SLURM of ``tests/slurm_cluster.py`` (fixture
``slurm``), with submitit submitting the jobs, against the same study trained inline here.

Every run is the tiny synthetic model (20 updates), one thread on both sides, so the jobs'
weights, tables and hypotheses must equal the inline study's exactly.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from experiment.run_dir import read_metrics_log
from studies.catalog import Study
from studies.cluster import submit, watch
from studies.driver import run_study
from studies.executor_settings import ExecutorSettings
from studies.ledger import Ledger
from tests.conftest import ROOT, TINY
from utils.errors import UserError

LONG = 600  # updates of the runs a requeue or a time limit interrupts (about 15 s of training)
SLURM = ExecutorSettings(name="slurm", cpus_per_task=1, mem_gb=1, timeout_min=10, signal_delay_s=30, poll_s=0.5)
LOCAL = ExecutorSettings(name="submitit-local", cpus_per_task=1, poll_s=0.5)


def tiny_study(folder: Path, executor: ExecutorSettings = SLURM, steps: int = 20, seeds=(1,)) -> Study:
    base = folder / "configs" / "base.yaml"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.write_text(TINY.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    return Study(name="tiny", base_config=base, schemes=["sinusoidal", "alibi"], seeds=list(seeds), out=folder / "runs",
                 overrides=[f"train.max_steps={steps}", "train.eval_every=10"], attention_text="Je la vois.",
                 archive=folder / "archive", executor=executor)


def quietly(fn, *args):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fn(*args)
    return printed.getvalue()


def digest(run_dir: Path) -> list[str]:
    return json.loads((run_dir / "manifest.json").read_text())["rank_weight_digests"]


def hypotheses(run_dir: Path) -> list[str]:
    """A run's hypotheses on ``test``, from its own folder or an archive (which keeps them gzip)."""
    from scoring.texts import hypotheses_of

    return hypotheses_of(run_dir, "test")


def trained_inline(study: Study) -> Study:
    """``study`` trained here, one run after another, on one thread (as each job trains)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        quietly(run_study, study, "cpu", 1)
    finally:
        torch.set_num_threads(threads)
    return study


@pytest.fixture(scope="module")
def inline(tmp_path_factory) -> Study:
    """The reference: the tiny study trained here, inline, on one thread."""
    return trained_inline(tiny_study(tmp_path_factory.mktemp("inline"), ExecutorSettings(name="inline")))


def states(study: Study) -> dict[str, str]:
    return {job.job: job.state for job in Ledger(study.out).jobs().values()}


def wait_for(what, predicate, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def expedited(slurm):
    """SLURM holds a requeued job for two minutes (its begin time); this starts such jobs at once,
    as an operator would with ``scontrol update JobId=... StartTime=now``, to keep the tests short."""
    import threading

    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.5):
            pending = slurm.run("squeue", "-h", "-t", "PENDING", "-o", "%i %r", check=False)
            for line in pending.splitlines():
                job_id, _, reason = line.partition(" ")
                if reason.strip() == "BeginTime":
                    slurm.run("scontrol", "update", f"JobId={job_id}", "StartTime=now", check=False)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """ALiBi trained for LONG updates without a break, inline, on one thread: the run a requeued
    or timed-out job must end equal to."""
    study = replace(tiny_study(tmp_path_factory.mktemp("long"), ExecutorSettings(name="inline"), steps=LONG),
                    schemes=["alibi"])
    return trained_inline(study).out / "alibi"


def test_a_slurm_study_reaches_the_inline_archive_tables_and_weights(slurm, inline, tmp_path):
    study = tiny_study(tmp_path)
    printed = quietly(run_study, study, "cpu")
    assert "2 job(s) submitted to slurm" in printed
    assert "[tiny] jobs: 0 queued, 0 running, 2 finished, 0 failed, 0 cancelled" in printed
    for scheme in ("sinusoidal", "alibi"):
        job = json.loads((study.out / scheme / "manifest.json").read_text())["job"]
        assert job["scheduler"] == "slurm" and job["node"] and "_" in job["id"]  # an array's task
        assert digest(study.out / scheme) == digest(inline.out / scheme)
        assert hypotheses(study.archive / scheme) == hypotheses(inline.archive / scheme)
    for table in ("comparison_test.md", "comparison_test.csv"):
        assert (study.archive / table).read_text() == (inline.archive / table).read_text()
    assert (study.out / "index.html").is_file()
    # the ledger: one submission per run, each job seen finishing
    jobs = Ledger(study.out).jobs()
    assert sorted(r for j in jobs.values() for r in j.runs) == ["alibi", "sinusoidal"]
    assert set(states(study).values()) == {"COMPLETED"}
    # a second command finds every run finished: it submits nothing and writes the same tables
    again = quietly(run_study, study, "cpu")
    assert "0 job(s) submitted to slurm (every run finished or queued)" in again
    assert len(Ledger(study.out).jobs()) == 2


def test_runs_per_job_packs_runs_and_a_second_submit_adds_nothing(slurm, inline, tmp_path):
    study = tiny_study(tmp_path, replace(SLURM, runs_per_job=2))
    first = submit(study, "cpu")
    assert [j.runs for j in first] == [("alibi", "sinusoidal")]  # the queue's order: attention-acting first
    assert submit(study, "cpu") == []  # its job is queued or running: nothing twice
    quietly(watch, study, 0.5)
    assert list(states(study).values()) == ["COMPLETED"]
    for scheme in ("sinusoidal", "alibi"):
        assert json.loads((study.out / scheme / "manifest.json").read_text())["job"]["id"] == first[0].job
        assert digest(study.out / scheme) == digest(inline.out / scheme)


def interrupted_mid_run(slurm, study: Study, *command: str) -> str:
    """Submit the one-run ``study``, run ``command`` on its job once training has logged updates,
    watch it to the end, and check that the run was stopped once and then finished; the job's id."""
    with expedited(slurm):
        (job,) = submit(study, "cpu")
        metrics = study.out / "alibi" / "metrics.jsonl"
        wait_for("the run's first logged updates", lambda: metrics.is_file() and metrics.stat().st_size > 0)
        slurm.run(*command, job.job)
        final = quietly(watch, study, 0.5)
    log = Path(Ledger(study.out).jobs()[job.job].log)
    assert "0 queued, 0 running, 1 finished" in final, (final, Ledger(study.out).path.read_text(),
                                                        log.read_text(errors="replace")[-3000:] if log.is_file() else log)
    manifest = json.loads((study.out / "alibi" / "manifest.json").read_text())
    assert manifest["steps"] == LONG and manifest["stopped_by"] is None
    assert "last_stopped" in manifest  # stopped once (last.pt saved), then resumed to the end
    return job.job


def test_a_requeued_job_resumes_and_ends_with_the_uninterrupted_weights(slurm, uninterrupted, tmp_path):
    """``scontrol requeue`` mid-training (SIGTERM, then the scheduler requeues): the run saves
    ``last.pt``, the job starts again and resumes it, and the final weights are those of the same
    run trained without a break."""
    study = replace(tiny_study(tmp_path, steps=LONG), schemes=["alibi"])
    interrupted_mid_run(slurm, study, "scontrol", "requeue")
    assert digest(study.out / "alibi") == digest(uninterrupted)


def test_the_time_limit_warning_checkpoints_requeues_and_resumes(slurm, uninterrupted, tmp_path):
    """Before a job's time limit SLURM sends SIGUSR2 to its steps (``--signal=USR2@<signal_delay_s>``
    in submitit's batch script); sent here mid-training (``scancel --signal=USR2``, what SLURM does
    at the limit: its own timer may fire up to a minute early or late, too coarse for a test), it
    stops the run with ``last.pt``, submitit requeues the job, and the run resumes to the
    uninterrupted weights."""
    study = replace(tiny_study(tmp_path, replace(SLURM, signal_delay_s=45), steps=LONG), schemes=["alibi"])
    job = interrupted_mid_run(slurm, study, "scancel", "--signal=USR2")
    assert "#SBATCH --signal=USR2@45" in (study.out / "jobs" / job / f"{job}_submission.sh").read_text()
    attempts = slurm.run("sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State", "-j", job.split("_")[0])
    assert "REQUEUED" in attempts, attempts  # submitit's requeue, then the finished attempt
    assert digest(study.out / "alibi") == digest(uninterrupted)


@pytest.mark.parametrize("executor", ["slurm", "submitit-local"])
def test_a_failing_job_is_one_line_naming_its_log_while_the_rest_finishes(request, tmp_path, executor):
    if executor == "slurm":
        request.getfixturevalue("slurm")
    study = tiny_study(tmp_path, SLURM if executor == "slurm" else LOCAL)
    study.out.mkdir(parents=True)
    (study.out / "alibi").write_text("a file where the run's folder should be\n")  # alibi's job fails
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(UserError) as err:
        run_study(study, "cpu")
    failed = [line for line in printed.getvalue().splitlines() if " failed: see " in line]
    assert len(failed) == 1 and "(alibi)" in failed[0], printed.getvalue()
    log = Path(failed[0].rsplit("see ", 1)[1])
    assert log.is_file() and "alibi" in log.read_text(errors="replace")
    assert "1 of 2 runs not finished (alibi)" in str(err.value) and "\n" not in str(err.value)
    assert json.loads((study.out / "sinusoidal" / "manifest.json").read_text())["ended_by"] == "max_steps"


def test_submitit_local_jobs_reach_the_inline_weights_and_tables(inline, tmp_path):
    """The same study as jobs on this machine (submitit's local executor), two runs in one job; a
    second submission while it runs adds nothing, and the study command re-attaches to the job."""
    study = tiny_study(tmp_path, replace(LOCAL, runs_per_job=2))
    (first,) = submit(study, "cpu")
    assert first.runs == ("alibi", "sinusoidal") and submit(study, "cpu") == []
    printed = quietly(run_study, study, "cpu")
    assert "0 job(s) submitted to submitit-local" in printed and "0 running, 1 finished" in printed
    assert list(states(study)) == [first.job]
    for scheme in ("sinusoidal", "alibi"):
        assert json.loads((study.out / scheme / "manifest.json").read_text())["job"]["scheduler"] == "submitit-local"
        assert digest(study.out / scheme) == digest(inline.out / scheme)
    assert (study.archive / "comparison_test.md").read_text() == (inline.archive / "comparison_test.md").read_text()
    assert sorted(p.name for p in (study.out / "jobs").iterdir()) == [first.job]  # no empty "%j" folder beside it


def test_a_cancelled_job_is_reported_and_resubmitted(slurm, tmp_path):
    """``scancel`` while the study watches: the study ends with one line naming the cancelled job;
    the next command resubmits its run."""
    import threading

    study = replace(tiny_study(tmp_path, steps=100000), schemes=["alibi"])
    (job,) = submit(study, "cpu")
    outcome: dict[str, BaseException | None] = {}

    def command() -> None:
        try:
            run_study(study, "cpu")
            outcome["error"] = None
        except BaseException as err:  # noqa: BLE001 (handed to the test's thread)
            outcome["error"] = err

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        watching = threading.Thread(target=command)
        watching.start()
        wait_for("the job to run", lambda: states(study)[job.job] == "RUNNING")
        slurm.run("scancel", job.job)
        watching.join(timeout=120)
    assert not watching.is_alive()
    assert isinstance(outcome["error"], UserError) and "1 job(s) failed or cancelled" in str(outcome["error"])
    assert f"job {job.job} (alibi) was cancelled; the next `study` command resubmits its runs" in printed.getvalue()
    assert states(study)[job.job] == "CANCELLED"
    (again,) = submit(study, "cpu")  # the next command resubmits the cancelled run
    assert again.job != job.job and again.runs == ("alibi",)
    slurm.run("scancel", again.job)


def test_the_run_lock_refuses_a_takeover_from_a_job_that_still_runs(slurm, tmp_path, capsys):
    """flock may not be exclusive across nodes on a network file system: a lock file that names a
    job the scheduler still runs is a live writer elsewhere, so the lock is refused; once the job
    has ended it is a dead writer's and taken over."""
    from experiment.run_lock import RunLock, lock_path

    job_id = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300").strip()
    wait_for("the job to run", lambda: slurm.run("squeue", "-h", "-j", job_id, "-o", "%T").strip() == "RUNNING")
    run_dir = tmp_path / "run"
    lock_path(run_dir).write_text(json.dumps({"pid": 1, "host": "node7", "since": "earlier",
                                              "job": {"scheduler": "slurm", "id": job_id, "node": "node7"}}))
    with pytest.raises(UserError, match=f"being written by slurm job {job_id} on node7, which still runs"):
        RunLock(run_dir).acquire()
    slurm.run("scancel", job_id)
    wait_for("the job to end", lambda: not slurm.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip())
    with RunLock(run_dir):
        record = json.loads(lock_path(run_dir).read_text())
        assert record["pid"] != 1
    assert "taking over the lock" in capsys.readouterr().err


def test_a_refused_submission_is_one_line_and_records_no_job(slurm, tmp_path):
    study = tiny_study(tmp_path, replace(SLURM, partition="nosuch"))
    with pytest.raises(UserError, match="the slurm executor refused the jobs: .*partition") as err:
        submit(study, "cpu")
    assert "\n" not in str(err.value) and not Ledger(study.out).jobs()


# The study command as a terminal runs it: the tiny one-run study of LONG updates on ``executor``.
WATCHING = """
import sys
from dataclasses import replace
from pathlib import Path
from studies.driver import run_study
from tests.studies.test_cluster import LOCAL, LONG, SLURM, tiny_study
from utils.cli import run_main

study = replace(tiny_study(Path(sys.argv[1]), SLURM if sys.argv[2] == "slurm" else LOCAL, steps=LONG), schemes=["alibi"])
run_main(lambda: run_study(study, "cpu"))
"""


def as_a_terminal_starts_it() -> None:
    """A shell starts a command with SIGINT at its default and unblocked, whatever the test
    process (a long pytest session) holds."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def job_runs(slurm, study: Study, job_id: str) -> bool:
    if Ledger(study.out).jobs()[job_id].executor == "slurm":
        return slurm.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip() == "RUNNING"
    from utils.job_schedulers import process_alive

    return process_alive(int(job_id))


@pytest.mark.parametrize("executor,stop", [("slurm", "SIGINT"), ("submitit-local", "SIGINT"),
                                           ("submitit-local", "SIGTERM")])
def test_ctrl_c_stops_the_watching_only_and_the_same_command_re_attaches(request, uninterrupted, tmp_path, executor,
                                                                         stop):
    """A terminal's Ctrl-C (SIGINT to the command's process group, which holds a submitit-local
    job's processes too), or a supervisor's SIGTERM to the command, while the job trains: the
    command ends with one line, the job trains on untouched, and the same command re-attaches,
    submits nothing and gathers the finished run, whose weights are those of a run never
    interrupted."""
    if executor == "slurm":
        request.getfixturevalue("slurm")  # the cluster up
    printed = tmp_path / "printed.txt"  # a file, not a pipe: a local job's processes inherit it and live on
    with printed.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", WATCHING, str(tmp_path), executor], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=as_a_terminal_starts_it)
    study = replace(tiny_study(tmp_path, SLURM if executor == "slurm" else LOCAL, steps=LONG), schemes=["alibi"])
    try:
        metrics = study.out / "alibi" / "metrics.jsonl"
        wait_for("the job's first logged updates", lambda: proc.poll() is None and metrics.is_file()
                 and metrics.stat().st_size > 0 or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, printed.read_text()
        trained = max(point["step"] for point in read_metrics_log(study.out / "alibi"))
        assert trained < LONG  # the signal comes while the job trains
        if stop == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == (2 if stop == "SIGINT" else 128 + signal.SIGTERM), printed.read_text()
        err = printed.read_text()
        assert err.strip().splitlines()[-1] == ("error: stopped watching: the jobs keep running; run the same command "
                                                f"again to re-attach (ledger {study.out.absolute() / 'jobs.jsonl'})"), err
        assert len(Ledger(study.out).jobs()) == 1
        again = quietly(run_study, study, "cpu")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert f"0 job(s) submitted to {executor} (every run finished or queued)" in again
    assert "0 queued, 0 running, 1 finished" in again and len(Ledger(study.out).jobs()) == 1
    manifest = json.loads((study.out / "alibi" / "manifest.json").read_text())
    # the signal did not reach the job: it trained on to the end in one go, never stopped or resumed
    assert manifest["stopped_by"] is None and "last_stopped" not in manifest
    assert digest(study.out / "alibi") == digest(uninterrupted)
    assert (study.archive / "comparison_test.md").is_file()


def test_a_submitit_local_job_at_its_time_limit_checkpoints_and_is_requeued(tmp_path):
    """submitit's local executor keeps a job's time limit itself (SIGUSR2 ``signal_delay_s`` before
    it, exactly): the run stops with ``last.pt``, the job is requeued in place and the next attempt
    resumes the run from that step."""
    study = replace(tiny_study(tmp_path, replace(LOCAL, timeout_min=1, signal_delay_s=50), steps=100000),
                    schemes=["alibi"])
    (job,) = submit(study, "cpu")
    run_dir = study.out / "alibi"
    try:
        manifest = wait_for("the run's stop at the time limit's warning", lambda: (run_dir / "manifest.json").is_file()
                            and (m := json.loads((run_dir / "manifest.json").read_text())).get("stopped_by") and m,
                            timeout=90)
        assert manifest["stopped_by"] == "SIGUSR2" and 0 < manifest["steps"] < 100000
        log = Path(job.log)
        wait_for("the job's requeue", lambda: f"Requeued job {job.job}" in log.read_text(errors="replace"))
        assert "Caught signal SIGUSR2" in log.read_text(errors="replace")
        wait_for("the requeued job's resumed updates", lambda: any(
            json.loads(line)["step"] > manifest["steps"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()))
        assert job_runs(None, study, job.job)  # the same job (its controller) trains on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(job.job), signal.SIGTERM)  # the controller passes it on: the run stops, the job ends
        wait_for("the job to end", lambda: not job_runs(None, study, job.job), timeout=60)
