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
           "fresh_seconds", "MMAP_MAX", "measured_collective_seconds"]

CACHE_BYTES = 32 << 20  # the last-level cache when the host does not say (sysfs)
# glibc's largest dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): a malloc
# above it is a fresh mapping every time, its pages faulted in on first touch
MMAP_MAX = 32 << 20


# seconds one size's repetitions may take: the counts of ``_iters`` fit it on this host's own
# links (12 round trips of 64 MiB in ~0.4 s), while across an 800 Mbit/s link (1.4 s a round
# trip of 64 MiB) they took minutes: there the count follows the first (probe) round trip
SIZE_BUDGET_S = 0.5


def _iters(m: int, scale: float = 1.0) -> int:
    return max(3, int(scale * (300 if m <= 1 << 16 else 60 if m <= 1 << 20 else 12)))


def _within_budget(m: int, scale: float, probe_s: float) -> tuple[int, int]:
    """(timed repetitions, further warm-ups) for size m after a probe of ``probe_s``: the
    usual counts, fewer where they would take over ``SIZE_BUDGET_S`` (at least 3 timed)."""
    iters = min(_iters(m, scale), max(3, int(SIZE_BUDGET_S / max(probe_s, 1e-9))))
    return iters, (2 if probe_s * 10 < SIZE_BUDGET_S else 0)


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
    buf = np.zeros(max(sizes) if march is None else 1, dtype=np.uint8)
    out = np.zeros(len(sizes))
    count = np.zeros(2, dtype=np.int64)
    other = b if me == a else a

    def round_trip(m: int) -> float:
        view = buf[:m] if march is None else march.take(m)
        t0 = time.perf_counter()
        if me == a:
            comm.Send(view, other, 7)
            comm.Recv(view, other, 7)
        else:
            comm.Recv(view, other, 7)
            comm.Send(view, other, 7)
        return time.perf_counter() - t0

    for k, m in enumerate(sizes):
        comm.Barrier()
        if me not in (a, b):
            continue
        probe = round_trip(m)  # the first warm-up; a's time sets both ranks' counts
        if me == a:
            count[:] = _within_budget(m, scale, probe)
            comm.Send(count, other, 6)
        else:
            comm.Recv(count, other, 6)
        for _ in range(int(count[1])):
            round_trip(m)
        out[k] = float(np.median([round_trip(m) for _ in range(int(count[0]))])) / 2
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
    swap, add = np.zeros(len(sizes)), np.zeros(len(sizes))
    line_up = (np.zeros(1), np.zeros(1))
    probe = np.zeros(1)

    def step(i: int, n: int) -> tuple[float, float]:
        """One timed step (every rank: the barrier; a and b: the swap and the add)."""
        comm.Barrier()
        if me not in (a, b):
            return 0.0, 0.0
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
        probe[0] = step(1, n)[0]  # the first warm-up; a's time sets every rank's counts
        comm.Bcast(probe, root=a)
        iters, more = _within_budget(m, scale, float(probe[0]))
        for i in range(more):
            step(i, n)
        t = np.array([step(i, n) for i in range(iters)]).T
        comm.Allreduce(MPI.IN_PLACE, t, MPI.MAX)
        swap[k], add[k] = np.median(t, axis=1)
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

    Raises ``ConfigError`` naming the files tried, with the command that writes one."""
    tried = list(HOST_PARAMS_PATHS) if source == HOST else [source]
    for path in tried:
        if os.path.exists(path):
            try:
                params = json.loads(Path(path).read_text())["params"]
                check_link_table(path, params)  # ConfigError: one line naming the field
                sizes, gamma = params["gamma_sizes"], params["gamma"]
                links = [MeasuredLink(params[k]["alpha"], params[k]["sizes"], params[k]["beta"],
                                      sizes, gamma, f"measured {k} link of {path}",
                                      exchange=(params[k].get("alpha_x"),
                                                params[k].get("beta_x")),
                                      cold=params[k].get("cold"),
                                      fresh=(params.get("extra") or {}).get("fresh_s_per_byte"))
                         for k in ("intra", "inter")]
            except ConfigError:
                raise
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"links_from {path}: not a 'mpicomm model --json' file with "
                                  f"params ({type(exc).__name__}: {exc})") from None
            return links[0], links[1]
    raise ConfigError(f"links_from {source!r}: no calibration (tried {', '.join(tried)}); "
                      f"measure this host with `mpiexec -n 2 python -m mpicomm model "
                      f"--strategies ring -b 4K -e 64M -f 4 -n 5 --json {HOST_PARAMS_PATHS[0]}`")


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
