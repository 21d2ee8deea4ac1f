"""A small calibration of α, β(m) and γ(m) between two ranks, over MPI.

The primitives every measurement of the cost model uses (``pingpong``,
``exchange``, ``measure_gamma``), and ``quick_params``: the few-millisecond
calibration ``auto`` runs at construction. The full measurement behind
``python -m mpicomm model`` is ``mpicomm.costmodel.measure``.

``host_links`` reads such a measurement back (a ``model --json`` file) as
``MeasuredLink``s: this host's links, per message size, for the virtual clock
(``--links-from``), so a virtual run can be held against the wall clock here.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from mpicomm.core.errors import ConfigError
from mpicomm.core.inputs import check_link_table
from mpicomm.costmodel.formulas import LinkModel, ModelParams, fit_alpha_beta
from mpicomm.costmodel.native import SHORT_BYTES

__all__ = ["pingpong", "exchange", "measure_gamma", "quick_params", "MeasuredLink",
           "host_links", "HOST", "HOST_PARAMS_PATHS", "cache_bytes", "cold_bytes",
           "fresh_seconds", "MMAP_MAX", "measured_collective_seconds", "crossing_seconds",
           "interfaces", "cpu_share", "cpu_share_measured", "burst", "stream", "TokenBucket",
           "bucket_fit", "sustained"]

CACHE_BYTES = 32 << 20  # the last-level cache when the host does not say (sysfs)
# glibc's largest dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): a malloc
# above it is a fresh mapping every time, its pages faulted in on first touch
MMAP_MAX = 32 << 20


# seconds one size's repetitions may take: the counts of ``_iters`` fit it on this host's own
# quiet links (300 round trips of 64 KiB in ~10 ms), while across an 800 Mbit/s link (1.4 s a
# round trip of 64 MiB), or with a barrier per step among 4 ranks at load 30, the calibration
# took 4.5-6 minutes: there the count follows the first (probe) step's time
SIZE_BUDGET_S = 0.2
# past the budget, two timed repetitions this close (max/min - 1) stand for their size; the
# median of DISAGREE_TIMED otherwise: across an 800 Mbit/s link the large sizes' round trips
# agree to ~1%, and each one more costs 1.4 s at 64 MiB, but an exchange (both ranks of a pair
# sending at once over MPICH's one TCP connection) took 1x or 2x the line time from one
# repetition to the next (16 MiB: 363, 397, 188, 361, 354 ms), and a median of three could
# stand for either (hierarchical at 64 MiB: 0.67 against 0.99 of the wall, issue 33)
SPREAD = 0.05
DISAGREE_TIMED = 5


def _iters(m: int, scale: float = 1.0) -> int:
    return max(3, int(scale * (300 if m <= 1 << 16 else 60 if m <= 1 << 20 else 12)))


STOP, WARM, TIMED = 0, 1, 2  # what the next repetition of a size is (a tells the others)


class _Pacer:
    """Rank a's count of one size's repetitions: up to 3 warm-ups, then up to ``_iters``
    timed ones, fewer past ``SIZE_BUDGET_S`` (a quarter of it for the warm-ups): at least 2
    timed, ``DISAGREE_TIMED`` (their median) unless those two agree within ``SPREAD``.
    ``next(last, seconds)`` says what the next repetition is (``seconds``: the one just done).

    ``expect``: the seconds a repetition of this size should take (the previous size's
    scaled by the sizes), when known; past a quarter of the budget the warm-ups are skipped:
    the size before has just warmed the path (connection, protocol, pages: the buffers are
    written before the first size), and one warm-up of 64 MiB across the link cost 1.4 s.
    ``first``: what the first repetition is (WARM, or TIMED when warm-ups are skipped)."""

    def __init__(self, m: int, scale: float, expect: float = 0.0) -> None:
        self.iters, self.warm, self.times = _iters(m, scale), 0, []
        self.first = TIMED if expect > SIZE_BUDGET_S / 4 else WARM
        self.t0 = time.perf_counter()

    def next(self, last: int, seconds: float = 0.0) -> int:
        self.warm += last == WARM
        if last == TIMED:
            self.times.append(seconds)
        timed, spent = len(self.times), time.perf_counter() - self.t0
        if last == WARM and self.warm < 3 and spent < SIZE_BUDGET_S / 4:
            return WARM
        if timed < 2 or (timed < self.iters and spent < SIZE_BUDGET_S):
            return TIMED
        if timed < DISAGREE_TIMED and max(self.times[:2]) > (1 + SPREAD) * min(self.times[:2]):
            return TIMED
        return STOP


def _expect(sizes: list[int], k: int, seconds: list[float]) -> float:
    """A repetition's expected seconds at ``sizes[k]``: the previous size's, scaled by size."""
    return seconds[k - 1] * sizes[k] / sizes[k - 1] if k and seconds[k - 1] > 0 else 0.0


def cache_bytes() -> int:
    """This host's last-level cache in bytes (Linux sysfs, the highest level cpu0 sees)."""
    best = (0, 0)
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit() and level >= best[0]:
            best = (level, int(digits) * unit)
    return best[1] or CACHE_BYTES


def cold_bytes() -> int:
    """Bytes a cold measurement marches through per buffer: 4x the last-level cache, so a
    line comes back only after 4 caches' worth of other data (out of any cache)."""
    return 4 * cache_bytes()


class _March:
    """Views of a region that move on by their own length each time (``take``): data last
    touched a region's worth of traffic ago — out of the caches when the region is."""

    def __init__(self, nbytes: int, dtype=np.uint8) -> None:
        self.buf = np.ones(max(nbytes // np.dtype(dtype).itemsize, 1), dtype=dtype)
        self.at = 0

    def take(self, n: int) -> np.ndarray:
        if self.at + n > self.buf.size:
            self.at = 0
        view = self.buf[self.at : self.at + n]
        self.at += n
        return view


def pingpong(comm: MPI.Comm, a: int, b: int, sizes: list[int], scale: float = 1.0,
             cold: int = 0) -> list[float]:
    """Half round-trip seconds (median) of ``sizes`` bytes between ranks a and b; collective.

    Other ranks wait. ``scale`` multiplies the repetitions. ``cold`` > 0: each round trip
    sends from (and receives into) the next m bytes of a region of ``cold`` + max(sizes)
    bytes (``_March``), so the data comes from memory, not from a cache. Returns the
    times on every rank.
    """
    me = comm.Get_rank()
    march = _March(cold + max(sizes)) if cold and me in (a, b) else None
    buf = np.ones(max(sizes) if march is None else 1, dtype=np.uint8)  # written: no page faults
    out, rep = np.zeros(len(sizes)), np.zeros(len(sizes))
    what = np.zeros(1, dtype=np.int64)
    other = b if me == a else a
    for k, m in enumerate(sizes):
        comm.Barrier()
        if me not in (a, b):
            continue
        pacer = _Pacer(m, scale, _expect(sizes, k, rep)) if me == a else None
        what[0] = pacer.first if pacer is not None else WARM  # b needs only "not STOP"
        while what[0] != STOP:
            view = buf[:m] if march is None else march.take(m)
            t0 = time.perf_counter()
            if me == a:
                comm.Send(view, other, 7)
                comm.Recv(view, other, 7)
            else:
                comm.Recv(view, other, 7)
                comm.Send(view, other, 7)
            took = time.perf_counter() - t0
            if me == a:  # the next repetition, outside the timed part
                what[0] = pacer.next(int(what[0]), took)
                comm.Send(what, other, 6)
            else:
                comm.Recv(what, other, 6)
        if me == a:
            rep[k] = float(np.median(pacer.times))
            out[k] = rep[k] / 2
    comm.Bcast(out, root=a)
    return [float(x) for x in out]


def exchange(comm: MPI.Comm, a: int, b: int, sizes: list[int],
             scale: float = 1.0, cold: int = 0) -> tuple[list[float], list[float]]:
    """Time a ring step between ranks a and b: swap m bytes, then add in place; collective.

    Two float32 buffers per rank take turns: step i sends one and receives into
    the other (which the peer read in step i-1), then adds the received values
    into the buffer just sent. So, as in every allreduce step, the receive and
    the add write memory the peer has just read (and the caches must hand it
    back). A barrier starts each step, so neither rank waits on the other's add, then an
    8-byte exchange lines the two ranks up (a barrier lets one rank out up to a message's
    latency before the other, ~1 us here, which the timed exchange would absorb): the
    step is timed as it runs in an allreduce, right after the previous one.

    ``cold`` > 0: each step's two buffers are the next m bytes of two regions of
    ``cold`` + max(sizes) bytes (``_March``): data from memory, as in an allreduce
    whose buffers do not fit in the caches.

    Returns (exchange seconds, add seconds per byte) per size, slowest of the two
    ranks per step, median over steps; on every rank.
    """
    me = comm.Get_rank()
    n_max = max(max(sizes) // 4, 1)
    cold_n = (cold // 4 + n_max) if cold and me in (a, b) else 0
    marches = (_March(4 * cold_n, np.float32), _March(4 * cold_n, np.float32)) if cold_n else None
    bufs = (np.ones(n_max if not cold_n else 1, dtype=np.float32),
            np.ones(n_max if not cold_n else 1, dtype=np.float32))
    swap, add, rep = np.zeros(len(sizes)), np.zeros(len(sizes)), np.zeros(len(sizes))
    line_up = (np.zeros(1), np.zeros(1))
    what = np.zeros(1, dtype=np.int64)

    def step(i: int, n: int) -> tuple[float, float]:
        """One step of a and b: line up, swap (timed), add (timed per byte)."""
        peer = b if me == a else a
        send, recv = bufs[i % 2][:n], bufs[(i + 1) % 2][:n]
        if marches is not None:
            send, recv = marches[0].take(n), marches[1].take(n)
        comm.Sendrecv(line_up[0], peer, 9, line_up[1], peer, 9)
        t0 = time.perf_counter()
        comm.Sendrecv(send, peer, 8, recv, peer, 8)
        t1 = time.perf_counter()
        np.add(send, recv, out=send)
        return t1 - t0, (time.perf_counter() - t1) / (4 * n)

    for k, m in enumerate(sizes):
        n = max(m // 4, 1)
        pacer = _Pacer(m, scale, _expect(sizes, k, rep)) if me == a else None
        t, i = [], 0
        if pacer is not None:
            what[0] = pacer.first
        while True:
            comm.Bcast(what, root=a)  # as a barrier: every rank learns the next step from a
            if what[0] == STOP:
                break
            if me in (a, b):
                times = step(i, n)
                i += 1
                if what[0] == TIMED:
                    t.append(times)
            if me == a:
                what[0] = pacer.next(int(what[0]), times[0])
        t = np.array(t if t else [(0.0, 0.0)]).T.copy()
        counts = np.array([t.shape[1]])
        comm.Bcast(counts, root=a)
        if t.shape[1] != counts[0]:  # ranks outside the pair timed nothing
            t = np.zeros((2, int(counts[0])))
        comm.Allreduce(MPI.IN_PLACE, t, MPI.MAX)
        swap[k], add[k] = np.median(t, axis=1)
        rep[k] = swap[k]
        for buf in bufs:  # keep the values small (marching data is added to a few times only)
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


def fresh_seconds(comm: MPI.Comm, nbytes: int = 2 * MMAP_MAX, repeats: int = 3) -> float:
    """Seconds per byte that writing freshly mapped memory costs beyond writing mapped memory
    (the page faults); collective: all ranks at once, the slowest rank's least of
    ``repeats`` (a ``malloc`` above ``MMAP_MAX`` is a fresh mapping each time)."""
    best = float("inf")
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        fresh = np.empty(nbytes, dtype=np.uint8)
        fresh.fill(1)
        t1 = time.perf_counter()
        fresh.fill(2)
        t2 = time.perf_counter()
        del fresh
        best = min(best, ((t1 - t0) - (t2 - t1)) / nbytes)
    out = np.array([max(best, 0.0)])
    comm.Allreduce(MPI.IN_PLACE, out, MPI.MAX)
    return float(out[0])


def crossing_seconds(comm: MPI.Comm, pairs: list[tuple[int, int]], m: int,
                     repeats: int = 3) -> float:
    """Seconds for every pair (a, b) of ``pairs`` to send m bytes a -> b at once (b answers
    one byte, so a times the whole): the slowest pair's, median over ``repeats`` after one
    warm-up; collective, on every rank. Pairs between two nodes, timed alone and together,
    show how many of them the nodes' interfaces carry at full rate (``interfaces``)."""
    me = comm.Get_rank()
    role = next(((b, True) for a, b in pairs if a == me), None) or \
        next(((a, False) for a, b in pairs if b == me), None)
    buf = np.ones(m if role else 1, dtype=np.uint8)
    times = np.zeros(repeats)
    for k in range(-1, repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        if role is not None and role[1]:
            comm.Send(buf, role[0], 5)
            comm.Recv(buf[:1], role[0], 5)
        elif role is not None:
            comm.Recv(buf, role[0], 5)
            comm.Send(buf[:1], role[0], 5)
        if k >= 0:
            times[k] = time.perf_counter() - t0 if role is not None and role[1] else 0.0
    comm.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
    return float(np.median(times))


def interfaces(alone: float, together: float, pairs: int) -> int:
    """Interfaces per node from ``pairs`` pairs crossing at once taking ``together`` seconds
    where one pair alone takes ``alone``: k pairs sharing one interface take k times as long
    (measured here, 2 pairs between two network namespaces: 86 ms against 43 at 4 MiB)."""
    if together <= 0 or alone <= 0:
        return pairs
    return max(1, min(pairs, round(pairs * alone / together)))


# the burst probe (``burst``): 64 messages of 64 KiB back to back after the link idled, 4x the
# 256 KiB bucket the namespace harness gives a link (``testing.netns.BURST``); a bucket is
# reported where at least BUCKET_MIN_MESSAGES of them ran ahead of the sustained rate
BURST_MESSAGE, BURST_COUNT, BUCKET_MIN_MESSAGES = 1 << 16, 64, 2
STREAM_BYTES = 1 << 20  # ``stream`` times at least this much of each size past the bucket


def _arrivals(comm: MPI.Comm, a: int, b: int, m: int, count: int, idle: float) -> np.ndarray:
    """Rank b's arrival times of ``count`` messages of m bytes that a sends back to back once
    the link has idled ``idle`` seconds; collective, on b only (empty elsewhere). Every rank
    sleeps, then all line up; a sends a one-byte marker and then posts them all at once, and
    b times from the marker's arrival: timed from b's own start instead, a sender that left
    the barrier late read the bucket short (32 and 65 KiB of tbf's 256 KiB, twice in 30)."""
    me = comm.Get_rank()
    buf = np.ones(m if me in (a, b) else 1, dtype=np.uint8)
    comm.Barrier()
    time.sleep(idle)
    comm.Barrier()
    times = np.zeros(count if me == b else 0)
    if me == a:
        comm.Send(buf[:1], b, 5)
        MPI.Request.Waitall([comm.Isend(buf, b, 4) for _ in range(count)])
        comm.Recv(buf[:1], b, 4)
    elif me == b:
        comm.Recv(buf[:1], a, 5)
        t0 = time.perf_counter()
        for i in range(count):
            comm.Recv(buf, a, 4)
            times[i] = time.perf_counter() - t0
        comm.Send(buf[:1], a, 4)
    return times


def bucket_fit(m: int, times: np.ndarray) -> tuple[float, float]:
    """(bytes ahead, sustained bytes/s) of a burst's arrivals (``times[i]``: when the first
    (i + 1)·m bytes had arrived, from the receiver's start): the line fitted to the second
    half is the sustained rate, and its value at 0 the bytes that ran ahead of it, the
    link's token bucket (tbf passes a full bucket at line speed, then the rest at the shaped
    rate; an unshaped link: ~0). A sender that left the barrier δ later reads rate x δ
    short: tbf's 256 KiB read 154-249 KiB across the namespaces. Read at the first arrival
    instead, it came out at 597 KiB (the first message's start-up counted as the bucket)."""
    n = len(times)
    cum = m * np.arange(1, n + 1, dtype=np.float64)
    h = n // 2
    rate, ahead = np.polyfit(times[h:], cum[h:], 1)
    return max(float(ahead), 0.0), max(float(rate), 1.0)


def burst(comm: MPI.Comm, a: int, b: int, idle: float = 0.1, repeats: int = 5) -> dict:
    """The link a -> b's token bucket, measured: ``BURST_COUNT`` messages of ``BURST_MESSAGE``
    bytes back to back after ``idle`` seconds of quiet (``bucket_fit``), the median of
    ``repeats``: a receiver switched out reads one long (1,182 KiB at load 50; 770-955 KiB
    three times in 30 on a quiet host), and CI's median of 3 once read 386 KiB; collective,
    the same dict on every rank: ``bytes`` (0 where fewer than ``BUCKET_MIN_MESSAGES`` ran
    ahead: no bucket) and ``rate`` (bytes/s), with the probe's figures and each repeat's
    (bytes, rate) (``fits``)."""
    fits = []
    for _ in range(repeats):
        times = _arrivals(comm, a, b, BURST_MESSAGE, BURST_COUNT, idle)
        fits.append(bucket_fit(BURST_MESSAGE, times) if comm.Get_rank() == b else (0.0, 0.0))
    each = np.array(fits)
    comm.Bcast(each, root=b)
    ahead, rate = (float(x) for x in np.median(each, axis=0))
    found = ahead >= BUCKET_MIN_MESSAGES * BURST_MESSAGE
    return {"bytes": ahead if found else 0.0, "rate": rate, "ahead": ahead,
            "probe": [BURST_MESSAGE, BURST_COUNT, idle, repeats], "fits": each.tolist()}


def stream(comm: MPI.Comm, a: int, b: int, sizes: list[int], bucket: float) -> list[float]:
    """Seconds each m-byte message holds the link a -> b in sustained traffic: messages sent
    back to back, past the ones a full ``bucket`` lets through ahead of the rate (those
    arrive early), the mean gap between the later arrivals: at least 2 gaps and
    ``STREAM_BYTES`` (a receiver switched out for a while then reads what queued meanwhile
    at once: a gap or two alone can read ~0); collective, on every rank. A ring's steps
    send so; a ping-pong idles each direction half the time and, through a token bucket,
    times a message at half its sustained time (issue 33)."""
    out = np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        skip, gaps = int(bucket // m), max(2, -(-STREAM_BYTES // m))
        times = _arrivals(comm, a, b, m, skip + 1 + gaps, 0.0)
        if comm.Get_rank() == b:
            out[k] = float(times[-1] - times[skip]) / gaps
    comm.Bcast(out, root=b)
    return [float(x) for x in out]


def sustained(one_way: list[float], alpha: float, held: list[float]) -> list[float]:
    """The one-way times of back-to-back traffic: each at least the latency plus the time the
    message holds the link in a stream (``stream``), at least its ping-pong time."""
    return [max(t, alpha + h) for t, h in zip(one_way, held, strict=True)]


class TokenBucket:
    """A shaped link's token bucket (``burst``: ``nbytes`` refilled at ``rate`` bytes/s), as
    the virtual clock charges it on one queue: a message takes tokens for up to its bytes
    and moves those at line speed, saving tokens/rate of its sustained time; the tokens
    refill only while the queue idles (a message moving at the rate uses them as they come).
    ``take(start, nbytes)``: the seconds saved by a message starting at ``start``;
    ``idle_from(end)``: the queue is busy until ``end``."""

    def __init__(self, nbytes: float, rate: float) -> None:
        self.size, self.rate = float(nbytes), float(rate)
        self.tokens, self.at = self.size, 0.0

    def take(self, start: float, nbytes: float) -> float:
        if start > self.at:
            self.tokens = min(self.size, self.tokens + (start - self.at) * self.rate)
            self.at = start
        used = min(self.tokens, float(nbytes))
        self.tokens -= used
        return used / self.rate

    def idle_from(self, end: float) -> None:
        self.at = max(self.at, end)


def cpu_share(comm: MPI.Comm) -> float:
    """How many ranks of this job share each core of this machine, at least 1; collective.

    Ranks whose kernel is this one's (``/proc/sys/kernel/random/boot_id``: network
    namespaces of one machine share it, real hosts do not) over the cores this process may
    run on: 4 ranks of two namespaces on 2 cores, 2. A rank waiting in MPI busy-polls
    (MPICH, UCX) and so holds its share of a core, computing or not: a rank's compute then
    takes this many wall seconds per CPU second (``cpu_share_measured``: as timed)."""
    try:
        kernel = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        kernel = MPI.Get_processor_name()
    same = sum(k == kernel for k in comm.allgather(kernel))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    share = np.array([max(same / cores, 1.0)])
    comm.Allreduce(MPI.IN_PLACE, share, MPI.MAX)
    return float(share[0])


def cpu_share_measured(comm: MPI.Comm, seconds: float = 0.05) -> float:
    """Wall seconds per second of this thread's CPU time while every rank adds at once (the
    slowest rank's), as ``cpu_share`` counts it, with the host's other load in; collective."""
    x, y = np.ones(1 << 16, dtype=np.float32), np.ones(1 << 16, dtype=np.float32)
    comm.Barrier()
    c0, t0 = time.thread_time(), time.perf_counter()
    while time.thread_time() - c0 < seconds:
        for _ in range(16):
            np.add(x, y, out=x)
    ratio = np.array([(time.perf_counter() - t0) / max(time.thread_time() - c0, 1e-9)])
    comm.Allreduce(MPI.IN_PLACE, ratio, MPI.MAX)
    return float(ratio[0])


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


# --------------------------------------------------- this host's links, for the virtual clock
HOST_PARAMS_PATHS = ("experiments/results/this_machine.json",
                     "experiments/results/model_2ranks.json")
HOST = "this-machine"  # the name of the saved calibration (``--links-from this-machine``)


class MeasuredLink:
    """A link class as this host measured it: one-way time t(m) of an m-byte message.

    Read by the virtual clock in place of a ``LinkSpec`` (same ``latency``,
    ``bandwidth``, ``seconds``, ``str``) when ``--links-from`` names a calibration.
    t(m) = α + m·β(m) from the ping-pong of ``mpicomm model`` at every power of two,
    linear in m between measured sizes and beyond the largest (the last segment's
    slope), t(smallest) below
    them: MPI's protocol switches (eager to rendezvous) and the caches stay in.
    ``exchange`` (the calibration's α_x and β_x(m), when measured): the time t_x(m) of
    a step in which both ranks send m bytes at once (``Sendrecv``, what a ring's,
    recursive halving's and recursive doubling's steps do), read the same way. On one
    host both directions are copies by the two ranks' CPUs through one memory, so an
    exchange is not two independent one-way messages (here t_x = 1.8 t at 2 KiB: each
    rank runs MPI's send and receive paths in turn), as ``osu_bibw`` is not 2 ``osu_bw``;
    without it, t_x = t (full duplex). ``gamma(m)``: seconds per byte of an add right
    after an exchange (the reduction of an allreduce step), by size, for reductions
    that run inside MPI. ``fresh``: seconds per byte of writing freshly mapped memory
    (page faults, ``fresh_seconds``), for MPI's temporaries above ``MMAP_MAX``.
    ``cold`` (``LinkModel.cold``, when measured): the same tables
    with the data out of the caches, for calls whose buffers do not fit in the host's
    last-level cache (``cache_bytes``); ``queue_seconds(m, exchange, cold)`` reads them.
    """

    def __init__(self, alpha: float, sizes, beta, gamma_sizes, gamma, text: str,
                 exchange: tuple[float, list[float]] | None = None,
                 cold: dict | None = None, fresh: float = 0.0) -> None:
        self.latency = float(alpha)
        self.sizes = [int(s) for s in sizes]
        self.times = [self.latency + s * b for s, b in zip(self.sizes, beta, strict=True)]
        _, beta_fit = fit_alpha_beta(self.sizes, self.times)
        self.bandwidth = 1.0 / beta_fit if beta_fit > 0 else float("inf")
        self._last_beta = _last_slope(self.sizes, self.times, float(beta[-1]))
        self.times_x = self.times
        if exchange is not None and None not in exchange:
            alpha_x, beta_x = float(exchange[0]), exchange[1]
            self.times_x = [alpha_x + s * b for s, b in zip(self.sizes, beta_x, strict=True)]
        self._last_beta_x = _last_slope(self.sizes, self.times_x, self._last_beta)
        self._gamma = ([int(s) for s in gamma_sizes], [float(g) for g in gamma])
        self.text = text
        self.cold = None if not cold else MeasuredLink(
            cold["alpha"], sizes, cold["beta"], gamma_sizes, gamma, f"{text}, cold",
            exchange=(cold.get("alpha_x"), cold.get("beta_x")))
        self.cache_bytes = int(cold.get("cache_bytes") or 0) if cold else 0
        self.fresh = float(fresh or 0.0)
        if self.cold is not None:
            self.cold.fresh = self.fresh

    # the one link type's names (``core.links.Link``), so a ``Cluster`` holds this link too
    efficiency = 1.0
    interfaces: int | None = None  # measured sharing (``host_links``), on the inter link
    cpu_share: float | None = None
    bucket: tuple[float, float] | None = None  # a measured token bucket: (bytes, bytes/s)

    @property
    def alpha_s(self) -> float:
        return self.latency

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth

    @property
    def beta(self) -> float:
        return 1.0 / self.bandwidth

    def seconds(self, nbytes: int) -> float:
        """One-way time of an ``nbytes`` message: t(m), interpolated (class docstring)."""
        return _on_table(self.sizes, self.times, self._last_beta, nbytes)

    def exchange_seconds(self, nbytes: int) -> float:
        """Time of an exchange step, ``nbytes`` each way: t_x(m), interpolated as t(m)."""
        return _on_table(self.sizes, self.times_x, self._last_beta_x, nbytes)

    def wire(self, nbytes: int) -> float:
        """The part of ``seconds`` after the latency: the time the message holds a queue."""
        return self.queue_seconds(nbytes)

    def queue_seconds(self, nbytes: int, exchange: bool = False, cold: bool = False) -> float:
        """The time an ``nbytes`` message holds a queue: one way or in an ``exchange``, with
        the data in the caches or (``cold``, when measured) not; less the (warm) latency the
        receiver adds, so it arrives after the table's time."""
        link = self.cold if cold and self.cold is not None else self
        t = link.exchange_seconds(nbytes) if exchange else link.seconds(nbytes)
        return t - self.latency if t > self.latency else 0.0

    def gamma(self, nbytes: float) -> float:
        """Seconds per byte to reduce ``nbytes`` right after receiving them (by size)."""
        sizes, values = self._gamma
        return float(np.interp(np.log(max(nbytes, 1.0)), np.log(sizes), values))

    def __str__(self) -> str:
        return self.text


def _last_slope(sizes: list[int], times: list[float], single: float) -> float:
    """The last segment's slope (the marginal β beyond the largest size), at least 0."""
    if len(sizes) < 2:
        return max(single, 0.0)
    return max((times[-1] - times[-2]) / (sizes[-1] - sizes[-2]), 0.0)


def _on_table(sizes: list[int], times: list[float], last_beta: float, nbytes: int) -> float:
    """``times`` at ``nbytes``: linear between measured sizes, the first below them, the
    last segment's slope beyond them."""
    if nbytes <= sizes[0]:
        return times[0]
    if nbytes >= sizes[-1]:
        return times[-1] + (nbytes - sizes[-1]) * last_beta
    i = bisect.bisect_right(sizes, nbytes)
    lo, hi = sizes[i - 1], sizes[i]
    return times[i - 1] + (nbytes - lo) * (times[i] - times[i - 1]) / (hi - lo)


def host_links(source: str) -> tuple[MeasuredLink, MeasuredLink]:
    """(intra, inter) ``MeasuredLink`` from a ``mpicomm model --json`` file; ``this-machine``:
    the first of ``HOST_PARAMS_PATHS`` that exists. One node measured: inter = intra.

    The inter link also carries what ``measure`` found of sharing, when measured (``None``
    otherwise): ``interfaces`` (pairs of ranks the nodes' interfaces carry at full rate: the
    cluster's ``nics_per_node``) and ``cpu_share`` (wall seconds per CPU second of a rank
    while all compute: the compute the host's CPU time stands for); and its token bucket
    (``extra.inter_bucket``, ``burst``: (bytes, bytes/s), None where none was found).

    Raises ``ConfigError`` naming the files tried, with the command that writes one."""
    tried = list(HOST_PARAMS_PATHS) if source == HOST else [source]
    for path in tried:
        if os.path.exists(path):
            try:
                params = json.loads(Path(path).read_text())["params"]
                check_link_table(path, params)  # ConfigError: one line naming the field
                sizes, gamma = params["gamma_sizes"], params["gamma"]
                extra = params.get("extra") or {}
                links = [MeasuredLink(params[k]["alpha"], params[k]["sizes"], params[k]["beta"],
                                      sizes, gamma, f"measured {k} link of {path}",
                                      exchange=(params[k].get("alpha_x"),
                                                params[k].get("beta_x")),
                                      cold=params[k].get("cold"),
                                      fresh=extra.get("fresh_s_per_byte"))
                         for k in ("intra", "inter")]
                links[1].interfaces, links[1].cpu_share = _sharing(path, extra)
                links[1].bucket = _bucket(path, extra)
            except ConfigError:
                raise
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"links_from {path}: not a 'mpicomm model --json' file with "
                                  f"params ({type(exc).__name__}: {exc})") from None
            return links[0], links[1]
    raise ConfigError(f"links_from {source!r}: no calibration (tried {', '.join(tried)}); "
                      f"measure this host with `mpiexec -n 2 python -m mpicomm model "
                      f"--strategies ring -b 4K -e 64M -f 4 -n 5 --json {HOST_PARAMS_PATHS[0]}`")


def _sharing(path: str, extra: dict) -> tuple[int | None, float | None]:
    """``interfaces_per_node`` (an int >= 1) and ``cpu_share`` (a number >= 1 below 1000) of a
    calibration's ``extra``, None where absent; ``ConfigError`` naming a bad one."""
    nics, share = extra.get("interfaces_per_node"), extra.get("cpu_share")
    if nics is not None and (isinstance(nics, bool) or not isinstance(nics, int) or nics < 1):
        raise ConfigError(f"links_from {path}: extra.interfaces_per_node must be an int >= 1, "
                          f"got {nics!r}")
    if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float))
                              or not 0 < share < 1000):
        raise ConfigError(f"links_from {path}: extra.cpu_share must be a number from 0 to "
                          f"1000, got {share!r}")
    return nics, None if share is None else max(float(share), 1.0)


def _bucket(path: str, extra: dict) -> tuple[float, float] | None:
    """A calibration's measured token bucket between nodes (``extra.inter_bucket``): (bytes,
    bytes/s), None where absent or empty; ``ConfigError`` naming a bad one."""
    bucket = extra.get("inter_bucket")
    if bucket is None:
        return None
    size = bucket.get("bytes") if isinstance(bucket, dict) else None
    rate = bucket.get("rate") if isinstance(bucket, dict) else None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
               for x in (size, rate)) or size < 0 or rate <= 0:
        raise ConfigError(f"links_from {path}: extra.inter_bucket must hold bytes >= 0 and "
                          f"rate > 0, got {bucket!r}")
    return (float(size), float(rate)) if size > 0 else None


# ------------------------------------------- MPI's collectives on measured links
def measured_collective_seconds(kind: str, nbytes: int, p: int, link: MeasuredLink) -> float:
    """``costmodel.native.mpi_collective_time``'s algorithms on a measured link (``--links-from``):
    each step's message takes the link's measured time at its size — the exchange time t_x where
    both ranks of a step send at once (recursive doubling and halving, the allgathers), the
    one-way t where one sends (binomial trees, scatter, gather) — and reductions (inside MPI)
    the measured γ: allreduce short ``lg p (t_x(n) + nγ)``, else recursive halving then doubling
    ``Σ_k 2 t_x(n/2^k) + (n/2^k) γ``; reduce short ``lg p (t(n) + nγ)``, else ``Σ_k t_x(n/2^k) +
    t(n/2^k) + (n/2^k) γ``; bcast short ``lg p t(n)``, else ``Σ_k t(n/2^k) + t_x(n/2^k)``;
    allgather ``Σ_k t_x(2^k n)`` (k = 0 .. lg p - 1, lg p rounded up); long allreduce and reduce
    above glibc's mmap threshold also fault in MPICH's temporary (``_temporary``)."""
    if p < 2:
        return 0.0
    lg = math.ceil(math.log2(p))
    t, tx = link.seconds, link.exchange_seconds
    if kind == "allgather":
        return sum(tx(nbytes << k) for k in range(lg))
    if kind not in ("allreduce", "reduce", "bcast"):
        raise ValueError(f"unknown collective {kind!r}")
    add = 0.0 if kind == "bcast" else 1.0
    first = tx if kind == "allreduce" else t  # a short step: an exchange or one way
    if nbytes < SHORT_BYTES:  # costmodel.native's switch
        return lg * (first(nbytes) + add * nbytes * link.gamma(nbytes))
    # long: a reduce-scatter or scatter, then an allgather or gather, per halving step
    out = tx if kind != "bcast" else t
    back = t if kind == "reduce" else tx
    parts = [nbytes / 2 ** (k + 1) for k in range(lg)]
    steps = sum(out(int(m)) + back(int(m)) + add * m * link.gamma(m) for m in parts)
    return steps + _temporary(kind, nbytes, link)


def _temporary(kind: str, nbytes: int, link: MeasuredLink) -> float:
    """MPICH's reduce-scatter based allreduce and reduce take a temporary of the message's
    size per call (``MPIR_CHKLMEM_MALLOC``); above glibc's largest mmap threshold
    (``calibrate.MMAP_MAX``) it is a fresh mapping every time, its pages faulted in as the
    algorithm first writes them: the calibrated cost per byte of fresh memory."""
    if kind in ("allreduce", "reduce") and nbytes > MMAP_MAX:
        return nbytes * link.fresh
    return 0.0
