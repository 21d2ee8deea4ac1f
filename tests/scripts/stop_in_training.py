"""Job script: ``train`` with ARGS, where rank STOPPED stops itself (``SIGSTOP``, as
``kill -STOP`` would) at its STEP-th training step; the stall watchdog must end the job.

Usage: ``stop_in_training.py STOPPED STEP ARGS...``. The step is counted where every engine
and layout passes once per step: ``Delays.sleep`` (the data-parallel loop) and
``SGD.update`` (the pipeline and tensor loop; a data-parallel step calls it per bucket).
Before stopping, the rank prints ``stopping rank R at T`` (``time.time()``).
"""

import os
import signal
import sys
import time

from mpi4py import MPI

from mpicomm.cli.main import main
from mpicomm.train import sgd, straggle

stopped, at = int(sys.argv[1]), int(sys.argv[2])
rank = MPI.COMM_WORLD.Get_rank()
seen = [0]


def counting(fn):
    def wrapped(*args, **kwargs):
        seen[0] += 1
        if rank == stopped and seen[0] == at:
            print(f"stopping rank {rank} at {time.time():.3f}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        return fn(*args, **kwargs)
    return wrapped


straggle.Delays.sleep = counting(straggle.Delays.sleep)
sgd.SGD.update = counting(sgd.SGD.update)
sys.exit(main(["train", *sys.argv[3:]]))
