"""A dedicated-ps job whose worker is late to close(): the server must say who it waits for."""

import sys
import time

import numpy as np
from mpi4py import MPI

import mpicomm

r = mpicomm.make_reducer("ps", comm=MPI.COMM_WORLD, dedicated=True)
if not r.is_worker:
    r.serve()
else:
    buf = np.ones(10)
    r.allreduce(buf)
    assert np.allclose(buf, MPI.COMM_WORLD.Get_size() - 1)
    time.sleep(float(sys.argv[1]))  # "forgets" close() for a while
r.close()
