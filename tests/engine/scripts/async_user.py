"""Rank script: the public non-blocking form. Several buffers in flight at once, computed on
meanwhile, each equal to the NumPy sum; an error on the communication thread comes back from
``wait()`` naming the rank, and every later call fails too."""

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.engine import AsyncReducer, CommThreadError

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
problems = []
for strategy in ("ring", "native", "recursive_doubling"):
    r = mpicomm.make_reducer(strategy)  # (a context manager once branch p2p is merged)
    with AsyncReducer(r) as ar:
        sizes = (1, 7, 1001, 65537)
        bufs = [np.random.default_rng([rank, n]).standard_normal(n) for n in sizes]
        want = [sum(np.random.default_rng([q, n]).standard_normal(n) for q in range(size))
                for n in sizes]
        works = [ar.allreduce_async(b, "sum") for b in bufs]
        busy = np.linalg.norm(np.ones((300, 300)) @ np.ones((300, 300)))  # compute meanwhile
        for n, w, b, ref in zip(sizes, works, bufs, want, strict=True):
            if w.wait() is not b or not np.allclose(b, ref, rtol=1e-12, atol=1e-12):
                problems.append(f"{strategy} n={n}: wrong sum")
            if not w.done() or w.seconds < 0:
                problems.append(f"{strategy} n={n}: done/seconds wrong")
        bad = ar.allreduce_async(np.zeros(3), "max")  # unknown op: raises in the thread
        try:
            bad.wait()
            problems.append(f"{strategy}: bad op did not raise")
        except CommThreadError as exc:
            if f"rank {rank}: communication thread: ValueError" not in str(exc):
                problems.append(f"{strategy}: message {exc}")
        try:
            ar.allreduce_async(np.zeros(3), "sum").wait()
            problems.append(f"{strategy}: a call after a failure succeeded")
        except CommThreadError:
            pass
    r.close()
report(ok=not problems, problems=problems)
