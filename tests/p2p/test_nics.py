"""Interfaces per node (``--nics-per-node``): a node's ranks that cross node boundaries at once
share its interfaces under the virtual clock, as the predictor assumes for each algorithm."""

import subprocess
import sys

import pytest
from mpi_harness import run_mpi

from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions

NICS = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
import mpicomm
from mpicomm.core import clock
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.profiles import build_cluster

strategy, nics, servers = sys.argv[1], sys.argv[2], int(sys.argv[3])
nics = None if nics == "none" else int(nics)
p, n = MPI.COMM_WORLD.Get_size(), 1 << 20
opts = dict(ranks_per_node=p // 2, inter_link="20us,1GB/s", clock="virtual", compute_scale=1e-9,
            nics_per_node=nics, servers=servers)
with mpicomm.make_reducer(strategy, **opts) as r:
    x = np.random.default_rng(MPI.COMM_WORLD.Get_rank()).random(n // 4, dtype=np.float32)
    want = MPI.COMM_WORLD.allreduce(x.astype(np.float64))
    r.allreduce(x)  # agreement and plan
    t0 = clock.now()
    y = np.random.default_rng(MPI.COMM_WORLD.Get_rank()).random(n // 4, dtype=np.float32)
    r.allreduce(y)
    seconds = clock.now() - t0
cluster = build_cluster(ranks_per_node=p // 2, inter="20us,1GB/s", nics_per_node=nics,
                        gamma_s_per_byte=0.0)
predicted = cluster_time(strategy, p, n, cluster, {"servers": servers})
report(ok=bool(np.allclose(y, want, rtol=1e-5)), seconds=seconds, predicted=predicted)
"""


def run(strategy: str, nics: int | None, servers: int = 1, p: int = 4) -> dict:
    res = run_mpi(p, ["-c", NICS, strategy, str(nics).lower(), str(servers)],
                  timeout=120).expect_ok()
    assert all(r["ok"] for r in res.records), res.tail()
    return max(res.records, key=lambda r: r["seconds"])


@pytest.mark.slow
def test_ranks_that_cross_at_once_share_the_node_interface():
    """2 nodes x 2 ranks, 1 MiB over 20us,1GB/s: one NIC per node halves the bandwidth of ps
    with S = p (both ranks of a node cross at once) and leaves the ring's one boundary rank
    alone; each virtual time stays within 10% of the predictor on the same description."""
    ps_own, ps_shared = run("ps", None, servers=4), run("ps", 1, servers=4)
    ring_own, ring_shared = run("ring", None), run("ring", 1)
    assert ring_shared["seconds"] == pytest.approx(ring_own["seconds"], rel=1e-6)
    assert ps_shared["seconds"] > 1.5 * ps_own["seconds"]  # the inter-node bytes take 2x
    for rec in (ps_own, ps_shared, ring_own, ring_shared):
        assert rec["seconds"] == pytest.approx(rec["predicted"], rel=0.10)


def test_nics_per_node_is_a_checked_reducer_option():
    assert ReducerOptions(nics_per_node=2).nics_per_node == 2
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="nics_per_node must be an int >= 1"):
            ReducerOptions(nics_per_node=bad)


@pytest.mark.parametrize("flags", [["--nics-per-node", "2"], ["--compute-scale", "3"],
                                   ["--links-from", "this-machine"]])
def test_virtual_clock_flags_are_refused_under_the_wall_clock(flags):
    """Each would be silently ignored by a wall-clock run: one line, exit 2, no MPI job."""
    res = subprocess.run([sys.executable, "-m", "mpicomm", "bench", "--clock", "wall", *flags,
                          "-b", "1K", "-e", "1K"], capture_output=True, text=True, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and flags[0] in lines[0] and "--clock virtual" in lines[0]
