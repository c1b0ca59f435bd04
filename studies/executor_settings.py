"""Where a study's runs train: the ``executor:`` section of a study declaration, a typed section
loaded by ``utils.config`` like every other (overridable on the command line as
``study.executor.KEY=VALUE``, or ``--executor NAME``)::

    executor:
      name: slurm            # a registered executor: inline | local | submitit-local | slurm
      cpus_per_task: 8       # CPUs of one job (its runs share them)
      gpus_per_job: 1        # default: 1 with --device cuda, else 0
      mem_gb: 32
      timeout_min: 240       # the job's time limit; the runs checkpoint and requeue before it
      signal_delay_s: 120    # SIGUSR2 this long before the limit (the checkpoint's warning)
      partition: gpu         # SLURM's partition, account and qos (default: the cluster's)
      account: null
      qos: null
      array_parallelism: 64  # the array's tasks running at once
      runs_per_job: 1        # runs packed into one job, trained one after another
      max_requeues: 3        # times a job is requeued at its time limit before it counts as failed
      poll_s: 30             # how often the study asks the scheduler (one squeue call for all jobs)

``inline`` trains the runs one after another in the study's process, ``local`` on its pool of
worker processes (``--parallel``); the submitit executors submit each job of ``runs_per_job`` runs
(a SLURM array) and watch them (``studies.executors``). The job resources serve the submitit
executors only; their defaults suit a cluster node, not the local ``--parallel 2``.
"""
from __future__ import annotations

from dataclasses import dataclass

from utils.config import require
from utils.job_schedulers import SCHEDULERS

# the registry's names (studies.executors.REGISTRY): the two in-process executors, then one per scheduler
EXECUTORS = ("inline", "local", *SCHEDULERS)
_MINIMUM = {"cpus_per_task": 1, "gpus_per_job": 0, "mem_gb": 1, "timeout_min": 1, "signal_delay_s": 0,
            "array_parallelism": 1, "runs_per_job": 1, "max_requeues": 0, "poll_s": 0.1}


@dataclass(frozen=True)
class ExecutorSettings:
    """The executor and its job resources (module doc); each rule is checked once, here."""

    name: str = "local"
    cpus_per_task: int = 8
    gpus_per_job: int | None = None
    mem_gb: int = 32
    timeout_min: int = 240
    signal_delay_s: int = 120
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    array_parallelism: int = 64
    runs_per_job: int = 1
    max_requeues: int = 3
    poll_s: float = 30.0

    def __post_init__(self):
        require(self.name in EXECUTORS, "name", f"one of {', '.join(EXECUTORS)}", self.name)
        for key, least in _MINIMUM.items():
            value = getattr(self, key)
            require(value is None or value >= least, key, f"at least {least}", value)
        for key in ("partition", "account", "qos"):
            require(getattr(self, key) != "", key, "a name or null", getattr(self, key))
        # SLURM's warning comes signal_delay_s before the limit: at or before the start, no work is done
        require(self.signal_delay_s < self.timeout_min * 60, "signal_delay_s",
                f"less than the time limit (timeout_min {self.timeout_min} = {self.timeout_min * 60} s)",
                self.signal_delay_s)

    def gpus(self, device: str) -> int:
        """GPUs a job asks for: the setting, else one for a CUDA study and none otherwise."""
        if self.gpus_per_job is not None:
            return self.gpus_per_job
        return 1 if device.startswith("cuda") else 0
