"""The transport under the virtual clock: real bytes move, time comes from the ``Cluster``.

After SimGrid/SMPI's online simulation and LogGOPSim. Each rank keeps a virtual
timeline (``mpicomm.core.clock.VirtualClock``: compute = thread CPU time x scale,
nothing charged while inside MPI). Every message carries its sender's virtual
departure time; the transport's own ``Cluster`` (``mpicomm.costmodel.cluster``, the one
description the predictor also reads; each reducer's transport holds its own, so nothing
of one reducer's links reaches another) gives its arrival. Per message of n bytes on link
class c (intra- or inter-node, from the node map; α, β of ``Cluster.link(c)``):

1. send (``isend``): the sends a rank posts in a row (until its next other
   transport call) form a batch on the send queue of class c; each starts at
   max(its post, queue free) and the ones in flight share it fairly (a NIC
   interleaves them): k equal messages posted together all end at start + k·n·β,
   one posted after the others have left goes alone. Each carries a 16-byte stamp
   (start, end) on a twin communicator (``comm.Dup()``, same peer, same tag: MPI's
   non-overtaking rule pairs stamps and payloads in order, also for
   ``recv_any``'s ANY_SOURCE), posted when the batch is booked.
2. receive: arrival = max(end + α, q + n·β), q the first gap of n·β in the
   receive queue of c (a list of busy intervals) from start + α on, so a
   server's incast queues at its receive side: p messages of n bytes sent at
   once arrive n·β apart, the last at α + p·n·β (linear in p). On this host's
   measured links (``--links-from``) a message of ``RENDEZVOUS_BYTES`` or more
   starts no sooner than its receive is posted (MPICH's single-copy protocol),
   and one sent while its sender also receives (an exchange) or in a call whose
   buffers fill the last-level cache takes the calibration's exchange or cold
   tables (``MeasuredLink``).
3. ``waitall``: the thread's clock moves to the latest arrival (receives) or
   end (sends) of the batch; CPU time spent waiting is not charged.

Full duplex: send and receive queues are separate, one pair per link class per
rank. With ``nics_per_node`` c (by default one per rank), the k ranks of
a node that cross node boundaries at once share the c interfaces: β across nodes
is multiplied by ⌈k/c⌉ (``costmodel.queues.interface_share``). k is the algorithm's
(``Reducer.crossing_ranks``: the ring's one boundary rank, K for K channels, every rank for
hierarchical and recursive doubling), as in the predictor; ps sets it per phase and
direction (``cross_at_once(sending, receiving)``): pushes leave from a node's W_j workers
and arrive at its S_j servers, answers the other way; the tree per phase as the edges that
leave and enter the node (``costmodel.algos.tree_crossings``: one or two a rank). The
queue rules (fair sending, receive-queue gaps, the NIC share) are ``costmodel.queues``'s,
which the tree's predictor (``costmodel.tree_steps``) runs too.

``collective(kind, nbytes, remote, comm, fn, *args)`` runs an MPI collective a
reducer calls directly (native's Allreduce, the leader variant's Reduce/Bcast,
the agreement Allgather): all ranks of ``comm`` start at the latest of their
clocks (one small Allreduce MAX) and end after MPICH's algorithm by the cost model's
one formula for it (``costmodel.native.mpi_collective_time``, which ``model --predict``'s
native also is). ``install`` puts the clock in ``mpicomm.core.clock`` for a command's
process; ``hold``/``release`` for one reducer, taken down when its last holder closes.
See docs/virtual_clock.md.
"""

from __future__ import annotations

import functools
import math
import os
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.core import clock, flops, trace
from mpicomm.core.clock import VirtualClock
from mpicomm.core.errors import ConfigError
from mpicomm.core.links import link_from_env
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.costmodel.calibrate import MeasuredLink, TokenBucket, measured_collective_seconds
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.native import mpi_collective_time
from mpicomm.costmodel.profiles import build_cluster
from mpicomm.costmodel.queues import book_receive, fair_ends, interface_share
from mpicomm.p2p import stall
from mpicomm.p2p.transport import BlockingByRequests, Traffic, Transport

__all__ = ["VirtualTransport", "install", "hold", "release", "default_clock", "install_for",
           "barrier", "max_over", "set_fold", "idle_wait"]

# waiting (``idle_wait``): tests with a yield between them before the first sleep (a message
# due in microseconds costs no sleep), the first sleep and its cap (doubling), each for a host
# with a core a rank; ``_crowding`` scales them when the host's ranks outnumber its cores. A
# wait costs no virtual time, so its wall time only has to leave the cores to the ranks that
# run (docs/workloads.md, "Hundreds of ranks": the measurements behind these figures)
POLL_YIELDS = 64
POLL_FIRST_S = 50e-6
POLL_MAX_S = 5e-4
# the launchers' count of this host's ranks (MPICH's Hydra, Open MPI's prterun)
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")
Crossing = int | tuple[int, int, int]  # ``cross_at_once``: ranks, or (own, ranks, messages)
RENDEZVOUS_BYTES = 8192  # MPICH's single-copy (CMA) threshold on one host: rendezvous from here


def _wire(link: Any, k: float, exchange: bool, cold: bool) -> Any:
    """The seconds an n-byte message holds a queue of a class, as a function of n: k·n·β
    (k: ``cross_at_once``'s share), or a measured link's (``--links-from``) time by size less
    its latency (``exchange``: sent while its sender also receives; ``cold``: a call whose
    buffers do not fit in the host's last-level cache; a modelled link: the same n·β)."""
    if isinstance(link, MeasuredLink):
        return lambda n: k * link.queue_seconds(n, exchange, cold)
    beta = k * link.beta
    return lambda n: n * beta


@functools.cache
def _crowding() -> float:
    """Ranks on this host per core it may run on (1 when not crowded or the launcher does not
    say): the most a waiting rank's sleep cap is multiplied by (``_cap``)."""
    ranks = next((int(v) for v in map(os.environ.get, LOCAL_SIZE_VARS) if v and v.isdigit()), 1)
    return max(ranks / _cores(), 1.0)


@functools.cache
def _cores() -> int:
    return max(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
               (os.cpu_count() or 1), 1)


@functools.cache
def _loadavg() -> int:
    """``/proc/loadavg`` opened once (Linux; read with pread), -1 where there is none."""
    try:
        return os.open("/proc/loadavg", os.O_RDONLY)
    except OSError:
        return -1


def _runnable() -> int:
    """Tasks runnable on this host now (``/proc/loadavg``'s 4th field: running/total; 2.6 µs
    a read), 0 where there is no such file."""
    fd = _loadavg()
    if fd < 0:
        return 0
    try:
        return int(os.pread(fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 0


def _cap(crowd: float) -> float:
    """A waiting rank's longest sleep now: ``POLL_MAX_S`` × the host's runnable tasks per
    core, from 1 to ``crowd`` (its ranks per core). When the waiting ranks' wake-ups crowd
    the cores, the queue of runnable tasks grows and they wake less often; when few run
    (the ranks wait on each other), they wake every ``POLL_MAX_S`` again and a chain of
    messages is not held up by sleeps (a fixed cap of ``POLL_MAX_S`` × ``crowd`` left 128
    ranks on 2 cores idle: 35 wake-ups a second, 0.4 cores busy)."""
    if crowd <= 1.0:
        return POLL_MAX_S
    return POLL_MAX_S * min(max(_runnable() / _cores(), 1.0), crowd)


def idle_wait(requests: list, statuses: list | None = None, receives: int = 1) -> None:
    """Complete the MPI ``requests``, never by a ``Waitall`` that spins: under the virtual
    clock a wait's wall time is no part of any result, so a rank of an oversubscribed host
    that waits gives its core away. ``statuses``: filled as ``Testall`` fills them.
    ``receives``: how many of the requests are receives.

    1. Test (``Testsome``); while a test completes a request, test again at once: MPICH's
       progress takes one incoming message a call (a server's 255 pushes and their stamps
       took 510 tests: with a sleep between tests, a round of pushes lasted seconds).
       A test that completes nothing may still have taken a message: one for a later
       receive, from a peer a step ahead (a ring's channels). So up to ``receives`` tests
       in a row count as one: a wait on K channels' 2K messages with 2K more queued before
       them took them in one wake-up, not one a sleep (``multiring``, 64 ranks on 2 cores,
       8 channels: 112 s, now 30 s; docs/workloads.md, "Hundreds of ranks");
    2. else yield the core between tests (``POLL_YIELDS``, fewer on a crowded host:
       ``_crowding``), then sleep, from ``POLL_FIRST_S`` doubling to ``POLL_MAX_S``, further
       up to ``_cap`` when the host's runnable tasks outnumber its cores."""
    if statuses is not None:  # one request (``_hold``): its status, as Testall fills it
        _idle_until(lambda: MPI.Request.Testall(requests, statuses) or None)
        return
    left = [sum(1 for r in requests if r)]

    def some() -> bool | None:  # True: all done; None: nothing completed by this test
        for _ in range(max(receives, 1)):  # 1.: a message for a later receive may come first
            done = MPI.Request.Testsome(requests)
            if done is None or done:
                break
        if done is None:  # every request inactive (completed before)
            return True
        left[0] -= len(done)
        return True if left[0] <= 0 else (False if done else None)

    _idle_until(some)


def _idle_until(test: Any) -> None:
    """Call ``test`` until it returns True: again at once after a False (progress made),
    after a yield or a sleep after a None (nothing happened; ``idle_wait``)."""
    crowd = _crowding()
    yields, pause = max(int(POLL_YIELDS / crowd), 1), 0.0
    while True:
        got = test()
        if got:
            return
        if got is False:  # progress: more may be queued behind it
            yields, pause = max(int(POLL_YIELDS / crowd), 1), 0.0
        elif yields:
            yields -= 1
            os.sched_yield()
        else:
            pause = POLL_FIRST_S if not pause else pause * 2 if pause * 2 <= POLL_MAX_S \
                else min(pause * 2, _cap(crowd))
            time.sleep(pause)


def _idle_call(comm: MPI.Comm, fn: Any, *args: Any) -> None:
    """The blocking collective ``fn`` (``comm.Allreduce``, ``Reduce``, ``Bcast``,
    ``Allgather``) as its non-blocking twin and ``idle_wait``."""
    twin = getattr(comm, "I" + fn.__name__.lower(), None)
    if twin is None:
        fn(*args)
    else:
        idle_wait([twin(*args)])


# ------------------------------------------------------------------ the process's clock
_owned: VirtualClock | None = None  # the clock ``hold`` installed (None: not ours)
_holders = 0  # reducers holding ``_owned``


def install(scale: float = 1.0) -> VirtualClock:
    """Make ``mpicomm.core.clock`` virtual for this process (compute x ``scale``), for the
    whole process (a command's run). Installing again keeps the running clock when the scale
    is unchanged (every reducer joins the same timelines). Links are not process-wide: each
    transport charges its own ``Cluster``."""
    clk = clock.virtual()
    if clk is None or clk.scale != float(scale):
        if clk is not None and clk is _owned and _holders:
            raise ConfigError(f"compute_scale={scale:g}: a reducer of this process runs the "
                              f"virtual clock at {clk.scale:g}; close it first")
        clk = VirtualClock(scale)
        clk.charge_cpu = not flops.active()  # a device model already installed keeps charging
        clock.set_source(clk.now, "virtual")
    return clk


def set_fold(fold: int) -> None:
    """``--fold F``: the run's buffers hold 1/F of each gradient tensor, and the virtual clock
    charges a buffer's messages and elementwise work F times (``VirtualClock.fold``, read by
    ``core.flops``). Raises ``ConfigError`` for a fold that is not a positive integer, or one
    above 1 under the wall clock (nothing would charge the full size)."""
    if isinstance(fold, bool) or not isinstance(fold, int) or fold < 1:
        raise ConfigError(f"--fold must be a positive integer, got {fold!r}")
    clk = clock.virtual()
    if clk is None:
        if fold > 1:
            raise ConfigError(f"--fold {fold}: virtual-clock only (a folded message is charged "
                              "its full size, which the wall clock cannot do); add --clock "
                              "virtual")
        return
    clk.fold = fold


def hold(scale: float = 1.0) -> VirtualClock:
    """The virtual clock for one reducer (``clock="virtual"``): the running one, or a new one
    that ``release`` takes down again when its last holder closes, so nothing a reducer set
    outlives it."""
    global _owned, _holders
    running = clock.virtual()
    clk = install(scale)
    if clk is not running:
        _owned, _holders = clk, 0
    if clk is _owned:
        _holders += 1
    return clk


def release(clk: VirtualClock | None) -> None:
    """A reducer that ``hold`` gave ``clk`` closes: the last holder of a clock ``hold``
    installed puts the wall clock back."""
    global _owned, _holders
    if clk is None or clk is not _owned or not _holders:
        return
    _holders -= 1
    if not _holders:
        if clock.virtual() is clk:
            clock.reset()
        _owned = None


class _Msg:
    """One posted message: its MPI requests, stamp, size and link."""

    __slots__ = ("reqs", "stamp", "send", "peer", "tag", "nbytes", "t0", "done_at")

    def __init__(self, reqs, stamp, send, peer, tag, nbytes, t0, done_at) -> None:
        self.reqs, self.stamp, self.send, self.peer, self.tag = reqs, stamp, send, peer, tag
        self.nbytes, self.t0, self.done_at = nbytes, t0, done_at


class VirtualTransport(BlockingByRequests, Transport):
    """``Transport`` whose time is the virtual clock's (module docstring).

    Args:
        comm, node_of, counts: as ``Transport``.
        cluster: the ``Cluster`` this transport charges (default: ``build_cluster``'s
            defaults on this layout); each transport holds its own, so no reducer's links
            reach another's.
        clk: the ``VirtualClock`` (default: the installed one; ``install`` first).
    """

    emulated = True
    virtual = True

    def __init__(self, comm: MPI.Comm, node_of: list[int], counts: Traffic | None = None,
                 cluster: Cluster | None = None, clk: VirtualClock | None = None) -> None:
        super().__init__(comm, node_of, counts)
        me = self.node_of[self.rank]
        self.local = sum(n == me for n in self.node_of)  # ranks on this rank's node
        self.cluster = build_cluster(ranks_per_node=self.local) if cluster is None else cluster
        self.clock = clk or clock.virtual()
        if self.clock is None:
            raise RuntimeError("VirtualTransport: install the virtual clock first "
                               "(mpicomm.p2p.virtual.install)")
        self.stamps = comm.Dup()  # collective, as the transport's creation
        self._shares: tuple[float, float] = (0.0, 0.0)  # (send, receive) ranks per interface: set
        # (with their tables) by ``cross_at_once``
        self._tables: dict[tuple[float, float], tuple] = {}
        self.cross_at_once(self.local)
        c = self.cluster
        self._cache = _host_cache(comm, c)  # bytes of this host's caches, 0: no model
        self._rendezvous = [_rendezvous(c.intra), _rendezvous(c.inter)]
        self._send_free = [0.0, 0.0]  # per class: intra, inter
        self._recv_busy: list[list[tuple[float, float]]] = [[], []]  # per class: intervals
        self._recv_floor = [0.0, 0.0]  # per class: the end of the intervals forgotten
        bucket = getattr(c.inter, "bucket", None)  # a measured link's (``--links-from``)
        self._buckets = (TokenBucket(*bucket), TokenBucket(*bucket)) if bucket else None
        self._spare: list[np.ndarray] = []
        self._unbooked: list[_Msg] = []  # sends posted since the last other transport call
        self._max = np.zeros(1, dtype=np.float64)
        self._held: dict[int, dict[int, list]] = {}  # recv_any: tag -> source -> (depart, copy)

    def cross_at_once(self, k: Crossing, receiving: Crossing | None = None) -> None:
        """``k`` ranks of each node send across node boundaries at once, ``receiving`` (default
        ``k``) receive across them at once: they share the node's ``nics_per_node``
        interfaces, each direction by its own count (β across nodes x
        ``queues.interface_share``: ⌈min(k, local)/c⌉ on this rank's send queue, the same of
        ``receiving`` on its receive queue). A count may also be (own, ranks, messages): this
        rank's messages, and its node's ranks and messages, across at once (the tree, whose
        ranks cross with one or two). A parameter server's pushes leave from all L workers of
        a node but arrive at its few servers: one count for both directions charged each
        server's incast L times over."""
        recv = k if receiving is None else receiving
        shares = tuple(self._interface_share(x) for x in (k, recv))
        if shares == self._shares:  # ps and auto ask before every call: the tables stand
            return
        self._shares = shares
        tables = self._tables.get(shares)
        if tables is None:
            tables = self._tables[shares] = self._build_tables(*shares)
        self._ab, self._wires, self._recv_wires = tables

    def _interface_share(self, crossing: Crossing) -> float:
        """β's multiplier across nodes for ``crossing`` (``cross_at_once``)."""
        if isinstance(crossing, int):
            ranks = min(crossing, self.local)
            crossing = (1, ranks, ranks)
        return interface_share(*crossing, self.cluster.nics_per_node)

    @property
    def share(self) -> float:
        """β's multiplier on this rank's sends across nodes (``cross_at_once``): ranks per
        interface."""
        return self._shares[0]

    def _build_tables(self, send_share: float, recv_share: float) -> tuple:
        """Per peer: (α, β), and the queue seconds by size (``_wire``) of a send and of a
        receive, each keyed (exchange, cold)."""
        links = (self.cluster.intra, self.cluster.inter)

        def per_peer(share: float, x: bool, c: bool) -> list:
            return [_wire(links[r], share if r else 1, x, c) for r in self.remote]
        ab = [(links[r].alpha_s, (send_share if r else 1) * links[r].beta) for r in self.remote]
        wires = {(x, c): per_peer(send_share, x, c) for x in (False, True) for c in (False, True)}
        recv_wires = {(x, c): per_peer(recv_share, x, c) for x in (False, True)
                      for c in (False, True)}
        return ab, wires, recv_wires

    def describe(self) -> dict:
        d = super().describe()
        c = self.cluster
        d.update(clock="virtual", inter_link=str(c.inter), intra_link=str(c.intra),
                 nics_per_node=c.nics_per_node, ranks_per_interface=self.share,
                 cluster=c.line())
        return d

    def close(self) -> None:
        """Free the stamp communicator (the transport's own; the reducer frees ``comm``)."""
        if self.stamps != MPI.COMM_NULL:
            self.stamps.Free()

    def _stamp(self) -> np.ndarray:
        return self._spare.pop() if self._spare else np.zeros(2, dtype=np.float64)

    def _cold(self) -> bool:
        """Whether the current call's data comes from memory: the buffers of the call
        (``footprint`` bytes a rank, set by the reducer) on all of this host's ranks fill
        its last-level cache. Only a measured link with cold tables tells (``_host_cache``)."""
        return 0 < self._cache <= self.footprint * self.clock.fold

    # ------------------------------------------------------------ the model
    def _flush(self, receiving: tuple[bool, bool] = (False, False)) -> None:
        """Book the sends posted since the last other call (one batch) and post their stamps.

        Called when any other call begins (``irecv``, ``waitall``, ``recv_any``,
        ``collective``), so a stamp always leaves before its sender waits for anything.
        ``receiving`` (per class, from ``waitall``): this rank waits for receives of the
        class together with these sends — an exchange (``_book``)."""
        sends, self._unbooked = self._unbooked, []
        if sends:
            self._book(sends, receiving)
            for m in sends:  # in post order, as the payloads
                m.reqs.append(self.stamps.Isend(m.stamp, m.peer, m.tag))

    def _book(self, sends: list, receiving: tuple[bool, bool] = (False, False)) -> None:
        """Put a batch of sends (posted one after another) on this rank's send queues.

        Per class, each message starts when the queue is free and it was posted; the
        messages in flight share the interface fairly (a NIC interleaves the messages
        posted to it, ``_share``), so with k in flight each moves at 1/k of the rate and
        the smallest ends first: equal messages posted together all end at start + k·m·β,
        and one posted after the others have left runs alone (a pipeline stage's forward
        sends, compute between them, do not wait for one another). Each stamp carries the
        message's (start, end): the bytes flow between them. When the rank also receives
        on the class in the same wait (``receiving``: a ``sendrecv``, an exchange step),
        a message holds the queue for the link's exchange time (``_wire``)."""
        for c in (0, 1):
            batch = [m for m in sends if (1 if self.remote[m.peer] else 0) == c]
            if not batch:
                continue
            wires = self._wires[receiving[c], self._cold()]
            free = self._send_free[c]
            starts = [m.t0 if m.t0 > free else free for m in batch]
            held = [wires[m.peer](m.nbytes) for m in batch]
            if c and self._buckets is not None:
                held = [self._drawn(0, t, w, m.nbytes)
                        for t, w, m in zip(starts, held, batch, strict=True)]
            ends = fair_ends(starts, held)
            if c and self._buckets is not None:
                self._buckets[0].idle_from(max(ends))
            for m, start, end in zip(batch, starts, ends, strict=True):
                m.stamp[0], m.stamp[1] = start, end
                m.done_at = end
            self._send_free[c] = max(ends)

    def _arrive(self, start: float, end: float, nbytes: int, source: int,
                exchange: bool = False, posted: float = 0.0) -> float:
        """Arrival of a message whose bytes left between ``start`` and ``end`` at this rank's
        receive queue of its class: α after its last byte left, and no sooner than the queue
        can take its bytes (messages queue at a receiver: incast). ``exchange``: this rank
        sends on the class in the same wait, so the message holds the queue for the time its
        sender booked it (``_book``: the same tables by symmetry). ``posted``: when this rank
        posted the receive; a message of the host's MPI at or above ``RENDEZVOUS_BYTES``
        (measured links only) moves no sooner (rendezvous: ``_rendezvous``).

        The queue is a list of busy intervals: a message takes the first gap of n·β from
        start + α on, so one that started earlier is not queued behind one the program
        happened to wait for first (two trees' chunks, say). Touching intervals merge; past
        ``queues.RECV_INTERVALS`` the oldest is forgotten and everything before its end counts as
        busy (a forgotten interval is never a gap: dropping it outright let a one-server
        PS's later pushes fill the time its earlier ones had taken, 219 ms instead of 268)."""
        c = 1 if self.remote[source] else 0
        alpha = self._ab[source][0]
        wire = self._recv_wires[exchange, self._cold()][source](nbytes)
        if posted > start and nbytes >= self._rendezvous[c]:  # the bytes wait for the receive
            start, end = posted, end + (posted - start)
        t = start + alpha
        if c and self._buckets is not None:
            wire = self._drawn(1, t, wire, nbytes)
        t, self._recv_floor[c] = book_receive(self._recv_busy[c], self._recv_floor[c], t, wire)
        at = end + alpha
        queued = t + wire
        if c and self._buckets is not None:
            self._buckets[1].idle_from(queued)
        return at if at > queued else queued

    def _drawn(self, side: int, start: float, wire: float, nbytes: int) -> float:
        """``wire`` less what the measured token bucket of this rank's send (``side`` 0) or
        receive (1) queue across nodes saves a message starting at ``start``: the ranks
        sharing the interface (``share``, as in ``wire``) each send as many bytes, so the
        interface's bucket goes to ``share`` x ``nbytes`` (``calibrate.TokenBucket``)."""
        saved = self._buckets[side].take(start, self._shares[side] * nbytes)
        return wire - saved if wire > saved else 0.0

    def _wait_requests(self, requests: list, receives: int = 1) -> None:
        """The one wait on requests (``Transport``'s), sleeping between polls: ``idle_wait``
        (``receives``: how many are receives)."""
        stall.wait_begin(len(requests))  # watched as every wait (p2p/stall.py, 2a.)
        idle_wait(requests, receives=receives)
        stall.wait_end()

    # ------------------------------------------------------------ blocking
    # one bracket around the pair and its wait: the model's own bookkeeping is not charged
    # as compute, and the CPU clock is read twice per call instead of six times (a system
    # call of ~0.6 us on a VM: at 4 KiB it doubled a 2-rank ring's time)
    def _bracketed(self, nbytes: int, call: Any, *args: Any) -> None:
        clk = self.clock
        clk.enter(nbytes)
        try:
            call(*args)
        finally:
            clk.leave()

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int) -> None:
        self._bracketed(recvbuf.nbytes, super().sendrecv, sendbuf, dest, recvbuf, source, tag)

    def send(self, buf: Any, dest: int, tag: int) -> None:
        self._bracketed(buf.nbytes, super().send, buf, dest, tag)

    def recv(self, buf: Any, source: int, tag: int) -> None:
        self._bracketed(buf.nbytes, super().recv, buf, source, tag)

    # --------------------------------------------------------- non-blocking
    def isend(self, buf: Any, dest: int, tag: int) -> _Msg:
        nbytes = buf.nbytes
        self._count_send(nbytes, dest)
        stamp = self._stamp()
        clk = self.clock
        t0 = clk.enter(nbytes)
        reqs = [self.comm.Isend(buf, dest, tag)]  # its stamp leaves with the batch (``_flush``)
        clk.leave()
        msg = _Msg(reqs, stamp, True, dest, tag, flops.wire_nbytes(buf), t0, 0.0)
        self._unbooked.append(msg)
        return msg

    def irecv(self, buf: Any, source: int, tag: int) -> _Msg:
        nbytes = buf.nbytes
        self._count_recv(nbytes, source)
        stamp = self._stamp()
        clk = self.clock
        t0 = clk.enter(nbytes)
        self._flush()
        reqs = [self.stamps.Irecv(stamp, source, tag), self.comm.Irecv(buf, source, tag)]
        clk.leave()
        return _Msg(reqs, stamp, False, source, tag, flops.wire_nbytes(buf), t0, 0.0)

    def waitall(self, requests: list) -> None:
        clk = self.clock
        clk.enter(sum(m.nbytes for m in requests))
        until = 0.0
        try:
            remote = self.remote
            receiving, sending = [False, False], [False, False]  # per class: intra, inter
            for m in requests:
                (sending if m.send else receiving)[1 if remote[m.peer] else 0] = True
            self._flush((receiving[0], receiving[1]))
            self._wait_requests([r for m in requests for r in m.reqs],
                                sum(len(m.reqs) for m in requests if not m.send))
            for m in sorted((m for m in requests if not m.send),
                            key=lambda m: (float(m.stamp[0]), float(m.stamp[1]), m.peer)):
                m.done_at = self._arrive(float(m.stamp[0]), float(m.stamp[1]), m.nbytes, m.peer,
                                         sending[1 if remote[m.peer] else 0], m.t0)
            for m in requests:
                until = m.done_at if m.done_at > until else until
                self._spare.append(m.stamp)
        finally:
            t1 = clk.leave(until)
        rec = trace.active()
        if rec is not None:
            for m in requests:
                rec.complete("send" if m.send else "recv", "p2p", m.t0, t1, peer=m.peer,
                             bytes=m.nbytes)

    def recv_any(self, buf: Any, tag: int, sources: Any = None) -> int:
        """Receive from any source, in virtual order: with ``sources`` (the ranks that may
        still send on ``tag`` before this rank answers one of them), hold messages until
        each of them has one here, then take the earliest departure (conservative: a
        sender's later messages depart later; ties by rank). Without ``sources``: arrival
        order."""
        clk = self.clock
        t0 = clk.enter(buf.nbytes)
        at = 0.0
        try:
            self._flush()
            held = self._held.setdefault(tag, {})
            want = [] if sources is None else [int(r) for r in sources]
            while not want and not any(held.values()) or any(not held.get(r) for r in want):
                self._hold(buf, tag, held)
            ready = [(q[0][0], q[0][1], r) for r, q in held.items()
                     if q and (not want or r in want)]
            if not ready:  # a message from a rank outside ``sources``: take it
                ready = [(q[0][0], q[0][1], r) for r, q in held.items() if q]
            start, end, src = min(ready)
            buf[...] = held[src].pop(0)[2]
            at = self._arrive(start, end, flops.wire_nbytes(buf), src)
        finally:
            t1 = clk.leave(at)
        self._count_recv(buf.nbytes, src)
        rec = trace.active()
        if rec is not None:
            rec.complete("recv", "p2p", t0, t1, peer=src, bytes=buf.nbytes)
        return src

    def _hold(self, buf: Any, tag: int, held: dict) -> None:
        """Receive one message of ``tag`` from any source and its stamp; keep a copy."""
        st = MPI.Status()
        idle_wait([self.comm.Irecv(buf, MPI.ANY_SOURCE, tag)], [st])
        src = st.Get_source()
        stamp = self._stamp()
        idle_wait([self.stamps.Irecv(stamp, src, tag)])
        held.setdefault(src, []).append((float(stamp[0]), float(stamp[1]), buf.copy()))
        self._spare.append(stamp)

    # ---------------------------------------------------------- collectives
    def collective(self, kind: str, nbytes: int, remote: bool, comm: MPI.Comm, fn: Any,
                   *args: Any) -> None:
        clk = self.clock
        self._max[0] = clk.enter(nbytes)
        until = 0.0
        try:
            self._flush()
            stall.wait_begin(comm.Get_size() - 1)  # watched (p2p/stall.py, 2a.)
            idle_wait([comm.Iallreduce(MPI.IN_PLACE, self._max, MPI.MAX)])
            _idle_call(comm, fn, *args)
            stall.wait_end()
            c = self.cluster
            spec = c.inter if remote else c.intra
            p = comm.Get_size()
            buf = next((a for a in args if isinstance(a, np.ndarray)), None)
            if buf is not None:  # --precision: the payload at its width (core/flops.py)
                nbytes = flops.wire_nbytes(buf)
            if isinstance(spec, MeasuredLink):
                if self._cold() and spec.cold is not None:
                    spec = spec.cold
                took = measured_collective_seconds(kind, nbytes, p, spec)
            else:  # the job's comm keeps its nodes; a leaders' comm has one rank a node
                local = p if not remote else (self.local if p == self.size else 1)
                intra = c.link("intra")
                inter = (c.inter.alpha_s, c.inter.beta * self.share)
                gamma = flops.gamma() if flops.active() else c.gamma_s_per_byte
                took = mpi_collective_time(kind, nbytes, p, local, intra, inter, gamma)
            until = float(self._max[0]) + took
        finally:
            clk.leave(until)


def _rendezvous(spec: Any) -> float:
    """Bytes from which a message of this link class moves only once its receive is posted:
    ``RENDEZVOUS_BYTES`` on a measured link (the host's MPI: MPICH's single-copy protocol,
    in which the receiver copies the message out of the sender's memory, from
    ``MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`` = 8 KiB, where the calibration's one-way time
    jumps), never on a modelled link (its messages are taken as eager, as before)."""
    if isinstance(spec, MeasuredLink):
        return float(os.environ.get("MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD", RENDEZVOUS_BYTES))
    return math.inf


def _host_cache(comm: MPI.Comm, model: Cluster) -> int:
    """The footprint (bytes a rank) from which a call's data is out of this host's caches:
    the last-level cache a measured link's cold tables went past, shared by the ranks of
    ``comm`` on this host; 0 when no link class has cold tables. Collective over ``comm``.

    A call whose buffers on all the host's ranks fill the cache streams them from memory:
    a cyclic sweep over more than an LRU cache holds misses every line, and the cache also
    holds the code, MPI's shared-memory cells and the scratch."""
    cache = max((spec.cache_bytes for spec in (model.intra, model.inter)
                 if isinstance(spec, MeasuredLink) and spec.cold is not None), default=0)
    if not cache:
        return 0
    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks = host.Get_size()
    host.Free()
    return max(cache // ranks, 1)


def default_clock(ranks_per_node: int | None, inter_link: Any, intra_link: Any) -> str:
    """The clock a run gets when ``--clock`` is not given: virtual for emulated nodes on one host
    (``ranks_per_node`` and a link, from flags or ``MPICOMM_RANKS_PER_NODE`` and
    ``MPICOMM_*_LINK``), else wall."""
    inter = link_from_env(inter_link, "inter_link", "MPICOMM_INTER_LINK")
    intra = link_from_env(intra_link, "intra_link", "MPICOMM_INTRA_LINK")
    return "virtual" if resolve_ranks_per_node(ranks_per_node) and (inter or intra) else "wall"


def install_for(clock_name: str | None, scale: float, ranks_per_node: int | None,
                inter_link: Any, intra_link: Any, links_from: str | None = None,
                nics_per_node: int | None = None, flop_rate: float | None = None) -> str:
    """Install the clock a command asks for (``default_clock`` when None); return its name.

    Raises ``ConfigError`` for an unknown clock, a scale that is not > 0, or a virtual-clock
    flag (``--compute-scale`` other than 1, ``--links-from``, ``--nics-per-node``,
    ``--flop-rate``) under the
    wall clock, where it could not take effect; and ``--links-from`` beside both link classes
    set (flags or ``MPICOMM_*_LINK``), where no class would take the measured links."""
    if clock_name is None:
        clock_name = default_clock(ranks_per_node, inter_link, intra_link)
    if clock_name not in ("wall", "virtual"):
        raise ConfigError(f"unknown clock {clock_name!r}; valid: wall, virtual")
    if not (isinstance(scale, (int, float)) and 0 < scale < math.inf):
        raise ConfigError(f"--compute-scale must be a number > 0, got {scale!r}")
    if clock_name == "wall":
        given = [flag for flag, on in (("--compute-scale", scale != 1),
                                        ("--links-from", bool(links_from)),
                                        ("--nics-per-node", nics_per_node is not None),
                                        ("--flop-rate", flop_rate is not None)) if on]
        if given:
            raise ConfigError(f"{', '.join(given)}: virtual-clock only, and this run uses the "
                              f"wall clock; add --clock virtual")
    if clock_name == "virtual":
        inter = link_from_env(inter_link, "inter_link", "MPICOMM_INTER_LINK")
        intra = link_from_env(intra_link, "intra_link", "MPICOMM_INTRA_LINK")
        if links_from and inter is not None and intra is not None:
            raise ConfigError(f"--links-from {links_from}: --inter-link {inter} and --intra-link "
                              f"{intra} set both link classes, so no class would take the "
                              "measured links; drop one of them, or --links-from")
        if links_from:  # a bad file: refused here, before any message
            build_cluster(inter=inter, intra=intra, links_from=links_from)
        install(scale)
    return clock_name


def barrier(comm: MPI.Comm) -> None:
    """``comm.Barrier()``; under the virtual clock every rank also leaves at the latest clock
    (one small Allreduce MAX), so timings after it start together."""
    if clock.virtual() is None:
        comm.Barrier()
    else:
        max_over(comm, np.empty(0))


def max_over(comm: MPI.Comm, values: np.ndarray) -> np.ndarray:
    """The element-wise MAX of ``values`` (float64, the same length on every rank) over
    ``comm``: one Allreduce; under the virtual clock it also carries the clock, so every
    rank leaves at the latest time, as from any collective."""
    clk = clock.virtual()
    both = np.concatenate(([clk.enter() if clk is not None else 0.0], values)).astype(np.float64)
    try:
        if clk is None:
            comm.Allreduce(MPI.IN_PLACE, both, MPI.MAX)
        else:  # a wait is free under the virtual clock: leave the core to the ranks that run
            idle_wait([comm.Iallreduce(MPI.IN_PLACE, both, MPI.MAX)])
    finally:
        if clk is not None:
            clk.leave(float(both[0]))
    return both[1:]
