"""Job script (plain ``python``, not ``-m mpi4py``): the reducer raises on rank 1's
communication thread at its 3rd call; ``guarded`` must end the job like any other error.

Usage: ``comm_thread_failure.py [TRACE_PATH]``.
"""

import sys

from mpi4py import MPI

from mpicomm.cli.main import guarded
from mpicomm.reducers.ring import RingReducer
from mpicomm.train import loop as T

calls = [0]
_allreduce = RingReducer._allreduce


def failing(self, flat, scale):
    calls[0] += 1
    if MPI.COMM_WORLD.Get_rank() == 1 and calls[0] == 3:
        raise OSError("injected failure in the reduction")
    return _allreduce(self, flat, scale)


RingReducer._allreduce = failing
cfg = T.TrainConfig(strategy="ring", layers=(16, 32, 32, 4), steps=5, batch_size=8,
                    train_samples=256, test_samples=32, eval_samples=32, log_every=0,
                    bucket_mb=0.0, overlap=True, trace=sys.argv[1] if len(sys.argv) > 1 else None)
guarded(T.run_training, cfg, verbose=False)
