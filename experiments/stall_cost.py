"""Stall inspector cost when nothing stalls: 4 KiB allreduce, inspector on vs off, alternating.

    mpiexec -n 4 python -m mpi4py experiments/stall_cost.py [strategy] [rounds] [calls]

Each round times ``calls`` allreduces of 4 KiB (512 float64) with the inspector's
per-call bookkeeping on, then off (``stall.set_enabled``), and so on: a burst of
load on a shared host hits both alike. Prints the median µs per call of each and
the difference. The watchdog thread runs in both halves (one Iprobe per second).
"""

import sys
import time

import numpy as np
from mpi4py import MPI

import mpicomm
from mpicomm.p2p import stall

strategy = sys.argv[1] if len(sys.argv) > 1 else "ring"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 500
comm = MPI.COMM_WORLD
buf = np.ones(512)
times = {True: [], False: []}
with mpicomm.make_reducer(strategy) as r:
    for _ in range(50):
        r.allreduce(buf)
    for i in range(2 * rounds):
        on = i % 2 == 0
        stall.set_enabled(on)
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            r.allreduce(buf)
        dt = np.array([(time.perf_counter() - t0) / calls])
        comm.Allreduce(MPI.IN_PLACE, dt, MPI.MAX)
        times[on].append(dt[0])
if comm.Get_rank() == 0:
    on, off = (1e6 * float(np.median(times[k])) for k in (True, False))
    print(f"{strategy}, {comm.Get_size()} ranks, 4 KiB, {rounds} rounds x {calls} calls: "
          f"inspector on {on:.2f} us/call, off {off:.2f} us/call, "
          f"difference {on - off:+.2f} us ({100 * (on - off) / off:+.1f}%)")
