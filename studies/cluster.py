"""A study whose runs are jobs of a scheduler, submitted through submitit (``slurm``, or
``submitit-local`` on this machine).

``run_jobs`` (the submitit executors' ``run``, ``studies.executors``) reads the study's job ledger (``studies.ledger``), asks the scheduler
for the state of the jobs it names, submits every run that is neither finished nor covered by a
queued or running job — ``runs_per_job`` runs a job, one SLURM array — and watches them, one line
per change of the counts. Ctrl-C stops the watching only: the jobs keep running and the same
command re-attaches. When no job is left running and every run is finished, the study's usual
tail writes the tables, pictures and explorer page; a failed job is one line naming its log, a
cancelled one is reported and resubmitted by the next command.

A job (``StudyJob``) trains its runs one after another with the same ``train_and_test`` as the
local path. Before its time limit SLURM sends SIGUSR2 (submitit's ``--signal``): the trainer
stops after the current update with ``last.pt`` saved, then submitit requeues the job, whose next
start resumes the run; ``scontrol requeue`` and pre-emption send SIGTERM, the same graceful stop,
and the scheduler requeues the job itself.
"""
from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import submitit
import torch

from studies.catalog import Study
from studies.executor_settings import ExecutorSettings
from studies.ledger import CANCELLED, COMPLETED, Job, Ledger, LedgerLock, category, now
from studies.runs import (
    RunInterrupted,
    declared_order,
    done,
    fill_data_caches,
    finished,
    queue,
    run_dir_of,
    train_and_test,
)
from utils.errors import UserError
from utils.job_schedulers import SCHEDULERS, Scheduler


class StudyJob(submitit.helpers.Checkpointable):
    """One job: ``runs`` (scheme, seed) of ``study`` trained and tested one after another on
    ``threads`` threads. Checkpointable: requeued, it runs again and keeps what is finished."""

    def __init__(self, study: Study, runs: list[tuple[str, int]], device: str, threads: int):
        self.study, self.runs, self.device, self.threads = study, runs, device, threads

    def __call__(self) -> list[str]:
        from utils.cli import setup_logging

        setup_logging()
        torch.set_num_threads(self.threads)
        done = []
        for scheme, seed in self.runs:
            try:
                done.append(str(train_and_test(self.study, scheme, seed, self.device).run_dir))
            except RunInterrupted as stop:
                handler = signal.getsignal(signal.SIGUSR2)
                if stop.signal == "SIGUSR2" and callable(handler):
                    handler(signal.SIGUSR2, None)  # submitit's: checkpoint (this job again), requeue, exit
                raise
        return done


def _executor(study: Study, settings: ExecutorSettings, device: str) -> submitit.Executor:
    """submitit's executor for the study's scheduler, with the jobs' resources."""
    scheduler = SCHEDULERS[settings.name]
    cluster = scheduler.submitit_cluster
    executor = submitit.AutoExecutor(folder=study.out / "jobs" / "%j", cluster=cluster,
                                     **{f"{cluster}_max_num_timeout": settings.max_requeues})
    params = {"name": f"nmt-{study.name}", "timeout_min": settings.timeout_min, "cpus_per_task": settings.cpus_per_task,
              "gpus_per_node": settings.gpus(device), "mem_gb": settings.mem_gb, "tasks_per_node": 1, "nodes": 1}
    params.update(scheduler.submitit_parameters(settings.signal_delay_s, settings.array_parallelism,
                                                {k: getattr(settings, k) for k in ("partition", "account", "qos")}))
    executor.update_parameters(**params)
    return executor


def _by_scheduler(jobs: list[Job]) -> dict[Scheduler, list[Job]]:
    grouped: dict[Scheduler, list[Job]] = {}
    for job in jobs:
        grouped.setdefault(SCHEDULERS[job.executor], []).append(job)
    return grouped


def refresh(ledger: Ledger, jobs: dict[str, Job]) -> dict[str, Job]:
    """``jobs`` with their schedulers' current states (one question per scheduler for all of its
    jobs); each change is appended to the ledger."""
    active = [j for j in jobs.values() if j.active]
    states = {}
    for scheduler, group in _by_scheduler(active).items():
        states.update(scheduler.states([(j.job, j.log) for j in group]))
    updated = dict(jobs)
    for job in active:
        state, node = states.get(job.job, (job.state, job.node))
        if state.startswith(CANCELLED):
            state = CANCELLED
        if state != job.state:
            updated[job.job] = ledger.changed(job, state, node)
    return updated


def _to_submit(study: Study, per_run: dict[str, Job]) -> list[tuple[str, int]]:
    """The runs neither finished (tested with the study's decoding) nor covered by a live job; a
    run whose last job failed or was cancelled says so as it is resubmitted."""
    todo, covered = [], []
    for scheme, seed in queue(study):
        run_dir = run_dir_of(study, scheme, seed)
        if done(study, scheme, seed):
            continue
        job = per_run.get(run_dir.name)
        if job is not None and job.active:
            covered.append(job.job)
            continue
        if job is not None and job.state != COMPLETED:
            print(f"[{study.name}] {run_dir.name}: its job {job.job} ended {job.state.lower()}; submitting it again",
                  flush=True)
        todo.append((scheme, seed))
    if covered:
        print(f"[{study.name}] {len(covered)} run(s) already queued or running in earlier jobs "
              f"({', '.join(dict.fromkeys(covered))}); those keep the resources they were submitted with", flush=True)
    return todo


def submit(study: Study, device: str) -> list[Job]:
    """Submit the study's missing runs (``_to_submit``) as jobs of ``runs_per_job`` runs; the new
    jobs, recorded in the ledger. One submitter at a time (``LedgerLock``)."""
    settings = study.executor
    ledger = Ledger(study.out)
    with LedgerLock(study.out):
        jobs = refresh(ledger, ledger.jobs())
        per_run = {run: jobs[job.job] for run, job in ledger.latest_per_run().items()}
        todo = _to_submit(study, per_run)
        if not todo:
            return []
        fill_data_caches(study, todo)
        SCHEDULERS[settings.name].check_fits(settings.cpus_per_task, settings.mem_gb, settings.partition)
        groups = [todo[i:i + settings.runs_per_job] for i in range(0, len(todo), settings.runs_per_job)]
        executor = _executor(study, settings, device)
        try:
            with SCHEDULERS[settings.name].submitting(), executor.batch():
                handles = [executor.submit(StudyJob(study, group, device, settings.cpus_per_task)) for group in groups]
        except (submitit.core.utils.FailedSubmissionError, submitit.core.utils.FailedJobError,
                subprocess.CalledProcessError, OSError) as err:
            lines = [line for line in str(err).splitlines() if line.strip()]
            raise UserError(f"the {settings.name} executor refused the jobs: {lines[-1] if lines else type(err).__name__}"
                            ) from None
        _drop_pattern_folder(study)
        new = []
        for handle, group in zip(handles, groups):
            job = Job(str(handle.job_id), tuple(run_dir_of(study, s, seed).name for s, seed in group), settings.name,
                      now(), str(handle.paths.stderr).replace("%j", str(handle.job_id)))
            ledger.submitted(job)
            new.append(job)
        return new


def _drop_pattern_folder(study: Study) -> None:
    """submitit also makes the folder pattern itself (``<out>/jobs/%j``), left empty beside the jobs'
    own ``<out>/jobs/<id>/``: removed once empty."""
    pattern = study.out / "jobs" / "%j"
    if pattern.is_dir() and not any(pattern.iterdir()):
        pattern.rmdir()


def _counts(jobs: list[Job]) -> str:
    counts = Counter(category(j.state) for j in jobs)
    return ", ".join(f"{counts[c]} {c}" for c in ("queued", "running", "finished", "failed", "cancelled"))


def watch(study: Study, poll_s: float) -> list[Job]:
    """Poll the study's current jobs (each run's latest) until none is queued or running, printing
    the counts whenever they change; the jobs in their final states."""
    ledger = Ledger(study.out)
    names = {run_dir_of(study, s, seed).name for s, seed in queue(study)}
    last = None
    while True:
        jobs = refresh(ledger, ledger.jobs())
        current = list({j.job: jobs[j.job] for run, j in ledger.latest_per_run().items() if run in names}.values())
        line = _counts(current)
        reasons = {}
        for scheduler, queued in _by_scheduler([j for j in current if category(j.state) == "queued"]).items():
            reasons.update(scheduler.pending_reasons([j.job for j in queued]))
        if reasons:
            line += " (pending: " + ", ".join(f"{n} {r}" for r, n in Counter(reasons.values()).items()) + ")"
        if line != last:
            print(f"[{study.name}] jobs: {line}", flush=True)
            last = line
        if not any(j.active for j in current):
            return current
        time.sleep(poll_s)


class _Stopped(Exception):
    """The watching command received SIGTERM or SIGHUP (as Ctrl-C's KeyboardInterrupt, one line)."""

    def __init__(self, received: signal.Signals):
        super().__init__(received.name)
        self.received = received


@contextlib.contextmanager
def _stop_on_signals():
    """While watching: SIGTERM and SIGHUP end the watching as Ctrl-C does (the jobs keep running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _Stopped(signal.Signals(signum))

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_jobs(study: Study, device: str) -> list[Path]:
    """The study's runs as jobs of its submitit executor (module doc): submit, watch, report; the
    run folders in the declared order once every run is finished, else a one-line ``UserError``
    (``run_study`` has checked every run's config before)."""
    new = submit(study, device)
    print(f"[{study.name}] {len(new)} job(s) submitted to {study.executor.name}"
          + (f": {', '.join(j.job for j in new)}" if new else " (every run finished or queued)")
          + f"; ledger {Ledger(study.out).path}", flush=True)
    detached = (f"stopped watching: the jobs keep running; run the same command again to re-attach "
                f"(ledger {Ledger(study.out).path})")
    try:
        with _stop_on_signals():
            jobs = watch(study, study.executor.poll_s)
    except KeyboardInterrupt:
        raise UserError(detached) from None
    except _Stopped as stop:
        error = UserError(detached)
        error.exit_code = 128 + stop.received
        raise error from None
    problems = []
    for job in jobs:
        if category(job.state) == "failed":
            problems.append(f"job {job.job} ({', '.join(job.runs)}) {job.state.lower()}: see {job.log}")
        elif job.state == CANCELLED:
            problems.append(f"job {job.job} ({', '.join(job.runs)}) was cancelled; the next `study` command "
                            "resubmits its runs")
    for line in problems:
        print(f"[{study.name}] {line}", flush=True)
    _drop_pattern_folder(study)
    run_dirs = [run_dir_of(study, s, seed) for s, seed in queue(study)]
    unfinished = [d.name for d in run_dirs if not finished(d)]
    if unfinished or problems:
        raise UserError(f"{len(unfinished)} of {len(run_dirs)} runs not finished ({', '.join(unfinished) or 'none'}); "
                        f"{len(problems)} job(s) failed or cancelled; run the same command again to resubmit them")
    return declared_order(study, run_dirs)
