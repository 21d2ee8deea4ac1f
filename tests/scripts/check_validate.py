"""Rank script: with validate=True, a mismatch between two already-seen shapes is still caught."""

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

rank = MPI.COMM_WORLD.Get_rank()
r = mpicomm.make_reducer("ring", validate=True)
r.allreduce(np.ones(100))
r.allreduce(np.ones(200))
# both shapes are known on every rank; now rank 0 sends 100 while the others send 200
try:
    r.allreduce(np.ones(100 if rank == 0 else 200))
except mpicomm.MismatchError as e:
    ok = "r0:100, r1:200, r2:200" in str(e) and f"rank {rank} has" in str(e)
    report(ok=ok, error=None if ok else str(e))
else:
    report(ok=False, error="no MismatchError")
