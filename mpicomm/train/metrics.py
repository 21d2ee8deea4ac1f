"""Cross-rank aggregation of run metrics (the training loop's only MPI, outside its reducer).

Called a handful of times per run — at set-up and after the loop — never per
step. Buffer (capitalised) mpi4py methods only; every function is collective
over ``comm`` and returns the same answer on every rank.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from mpicomm import p2p

__all__ = [
    "first_failure",
    "max_over_ranks",
    "sum_over_ranks",
    "gather_rows",
    "barrier",
    "quiet_barrier",
    "solo_comm",
    "world",
    "workers_only",
    "free",
]


def world() -> MPI.Comm:
    """Return ``MPI.COMM_WORLD`` (the communicator a run spans by default)."""
    return MPI.COMM_WORLD


def solo_comm() -> MPI.Comm:
    """Return ``MPI.COMM_SELF``, for a 1-worker baseline run on one rank."""
    return MPI.COMM_SELF


def first_failure(comm: MPI.Comm, failed: bool) -> int:
    """Return the lowest rank that reports ``failed``, or -1 if none did.

    Lets every rank learn about a set-up error on any rank, so all of them can
    stop cleanly instead of some waiting in a collective forever.
    """
    mine = np.array([comm.Get_rank() if failed else comm.Get_size()], dtype=np.int64)
    lowest = np.empty_like(mine)
    comm.Allreduce(mine, lowest, MPI.MIN)
    return -1 if lowest[0] == comm.Get_size() else int(lowest[0])


def max_over_ranks(comm: MPI.Comm, values: np.ndarray) -> np.ndarray:
    """Return the element-wise maximum of a float64 array (same length on every rank)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty_like(values)
    comm.Allreduce(values, out, MPI.MAX)
    return out


def sum_over_ranks(comm: MPI.Comm, values: np.ndarray) -> np.ndarray:
    """Return the element-wise sum of a float64 array (same length on every rank)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty_like(values)
    comm.Allreduce(values, out, MPI.SUM)
    return out


def gather_rows(comm: MPI.Comm, values: np.ndarray) -> np.ndarray:
    """Return a (ranks, k) float64 array whose row r is rank r's ``values`` (length k)."""
    values = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    out = np.empty((comm.Get_size(), values.size), dtype=np.float64)
    comm.Allgather(values, out)
    return out


def workers_only(comm: MPI.Comm, is_worker: bool, workers: int) -> MPI.Comm:
    """Return a communicator of the ``workers`` workers of ``comm`` (``MPI.COMM_NULL`` on a
    server): ``comm`` itself when every rank is one, else a ``Split`` (collective)."""
    if workers == comm.Get_size():
        return comm
    return comm.Split(0 if is_worker else MPI.UNDEFINED, comm.Get_rank())


def free(comm: MPI.Comm, unless: MPI.Comm) -> None:
    """Free ``comm`` (made by ``workers_only``) unless it is ``unless`` or ``MPI.COMM_NULL``."""
    if comm is not unless and comm != MPI.COMM_NULL:
        comm.Free()


def barrier(comm: MPI.Comm) -> None:
    """Wait for every rank (one common start: the ranks' clocks are read just after);
    under the virtual clock every rank leaves at the latest virtual time."""
    p2p.barrier(comm)


def quiet_barrier(comm: MPI.Comm, poll_seconds: float = 0.002) -> None:
    """Barrier that sleeps while it waits, so waiting ranks leave the CPU to a running one.

    A plain ``Barrier`` spins in MPICH and would steal cores from the rank that
    is running alone (the 1-worker baseline) on an oversubscribed host.
    """
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll_seconds)

