"""What the virtual clock charges a reducer call as compute, and how often it reads the CPU clock.

With links of (almost) zero time, a 2-rank virtual bench call's time is the compute charged:
the reducer's own CPU time per call (its Python, the transport's calls) — what issue 18's
virtual-vs-wall target needs to be the wall clock's hot path, not the clock's own cost.

    mpiexec -n 2 python docs/investigations/clock_charges.py [--sizes 4096,65536] [--calls 200]

Prints per strategy and size: the median virtual µs per call (slowest rank) and the CPU-clock
reads (``time.thread_time``) per call on rank 0.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

from mpicomm.core import clock
from mpicomm.p2p import virtual
from mpicomm.reducers import make_reducer

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--sizes", default="4096,65536")
ap.add_argument("--calls", type=int, default=200)
ap.add_argument("--strategies", default="native,ring,ps")
args = ap.parse_args()
comm = MPI.COMM_WORLD
reads = [0]
read = time.thread_time


def counted() -> float:
    reads[0] += 1
    return read()


for name in args.strategies.split(","):
    r = make_reducer(name, comm, clock="virtual", intra_link="0.001us,1000000GB/s")
    for nbytes in (int(s) for s in args.sizes.split(",")):
        buf = np.zeros(nbytes // 4, np.float32)
        for _ in range(20):  # warm-up: the layout's plan, the least times
            r.allreduce(buf)
        times = np.zeros(args.calls)
        before = reads[0]
        time.thread_time = counted
        for i in range(args.calls):
            virtual.barrier(comm)
            t0 = clock.now()
            r.allreduce(buf)
            times[i] = clock.now() - t0
        time.thread_time = read
        per_call = (reads[0] - before) / args.calls
        comm.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
        if comm.Get_rank() == 0:
            print(f"{name:>7} {nbytes:>8} B  {np.median(times) * 1e6:8.2f} us charged a call, "
                  f"{per_call:.0f} CPU-clock reads a call (incl. the barrier's)", flush=True)
    r.close()
