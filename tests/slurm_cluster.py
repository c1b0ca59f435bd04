"""A one-node SLURM cluster of this machine's own, for the tests (and for trying the cluster commands
by hand)::

    python -m tests.slurm_cluster start     # prints the export line for SLURM_CONF
    python -m tests.slurm_cluster stop

Five daemons — ``munged`` (its own key copy and socket), ``mariadbd`` (its own data folder, on a
TCP port), ``slurmdbd`` (accounting: submitit polls ``sacct``, without it a job's state stays
unknown), ``slurmctld`` and ``slurmd`` — all under one state folder (``ROOT``, default
``/tmp/nmt-slurm-<uid>``) with free ports chosen at start, so nothing of the machine's own
``/etc/slurm`` or ``/run/munge`` is used or changed. Clients find the cluster through
``SLURM_CONF=<ROOT>/slurm.conf`` (``Cluster.env``).

Nothing is left behind: ``start`` first stops whatever an earlier start left running (a crashed or
interrupted test session), ``stop`` ends every process that carries this cluster's ``SLURM_CONF``
in its environment (the daemons, ``slurmstepd`` and the jobs' own processes) and the database by
its pid file, then waits for them to exit. Needs root (``slurmd`` starts jobs as their users) and
Debian's packages (``make slurm``); ``unavailable()`` says in one line why a machine cannot.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path(f"/tmp/nmt-slurm-{os.getuid()}")
DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sacct", "sacctmgr", "scontrol", "squeue", "scancel", "sinfo")
CLUSTER, ACCOUNT, PARTITION = "nmttest", "nmt", "debug"
DB_USER, DB_PASSWORD = "slurm", "nmt-test-only"  # a database on 127.0.0.1 that lives as long as the tests


@dataclass(frozen=True)
class Cluster:
    """A started cluster: its state folder and the environment its clients need."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        """A SLURM client command against this cluster; its stdout."""
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout


def unavailable() -> str | None:
    """Why this machine cannot run the cluster (one line), or None when it can."""
    if os.geteuid() != 0:
        return "the one-node SLURM needs root (slurmd starts jobs as their users)"
    missing = [p for p in (*DAEMONS, *CLIENTS, "mariadb") if shutil.which(p) is None]
    if missing:
        return f"SLURM or its database is not installed (missing: {', '.join(missing)}; `make slurm` installs them)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, timeout: float = 60, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace").splitlines()[-5:] if log is not None and log.exists() else []
    raise RuntimeError(f"{what} did not come up in {timeout:.0f} s" + (": " + " | ".join(tail) if tail else ""))


def _ours(root: Path) -> list[int]:
    """Processes that carry this cluster's SLURM_CONF in their environment (not this one)."""
    marker = f"SLURM_CONF={root / 'slurm.conf'}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def stop(root: Path = DEFAULT_ROOT, timeout: float = 20) -> None:
    """End every process of the cluster at ``root`` (TERM, then KILL after ``timeout``)."""
    pids = _ours(root)
    db_pid = root / "mariadb.pid"
    if db_pid.exists():
        try:
            pids.append(int(db_pid.read_text().strip()))
        except ValueError:
            pass
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal_all([p for p in pids if _alive(p)], signal.SIGKILL)
    for pid in pids:  # the database is this process's child when this process started it: reap it
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    db_pid.unlink(missing_ok=True)


def test_root(pid: int) -> Path:
    """The state folder of the cluster a test session (process ``pid``) starts: one per session, so
    two sessions at once (``make test`` beside a developer's run) do not stop each other's."""
    return DEFAULT_ROOT.with_name(f"{DEFAULT_ROOT.name}-tests-{pid}")


def stop_stale_test_clusters() -> list[Path]:
    """Stop and remove the clusters of test sessions that are no longer running (a crash, a kill,
    Ctrl-C past the fixture's teardown); the folders removed."""
    stale = []
    for root in DEFAULT_ROOT.parent.glob(f"{DEFAULT_ROOT.name}-tests-*"):
        pid = root.name.rsplit("-", 1)[1]
        if pid.isdigit() and _alive(int(pid)):
            continue
        stop(root)
        shutil.rmtree(root, ignore_errors=True)
        stale.append(root)
    return stale


def _write_configs(root: Path, ports: dict[str, int]) -> None:
    host = socket.gethostname()
    cpus = os.cpu_count() or 1
    mem_mb = int(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 * 0.8)
    sock = root / "munge" / "socket"
    dbd = root / "slurmdbd.conf"
    dbd.write_text("\n".join([
        "AuthType=auth/munge", f"AuthInfo=socket={sock}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
        f"DbdPort={ports['dbd']}", "SlurmUser=root", f"LogFile={root / 'log' / 'slurmdbd.log'}",
        f"PidFile={root / 'slurmdbd.pid'}", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
        f"StoragePort={ports['db']}", f"StorageUser={DB_USER}", f"StoragePass={DB_PASSWORD}",
        "StorageLoc=slurm_acct_db", "",
    ]))
    dbd.chmod(0o600)  # slurmdbd refuses a readable password file
    (root / "slurm.conf").write_text("\n".join([
        f"ClusterName={CLUSTER}", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ports['ctld']}",
        f"SlurmdPort={ports['slurmd']}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", f"AuthInfo=socket={sock}", "CredType=cred/munge",
        f"StateSaveLocation={root / 'state'}", f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}", f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        # no cgroups in a container: processes tracked by their parent chain, no task binding
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "SchedulerType=sched/backfill",
        "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={ports['dbd']}", f"AccountingStoragePass={sock}",  # the munge socket, for slurmdbd
        "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none", "MpiDefault=none",
        "ReturnToService=2", "MinJobAge=600", "KillWait=5", "InactiveLimit=0", "SlurmctldTimeout=30",
        "SlurmdTimeout=30", "SchedulerParameters=sched_interval=2", "JobRequeue=1",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP", "",
    ]))


def start(root: Path = DEFAULT_ROOT) -> Cluster:
    """Stop what an earlier start left, then start the five daemons afresh under ``root``; a
    RuntimeError names the daemon that did not come up (and its log's last lines)."""
    stop(root)
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("munge", "db", "state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    cluster = Cluster(root)
    env, log = cluster.env, root / "log"
    ports = {name: _free_port() for name in ("db", "dbd", "ctld", "slurmd")}
    _write_configs(root, ports)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    subprocess.run(["munged", "--force", f"--socket={root / 'munge' / 'socket'}", f"--key-file={key}",
                    f"--pid-file={root / 'munge' / 'pid'}", f"--log-file={log / 'munged.log'}",
                    f"--seed-file={root / 'munge' / 'seed'}"], env=env, check=True, capture_output=True)
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={root / 'db'}", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   env=env, check=True, capture_output=True)
    db_socket = root / "mariadb.sock"
    with open(log / "mariadb.out", "ab") as out:
        subprocess.Popen(["mariadbd", "--no-defaults", f"--datadir={root / 'db'}", f"--socket={db_socket}",
                          f"--port={ports['db']}", "--bind-address=127.0.0.1", "--user=root",
                          f"--pid-file={root / 'mariadb.pid'}", f"--log-error={log / 'mariadb.log'}"],
                         env=env, stdout=out, stderr=out, start_new_session=True)
    _wait("mariadbd", db_socket.exists, log=log / "mariadb.log")
    sql = (f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; "
           f"GRANT ALL ON *.* TO '{DB_USER}'@'127.0.0.1'; FLUSH PRIVILEGES;")
    _wait("mariadbd accepting queries", lambda: subprocess.run(
        ["mariadb", "--no-defaults", "-S", str(db_socket), "-uroot", "-e", sql], capture_output=True).returncode == 0,
        log=log / "mariadb.log")
    subprocess.run(["slurmdbd"], env=env, check=True, capture_output=True)
    _wait("slurmdbd", lambda: subprocess.run(["sacctmgr", "-n", "list", "cluster"], env=env, capture_output=True,
                                             timeout=10).returncode == 0, log=log / "slurmdbd.log")
    cluster.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
    cluster.run("sacctmgr", "-i", "add", "account", ACCOUNT)
    cluster.run("sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}")
    subprocess.run(["slurmctld"], env=env, check=True, capture_output=True)
    _wait("slurmctld", lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True).returncode == 0,
          log=log / "slurmctld.log")
    subprocess.run(["slurmd"], env=env, check=True, capture_output=True)
    _wait("slurmd", lambda: "idle" in cluster.run("sinfo", "-h", "-o", "%T", check=False), log=log / "slurmd.log")
    return cluster


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2) or args[0] not in ("start", "stop"):
        print("usage: python -m tests.slurm_cluster {start,stop} [ROOT]", file=sys.stderr)
        return 2
    root = Path(args[1]) if len(args) == 2 else DEFAULT_ROOT
    if args[0] == "stop":
        stop(root)
        return 0
    reason = unavailable()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    try:
        cluster = start(root)
    except (RuntimeError, subprocess.CalledProcessError) as err:
        stop(root)
        print(f"error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    print(f"export SLURM_CONF={cluster.conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
