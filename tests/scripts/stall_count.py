"""One rank is late for the 2nd ring call (asleep, or its whole process stopped) for 4 s;
the others wait in the call past the warning time (1 s), then every call completes.

argv: late rank, "sleep" | "stop". Reports how many questions each rank's watchdog answered.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

late, how = int(sys.argv[1]), sys.argv[2]
rank = MPI.COMM_WORLD.Get_rank()
buf = np.ones(1001, dtype=np.float32)
with mpicomm.make_reducer("ring") as r:
    r.allreduce(buf)
    if rank == late:
        if how == "stop":  # no thread of it answers: as a rank descheduled or swapped out
            subprocess.Popen(["sh", "-c", f"sleep 4; kill -CONT {os.getpid()}"])
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            time.sleep(4)
    r.allreduce(buf)
    r.allreduce(buf)
    ok = bool(np.all(buf == MPI.COMM_WORLD.Get_size() ** 3))
    report(ok=ok, answered=r.stall_channel.answered)
