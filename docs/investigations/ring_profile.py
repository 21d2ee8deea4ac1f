"""Profile one strategy's allreduce at a few sizes against native (2+ ranks).

    mpiexec -n 2 python docs/investigations/ring_profile.py ring 4K,16M,64M

Prints the median seconds per call of the slowest rank for the strategy, for
native, and for a bare Sendrecv+np.add ring (the floor a Python ring can reach).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

import mpicomm


def parse_size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)


def timed(comm: MPI.Comm, fn, iters: int) -> float:
    for _ in range(3):
        fn()
    times = np.empty(iters)
    comm.Barrier()
    for i in range(iters):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    comm.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
    return float(np.median(times))


def bare_ring(comm: MPI.Comm, a: np.ndarray):
    """Two-rank ring with nothing but Sendrecv and np.add on preallocated views."""
    r = comm.rank
    h = a.size // 2
    tmp = np.empty(h, a.dtype)
    mine, other = a[r * h : (r + 1) * h], a[(1 - r) * h : (2 - r) * h]

    def run():
        comm.Sendrecv(other, 1 - r, 0, tmp, 1 - r, 0)
        np.add(mine, tmp, out=mine)
        comm.Sendrecv(mine, 1 - r, 1, other, 1 - r, 1)

    return run


def main() -> None:
    comm = MPI.COMM_WORLD
    name = sys.argv[1] if len(sys.argv) > 1 else "ring"
    sizes = [parse_size(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "4K,16M,64M").split(",")]
    red = mpicomm.make_reducer(name)
    nat = mpicomm.make_reducer("native")
    for nbytes in sizes:
        a = np.zeros(nbytes // 4, np.float32)
        iters = 2000 if nbytes < 1 << 20 else 30
        row = {}
        for rep in range(2):  # interleave: strategy, native, again
            row[f"{name}{rep}"] = timed(comm, lambda a=a: red.allreduce(a), iters)
            row[f"native{rep}"] = timed(comm, lambda a=a: nat.allreduce(a), iters)
            if comm.size == 2:
                row[f"bare{rep}"] = timed(comm, bare_ring(comm, a), iters)
        if comm.rank == 0:
            print(nbytes, "  ".join(f"{k} {v * 1e6:9.1f}us" for k, v in row.items()), flush=True)


main()
