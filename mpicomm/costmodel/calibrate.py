"""A small calibration of α, β(m) and γ(m) between two ranks, over MPI.

The primitives every measurement of the cost model uses (``pingpong``,
``exchange``, ``measure_gamma``), and ``quick_params``: the few-millisecond
calibration ``auto`` runs at construction. The full measurement behind
``python -m mpicomm model`` lives with the benchmark (``mpicomm.bench.measure``).
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from mpicomm.costmodel.formulas import LinkModel, ModelParams

__all__ = ["pingpong", "exchange", "measure_gamma", "quick_params"]


def _iters(m: int, scale: float = 1.0) -> int:
    return max(3, int(scale * (300 if m <= 1 << 16 else 60 if m <= 1 << 20 else 12)))


def pingpong(comm: MPI.Comm, a: int, b: int, sizes: list[int], scale: float = 1.0) -> list[float]:
    """Half round-trip seconds (median) of ``sizes`` bytes between ranks a and b; collective.

    Other ranks wait. ``scale`` multiplies the repetitions. Returns the times on every rank.
    """
    me = comm.Get_rank()
    buf = np.zeros(max(sizes), dtype=np.uint8)
    out = np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        view = buf[:m]
        iters = _iters(m, scale)
        times = np.empty(iters)
        comm.Barrier()
        if me in (a, b):
            other = b if me == a else a
            for i in range(-3, iters):  # 3 warm-up round trips
                t0 = time.perf_counter()
                if me == a:
                    comm.Send(view, other, 7)
                    comm.Recv(view, other, 7)
                else:
                    comm.Recv(view, other, 7)
                    comm.Send(view, other, 7)
                if i >= 0:
                    times[i] = time.perf_counter() - t0
            out[k] = float(np.median(times)) / 2
    comm.Bcast(out, root=a)
    return [float(x) for x in out]


def exchange(comm: MPI.Comm, a: int, b: int, sizes: list[int],
             scale: float = 1.0) -> tuple[list[float], list[float]]:
    """Time a ring step between ranks a and b: swap m bytes, then add in place; collective.

    Two float32 buffers per rank take turns: step i sends one and receives into
    the other (which the peer read in step i-1), then adds the received values
    into the buffer just sent. So, as in every allreduce step, the receive and
    the add write memory the peer has just read (and the caches must hand it
    back). A barrier starts each step, so neither rank waits on the other's add.

    Returns (exchange seconds, add seconds per byte) per size, slowest of the two
    ranks per step, median over steps; on every rank.
    """
    me = comm.Get_rank()
    n_max = max(max(sizes) // 4, 1)
    bufs = (np.ones(n_max, dtype=np.float32), np.ones(n_max, dtype=np.float32))
    swap, add = np.zeros(len(sizes)), np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        n = max(m // 4, 1)
        iters = _iters(m, scale)
        t = np.zeros((2, iters))
        for i in range(-3, iters):
            comm.Barrier()
            if me not in (a, b):
                continue
            peer = b if me == a else a
            send, recv = bufs[i % 2][:n], bufs[(i + 1) % 2][:n]
            t0 = time.perf_counter()
            comm.Sendrecv(send, peer, 8, recv, peer, 8)
            t1 = time.perf_counter()
            np.add(send, recv, out=send)
            if i >= 0:
                t[:, i] = (t1 - t0, (time.perf_counter() - t1) / (4 * n))
        comm.Allreduce(MPI.IN_PLACE, t, MPI.MAX)
        swap[k], add[k] = np.median(t, axis=1)
        for buf in bufs:  # keep the values small
            buf[:n] = 1.0
    return [float(x) for x in swap], [float(x) for x in add]


def measure_gamma(comm: MPI.Comm, sizes: list[int], scale: float = 1.0) -> list[float]:
    """Seconds per byte of ``np.add(a, b, out=a)`` on float32 arrays of each size; collective.

    All ranks add at once; the slowest rank's median counts.
    """
    a = np.ones(max(max(sizes) // 4, 1), dtype=np.float32)
    b = np.ones_like(a)
    out = np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        x, y = a[: max(m // 4, 1)], b[: max(m // 4, 1)]
        iters = _iters(m, scale)
        times = np.empty(iters)
        comm.Barrier()
        for i in range(-3, iters):
            t0 = time.perf_counter()
            np.add(x, y, out=x)
            if i >= 0:
                times[i] = time.perf_counter() - t0
        out[k] = float(np.median(times)) / x.nbytes
    comm.Allreduce(MPI.IN_PLACE, out, MPI.MAX)
    return [float(v) for v in out]


def quick_params(comm: MPI.Comm, sizes=(8, 512, 4096, 32768, 262144, 1 << 20, 4 << 20),
                 scale: float = 0.3) -> ModelParams:
    """A few-millisecond calibration for ``auto``: ranks 0 and p-1, ping-pong and exchange."""
    sizes = list(sizes)
    p = comm.Get_size()
    if p == 1:
        zeros = [0.0] * len(sizes)
        return ModelParams(LinkModel(0.0, sizes, zeros), LinkModel(0.0, sizes, zeros), sizes,
                           zeros)
    swaps, gamma = exchange(comm, 0, p - 1, sizes, scale)
    link = LinkModel.from_pingpong(sizes, pingpong(comm, 0, p - 1, sizes, scale), (0, p - 1),
                                   swaps)
    return ModelParams(link, link, sizes, gamma)
