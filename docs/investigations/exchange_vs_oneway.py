"""One way, both ways at once, and out of the caches: what a message costs on this host.

Issue 18's virtual-vs-wall target: the calibration's ping-pong moves one direction at a
time, while a ring's, recursive halving's and native's steps at 2 ranks exchange both
ways at once (``Sendrecv``), and a large allreduce's buffers do not fit in the caches.
Per size, 2 ranks, median over repetitions, slowest rank (µs):

- ``oneway``: half a ping-pong round trip (the calibration's t(m));
- ``x-barrier``: one ``Sendrecv`` right after a barrier (the calibration's exchange as it
  was: the barrier lets one rank out up to a latency early);
- ``x-sync``: one ``Sendrecv`` right after an 8-byte one (the calibration's exchange now);
- ``x-chain``: k ``Sendrecv`` back to back, per step (a ring's steady state);
- ``cold oneway``, ``cold x-chain``: the same with each message's bytes marching through
  128 MiB per buffer (4x this host's 32 MiB last-level cache): data from memory.

    mpiexec -n 2 python docs/investigations/exchange_vs_oneway.py     # ~5 s on 2 quiet cores
"""

import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me, peer = comm.Get_rank(), 1 - comm.Get_rank()
REGION = 128 << 20
cold_send, cold_recv = np.ones(REGION, np.uint8), np.ones(REGION, np.uint8)
warm_send, warm_recv = np.ones(64 << 20, np.uint8), np.ones(64 << 20, np.uint8)
tiny = (np.zeros(8, np.uint8), np.zeros(8, np.uint8))


def median(step, reps: int) -> float:
    """Slowest rank's median of ``step(i)``'s seconds, after 2 warm-up steps."""
    times = []
    for i in range(-2, reps):
        comm.Barrier()
        t = step(i)
        if i >= 0:
            times.append(t)
    out = np.array([np.median(times)])
    comm.Allreduce(MPI.IN_PLACE, out, MPI.MAX)
    return float(out[0])


def oneway(m: int, k: int, cold: bool):
    def step(i: int) -> float:
        off = (i * m) % (REGION - m) if cold else 0
        buf = (cold_send if cold else warm_send)[off : off + m]
        t = time.perf_counter()
        for _ in range(k):
            if me == 0:
                comm.Send(buf, peer, 1)
                comm.Recv(buf, peer, 1)
            else:
                comm.Recv(buf, peer, 1)
                comm.Send(buf, peer, 1)
        return (time.perf_counter() - t) / (2 * k)
    return step


def exchange(m: int, sync: bool):
    def step(i: int) -> float:
        if sync:
            comm.Sendrecv(tiny[0], peer, 4, tiny[1], peer, 4)
        t = time.perf_counter()
        comm.Sendrecv(warm_send[:m], peer, 2, warm_recv[:m], peer, 2)
        return time.perf_counter() - t
    return step


def chain(m: int, k: int, cold: bool):
    def step(i: int) -> float:
        t = time.perf_counter()
        for j in range(k):
            off = ((i * k + j) * m) % (REGION - m) if cold else 0
            send = (cold_send if cold else warm_send)[off : off + m]
            recv = (cold_recv if cold else warm_recv)[off : off + m]
            comm.Sendrecv(send, peer, 3, recv, peer, 3)
        return (time.perf_counter() - t) / k
    return step


for m in (2048, 65536, 1 << 20, 8 << 20, 16 << 20):
    k, reps = (8, 40) if m <= 65536 else (3, 9)
    cols = [median(oneway(m, k, False), reps), median(exchange(m, False), reps),
            median(exchange(m, True), reps), median(chain(m, k, False), reps),
            median(oneway(m, k, True), reps), median(chain(m, k, True), reps)]
    if me == 0:
        us = " ".join(f"{c * 1e6:10.1f}" for c in cols)
        if m == 2048:
            print(f"{'bytes':>9} {'oneway':>10} {'x-barrier':>10} {'x-sync':>10} {'x-chain':>10}"
                  f" {'cold 1way':>10} {'cold xchain':>10}  (us)")
        print(f"{m:>9} {us}", flush=True)
