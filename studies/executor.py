"""Where a study's runs train: the ``executor:`` section of a study declaration, overridable on the
command line (``--executor NAME``, ``--executor-option key=value``)::

    executor:
      name: slurm            # inline | local | submitit-local | slurm
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
(a SLURM array) and watch them. The defaults suit a cluster, not the local ``--parallel 2``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from utils.errors import ConfigError

EXECUTORS = ("inline", "local", "submitit-local", "slurm")
SUBMITIT_EXECUTORS = ("submitit-local", "slurm")


@dataclass(frozen=True)
class ExecutorSettings:
    """The executor and its job resources (module doc)."""

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

    @property
    def submits_jobs(self) -> bool:
        return self.name in SUBMITIT_EXECUTORS

    def gpus(self, device: str) -> int:
        """GPUs a job asks for: the setting, else one for a CUDA study and none otherwise."""
        if self.gpus_per_job is not None:
            return self.gpus_per_job
        return 1 if device.startswith("cuda") else 0


FIELDS = {f.name: f for f in dataclasses.fields(ExecutorSettings)}
_MINIMUM = {"cpus_per_task": 1, "gpus_per_job": 0, "mem_gb": 1, "timeout_min": 1, "signal_delay_s": 0,
            "array_parallelism": 1, "runs_per_job": 1, "max_requeues": 0, "poll_s": 0.1}


def _check(key: str, value, where: str):
    """``value`` of ``key`` converted to its field's type, or a one-line ConfigError naming ``where``."""
    if key not in FIELDS:
        raise ConfigError(f"{where}: unknown executor key '{key}' (keys: {', '.join(FIELDS)})")
    if key == "name":
        if value not in EXECUTORS:
            raise ConfigError(f"{where}: executor 'name' must be one of {', '.join(EXECUTORS)}, got {value!r}")
        return value
    if key in ("partition", "account", "qos"):
        if value is not None and not (isinstance(value, str) and value):
            raise ConfigError(f"{where}: executor '{key}' must be a name or null, got {value!r}")
        return value
    if value is None and key == "gpus_per_job":
        return None
    kind = float if key == "poll_s" else int
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise ConfigError(f"{where}: executor '{key}' must be a{'' if kind is int else ' real'} number, got {value!r}")
    if value < _MINIMUM[key]:
        raise ConfigError(f"{where}: executor '{key}' must be at least {_MINIMUM[key]}, got {value!r}")
    return kind(value)


def parse_executor(tree, where: Path | str) -> ExecutorSettings:
    """The ``executor:`` mapping of a study declaration (None: the defaults)."""
    if tree is None:
        return ExecutorSettings()
    if not isinstance(tree, dict):
        raise ConfigError(f"{where}: 'executor' is a mapping of {', '.join(FIELDS)}, got {tree!r}")
    return ExecutorSettings(**{k: _check(k, v, str(where)) for k, v in tree.items()})


def with_overrides(settings: ExecutorSettings, name: str | None, options: list[str]) -> ExecutorSettings:
    """``settings`` with the command line's ``--executor`` and ``--executor-option key=value``
    (YAML values: ``mem_gb=64``, ``partition=gpu``, ``account=null``)."""
    import yaml

    changes = {}
    for option in options:
        key, sep, text = option.partition("=")
        if not sep:
            raise ConfigError(f"--executor-option: expected key=value, got {option!r}")
        changes[key] = _check(key, yaml.safe_load(text), "--executor-option")
    if name is not None:
        changes["name"] = _check("name", name, "--executor")
    return dataclasses.replace(settings, **changes)
