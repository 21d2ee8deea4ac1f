"""Cost of writing a buffer that another rank has just read through MPI (2 ranks).

    mpiexec -n 2 python docs/investigations/coherence.py 1 8      # sizes in MiB

Each step: both ranks ``Sendrecv`` a buffer (the peer reads it, CMA single copy),
then time ``buf.fill`` twice. The first write must take the cache lines back
from the peer's core; the second finds them at home. Every in-place allreduce
step pays the first kind — this is why the cost model measures γ right after
an exchange (``costmodel.exchange``) rather than on private data.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI


def main() -> None:
    comm = MPI.COMM_WORLD.Dup()
    peer = 1 - comm.Get_rank()
    for mib in [int(x) for x in (sys.argv[1:] or ["1", "8"])]:
        buf = np.ones(mib << 18, np.float32)
        got = np.ones_like(buf)
        first, second = [], []
        for i in range(12):
            comm.Barrier()
            comm.Sendrecv(buf, peer, 1, got, peer, 1)  # the peer reads buf
            comm.Barrier()
            t0 = time.perf_counter()
            buf.fill(2.0)
            t1 = time.perf_counter()
            buf.fill(3.0)
            t2 = time.perf_counter()
            if i >= 2:
                first.append(t1 - t0)
                second.append(t2 - t1)
        a, b = np.median(first) * 1e6, np.median(second) * 1e6
        print(f"rank {comm.Get_rank()} {mib} MiB: write after the peer read it {a:.0f} us, "
              f"write again {b:.0f} us ({a / b:.1f}x)", flush=True)


main()
