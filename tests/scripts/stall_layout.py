"""Rank 1 diverges onto a new layout at call 3 while the others take a planned one (hot path).

Usage: ``stall_layout.py`` (3 ranks, MPICOMM_STALL_WARN_S / _ABORT_S set by the test). Every
rank is then inside call 3: rank 1 in the layout agreement, the others in the ring.
"""

import numpy as np
from mpi4py import MPI

import mpicomm

comm = MPI.COMM_WORLD
r = mpicomm.make_reducer("ring")
a, b = np.ones(10, dtype=np.float32), np.ones(12, dtype=np.float32)
r.allreduce(a)
r.allreduce(b)  # both layouts planned on every rank
r.allreduce(np.ones(14, dtype=np.float32) if comm.Get_rank() == 1 else a)  # call 3
