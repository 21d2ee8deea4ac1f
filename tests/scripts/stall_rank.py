"""One rank stalls before its 4th allreduce; the inspector must name it.

argv: strategy, stalled rank[, options as JSON]. A dedicated parameter server serves.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

strategy, stalled = sys.argv[1], int(sys.argv[2])
options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
rank = MPI.COMM_WORLD.Get_rank()
with mpicomm.make_reducer(strategy, **options) as r:
    if not r.is_worker:
        r.serve()
        sys.exit(0)
    buf = np.ones(1000)
    for _ in range(3):
        r.allreduce(buf)
    report(t_stall=time.time(), phase="stall")
    if rank == stalled:
        time.sleep(120)  # far past MPICOMM_STALL_ABORT_S: the job must end first
    r.allreduce(buf)
report(ok=False, error="the stalled call completed: the inspector did not end the job")
