"""A slow but healthy call: every ring step takes 0.4 s on an emulated link, so each call
lasts about 1.6 s, past the warning time of 1 s, while every rank keeps moving.

argv: calls. Reports the sum's error and the wall time of each call.
"""

import sys
import time

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

calls = int(sys.argv[1])
comm = MPI.COMM_WORLD
p = comm.Get_size()
rng = np.random.default_rng(comm.Get_rank())
# 2(p-1) steps of n/p values each: at 1 MB/s a 0.4 MB chunk is 0.4 s
data = rng.standard_normal(p * 100_001).astype(np.float32)  # odd: chunks of unequal length
expected = comm.allreduce(data.astype(np.float64), op=MPI.SUM)
seconds, error = [], 0.0
with mpicomm.make_reducer("ring", ranks_per_node=1, inter_link="1ms,1MB/s") as r:
    for _ in range(calls):
        buf = data.copy()
        t0 = time.perf_counter()
        r.allreduce(buf)
        seconds.append(time.perf_counter() - t0)
        error = max(error, float(np.max(np.abs(buf - expected))))
report(ok=True, error=error, seconds=seconds)
