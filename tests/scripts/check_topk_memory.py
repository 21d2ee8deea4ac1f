"""Rank script: N calls of ps + topk:0.01 on fresh buffers grow RSS by less than 20 MB
(residuals are keyed by layout or bucket id, not by buffer address). Reports grown_mb."""

import resource
import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


calls = int(sys.argv[1])
me = MPI.COMM_WORLD.Get_rank()
with mpicomm.make_reducer("ps", compress="topk:0.01", servers=2) as r:
    for _ in range(20):  # warm: scratch and plans reach their size
        r.allreduce(np.random.default_rng(me).standard_normal(25_000).astype(np.float32))
    before = rss_mb()
    for i in range(calls):
        buf = np.random.default_rng([me, i]).standard_normal(25_000).astype(np.float32)
        r.allreduce(buf)
    grown = rss_mb() - before
report(ok=grown < 20, grown_mb=round(grown, 2), error=None if grown < 20 else f"{grown} MB")
