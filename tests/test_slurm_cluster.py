"""The one-node SLURM of the cluster tests leaves nothing behind, even when a session dies."""
from __future__ import annotations

import pytest

from tests import slurm_cluster


def test_a_dead_sessions_cluster_is_stopped_and_removed_by_the_next():
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    dead = 2 ** 22 + 12345  # above pid_max's default: no live process has it
    root = slurm_cluster.test_root(dead)
    cluster = slurm_cluster.start(root)  # a session that will never stop it
    try:
        assert "idle" in cluster.run("sinfo", "-h", "-o", "%T")
        daemons = slurm_cluster._ours(root)
        assert len(daemons) >= 4  # munged, slurmdbd, slurmctld, slurmd (+ slurmstepd/scriptd)
        assert root in slurm_cluster.stop_stale_test_clusters()
        assert not [pid for pid in daemons if slurm_cluster._alive(pid)] and not root.exists()
        assert not slurm_cluster._ours(root)
    finally:
        slurm_cluster.stop(root)
