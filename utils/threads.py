"""How many intra-op threads a process of the suite takes on a machine that others may share.

``--threads auto`` (the default of the commands that compute) divides the cores this process may
use among the suite's processes running on the machine when it starts, counted through a registry
of small files (one per live process, ``runs/cache/processes/<pid>.json``; ``NMT_PROCESS_REGISTRY``
names another folder, e.g. one shared by several checkouts). Why: torch takes one thread per core in
every process and OpenMP's threads spin while they wait, so two default trainings on two cores ran
3.5-15x slower than one alone (issue 88; docs/performance.md has the table). On a shared machine
OpenMP's waiting is also made passive, which only works before torch is imported: commands claim
their threads first. An explicit ``--threads N`` or ``OMP_NUM_THREADS`` always wins.

A training under ``auto`` re-divides as processes come and go (``rebalance``, called by the
training loop every ``REBALANCE_EVERY_S`` seconds), so runs launched at the same instant settle on a
share each whichever registered first.

Nothing here imports torch at module level: the choice is made before torch starts its threads.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from utils.errors import UserError

AUTO = "auto"
REGISTRY_ENV = "NMT_PROCESS_REGISTRY"
DEFAULT_REGISTRY = Path("runs/cache/processes")
WAIT_ENV = "OMP_WAIT_POLICY"
THREADS_ENV = "OMP_NUM_THREADS"
REBALANCE_EVERY_S = 5.0  # how often a training under auto counts the processes again

log = logging.getLogger(__name__)


def parse_threads(value: int | str) -> int | str:
    """``--threads`` as given (``auto``, or a whole number of at least 1 as text or int); anything
    else is a one-line ``UserError``."""
    text = str(value).strip()
    if text == AUTO:
        return AUTO
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"--threads must be at least 1, or auto (got '{text}')")
    return int(text)


@dataclass(frozen=True)
class Cores:
    """The cores a process may use: its CPU affinity, capped by its cgroup's CPU quota (rounded up)."""

    affinity: int
    quota: float | None = None  # CPUs' worth of time the cgroup allows; None: no quota

    @property
    def usable(self) -> int:
        if self.quota is None:
            return self.affinity
        return max(1, min(self.affinity, -int(-self.quota // 1)))

    def describe(self) -> str:
        quota = "no CPU quota" if self.quota is None else f"a CPU quota of {self.quota:g}"
        return f"{self.usable} usable core(s) (affinity {self.affinity}, {quota})"


@dataclass(frozen=True)
class ThreadChoice:
    """The threads a process takes and why. ``threads`` None: torch's own (``OMP_NUM_THREADS`` set);
    ``passive_wait``: set ``OMP_WAIT_POLICY=PASSIVE`` before torch loads; ``auto``: re-divided as
    the suite's processes come and go; ``cap``: the most this command uses (decoding: 1)."""

    threads: int | None
    reason: str
    passive_wait: bool = False
    auto: bool = False
    cap: int | None = None

    def count(self) -> int:
        """The threads as set: ``threads``, or torch's own where that is None."""
        if self.threads is not None:
            return self.threads
        import torch

        return torch.get_num_threads()


def fair_share(cores: int, others: int, cap: int | None = None) -> int:
    """``cores`` divided among this process and ``others``, at least one, at most ``cap``."""
    share = max(1, cores // (others + 1))
    return min(share, cap) if cap is not None else share


def choose_threads(requested: int | str, cores: Cores, others: int, env: Mapping[str, str],
                   cap: int | None = None) -> ThreadChoice:
    """The threads for a process asked for ``requested`` (``auto`` or N) with ``others`` of the
    suite's processes alive beside it, under environment ``env``. The user's settings win: an
    explicit N, then ``OMP_NUM_THREADS``; a wait policy the user set is never replaced."""
    if requested != AUTO:
        return ThreadChoice(int(requested), f"{requested} thread(s), set explicitly (--threads N, or a study's share; auto not used)")
    if env.get(THREADS_ENV, "").strip():
        value = env[THREADS_ENV].strip()
        return ThreadChoice(int(value) if value.isdigit() and int(value) > 0 else None,
                            f"{THREADS_ENV}={value} set: torch's own reading of it (auto not used)")
    threads = fair_share(cores.usable, others, cap)
    shared = others > 0
    passive = shared and not env.get(WAIT_ENV)
    parts = [f"auto, {threads} thread(s): {cores.describe()}",
             f"{others + 1} of the suite's processes on the machine" if shared else "no other of the suite's processes"]
    if cap is not None and threads == cap < fair_share(cores.usable, others):
        parts.append(f"this command uses at most {cap}")
    if passive:
        parts.append("OpenMP's waiting made passive")
    elif shared and env.get(WAIT_ENV):
        parts.append(f"{WAIT_ENV}={env[WAIT_ENV]} kept as set")
    return ThreadChoice(threads, "; ".join(parts), passive, auto=True, cap=cap)


def cpu_quota(cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup and its parents in CPUs (cgroup v2's ``cpu.max``, or
    v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``): the smallest found, None where none is set
    or readable."""
    quotas: list[float] = []
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = Path(path.lstrip("/"))
        if controllers == "":  # v2
            folders = [cgroup_root / rel, *[cgroup_root / p for p in rel.parents]]
            quotas += [q for q in map(_v2_quota, folders) if q is not None]
        elif "cpu" in controllers.split(","):  # v1
            base = next((cgroup_root / name for name in ("cpu,cpuacct", "cpu") if (cgroup_root / name).is_dir()), None)
            if base is not None:
                folders = [base / rel, *[base / p for p in rel.parents]]
                quotas += [q for q in map(_v1_quota, folders) if q is not None]
    return min(quotas) if quotas else None


def _v2_quota(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def this_process_cores() -> Cores:
    """The cores this process may use (affinity where the OS tells it, else the CPU count)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Cores(affinity, cpu_quota())


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """The process's state and its start time since boot (``/proc/PID/stat``'s 3rd and 22nd fields:
    the start time tells a process from a later one given the same PID); None where unreadable (no
    such process, or no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19]


def _start_time(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def _alive(pid: int, start: str | None) -> bool:
    """``pid`` runs and is the process registered (started at ``start``); a zombie (ended, not yet
    reaped by its parent) computes nothing and is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    stat = _proc_stat(pid)
    if stat is None:  # no /proc: the signal's answer is all there is
        return True
    return stat[0] != "Z" and (start is None or stat[1] == start)


class Registry:
    """The suite's live processes on this machine: a file per process, ``<pid>.json`` with its
    start time, threads and command. An entry whose process died (even by ``kill -9``, which skips
    the exit hook) or whose PID now names a later process is ignored and removed when counted."""

    def __init__(self, folder: Path | str | None = None):
        self.folder = Path(folder if folder is not None else os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY)

    def register(self, threads: int | None, command: str, pid: int | None = None) -> bool:
        """Record process ``pid`` (default this one); False where the folder cannot be written
        (the choice is then made as if alone, and says so)."""
        pid = os.getpid() if pid is None else pid
        entry = {"pid": pid, "start": _start_time(pid), "threads": threads, "command": command}
        path = self.folder / f"{pid}.json"
        tmp = self.folder / f".{pid}.json.tmp"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, path)
        except OSError:
            return False
        return True

    def unregister(self, pid: int | None = None) -> None:
        (self.folder / f"{os.getpid() if pid is None else pid}.json").unlink(missing_ok=True)

    def others(self, pid: int | None = None) -> int:
        """How many live processes other than ``pid`` (default this one) are registered."""
        pid = os.getpid() if pid is None else pid
        count = 0
        for path in self.folder.glob("*.json") if self.folder.is_dir() else ():
            try:
                entry = json.loads(path.read_text())
                other = int(entry["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being written, or not ours: neither counted nor removed
            if other == pid:
                continue
            if _alive(other, entry.get("start")):
                count += 1
            else:
                path.unlink(missing_ok=True)
        return count


_claim: ThreadChoice | None = None
_registry: Registry | None = None
_command = ""
_exit_hook = False  # _unregister is registered with atexit (once a process)


def claim_threads(requested: int | str, command: str, cap: int | None = None,
                  registry: Registry | None = None) -> ThreadChoice:
    """This process's threads: register it, choose (``choose_threads``), apply. Call it before torch
    is imported so that a passive wait policy takes effect; after, the threads are still set but
    OpenMP's waiting stays as it was (the reason says so)."""
    global _claim, _registry, _command, _exit_hook
    requested = parse_threads(requested)
    registry = registry or Registry()
    registered = registry.register(None if requested == AUTO else int(requested), command)
    others = registry.others() if registered else 0
    choice = choose_threads(requested, this_process_cores(), others, os.environ, cap)
    if not registered:
        choice = replace(choice, reason=f"{choice.reason}; the registry {registry.folder} is not writable, "
                                        "so other processes were not counted")
    if choice.passive_wait:
        if "torch" in sys.modules:
            choice = replace(choice, reason=choice.reason.replace(
                "OpenMP's waiting made passive", "OpenMP's waiting left as it was (torch already loaded)"))
        else:
            os.environ[WAIT_ENV] = "PASSIVE"
    if registered:
        registry.register(choice.threads, command)
        if not _exit_hook:
            atexit.register(_unregister)
            _exit_hook = True
    _claim, _registry, _command = choice, registry if registered else None, command
    if choice.threads is not None:
        import torch

        torch.set_num_threads(choice.threads)
    return choice


def release_threads(restore: int | None = None) -> None:
    """This process no longer counted (its entry removed) nor re-divided; torch's threads set back to
    ``restore`` where given."""
    global _claim, _registry
    if _registry is not None:
        _registry.unregister()
    _claim = _registry = None
    if restore is not None:
        import torch

        torch.set_num_threads(restore)


@contextmanager
def threads_claimed(requested: int | str, command: str, cap: int | None = None,
                    registry: Registry | None = None) -> Iterator[ThreadChoice]:
    """``claim_threads`` for the length of a command: on leaving, released and torch's threads set
    back to what they were (a command called in-process, e.g. by a test, leaves the process as it
    found it; an idle process that ran a command is not counted)."""
    before = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    choice = claim_threads(requested, command, cap, registry)
    try:
        yield choice
    finally:
        release_threads(before)


def _unregister() -> None:
    if _registry is not None:
        _registry.unregister()


def current_claim() -> ThreadChoice | None:
    """What ``claim_threads`` chose for this process (None where nothing claimed: a library use)."""
    return _claim


def rebalance() -> int | None:
    """Under ``auto``: the share anew, as the suite's processes now on the machine give it; set and
    logged where it changed. Returns the threads now set, or None where this process is not auto."""
    if _claim is None or not _claim.auto or _registry is None:
        return None
    import torch

    now = torch.get_num_threads()
    share = fair_share(this_process_cores().usable, _registry.others(), _claim.cap)
    if share != now:
        torch.set_num_threads(share)
        _registry.register(share, _command)
        log.info("threads: %d -> %d (the suite's processes on the machine changed)", now, share)
    return share
