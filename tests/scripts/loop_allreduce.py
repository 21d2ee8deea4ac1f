"""Rank script: allreduce over and over (at most SECONDS) with STRATEGY; report ``started``
(with this rank's host and process id) after the first call, ``ok`` at the end. For killing
a host under a running job."""

import os
import sys
import time

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

strategy, seconds = sys.argv[1], float(sys.argv[2])
buf = np.ones(1 << 16, dtype=np.float32)
with mpicomm.make_reducer(strategy) as reducer:
    reducer.allreduce(buf)
    report(started=True, host=MPI.Get_processor_name(), pid=os.getpid())
    t_end = time.monotonic() + seconds
    calls = 1
    while time.monotonic() < t_end:
        buf[:] = 1
        reducer.allreduce(buf)
        calls += 1
report(ok=True, calls=calls)
