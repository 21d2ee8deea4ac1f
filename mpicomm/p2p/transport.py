"""The point-to-point layer: every message of a hand-written strategy passes through here.

``Transport(comm, node_of)`` wraps a reducer's private communicator and its
node map (``node_of[r]``: the node of rank r, from ``core.topology.node_map``).
Strategies call

    sendrecv(sendbuf, dest, recvbuf, source, tag)    send(buf, dest, tag)
    recv(buf, source, tag)                            isend / irecv -> request
    waitall(requests)

with contiguous buffers (NumPy, or CuPy for CUDA-aware MPI). The transport:

1. moves the bytes with mpi4py's buffer (capitalised) calls — no pickling and
   no allocation per call;
2. counts, per rank, the bytes sent and received (as posted: strategies post
   exact sizes), split intra-node / inter-node by the node map, and the
   messages, into ``counts`` (a ``Traffic``; a reducer passes its
   ``ReduceStats``, so ``reducer.stats`` is what its transport counted);
3. records each message on the timeline when ``mpicomm.core.trace.active()``
   is set (cat "p2p", name send / recv / sendrecv, args peer and bytes,
   start/end ``clock.now()``); off, that is one ``is None`` test;
4. with emulated links (``make_transport(..., inter_link=...)``) holds each
   message to its link's latency + m/bandwidth: ``EmulatedTransport`` in
   ``mpicomm.p2p.emulated``. Without emulation this class is used and carries
   no emulation code on its path at all;
5. under the virtual clock (``mpicomm.p2p.virtual.install``) is a
   ``VirtualTransport``: every message carries its sender's virtual time and a
   transport's ``Cluster`` gives its arrival (``mpicomm.p2p.virtual``).

MPI calls a strategy makes outside the transport go through ``recv_any``
(a receive from any source) and ``collective`` (an MPI collective), so the
virtual clock can time them; here they only call MPI.

The direct seam (the hot path at small sizes): on this class alone, where a
message needs nothing but moving and counting, ``direct()`` hands out the
communicator itself. A strategy that sends a fixed sequence of messages per
buffer layout (the ring) calls its ``Sendrecv``/``Allreduce`` and counts the
whole sequence once per call into ``counts`` (what ``sendrecv`` would count,
precomputed per layout). Emulated and virtual transports return
None, so every message of theirs still passes through their methods; and the
caller checks ``trace.active()`` per call, since direct messages are not traced.

Every wait happens in a transport method: the blocking ``sendrecv``/``send``/
``recv`` wait inside MPI, and every wait on requests goes through
``_wait_requests`` — the one place a stall inspector hooks in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mpi4py import MPI

from mpicomm.core import clock, trace
from mpicomm.p2p import stall

__all__ = ["Transport", "Traffic", "BlockingByRequests"]

_begin, _end = stall.wait_begin, stall.wait_end  # around every blocking MPI call


@dataclass
class Traffic:
    """Bytes and messages this rank handed to (sent) or got from (recv) the transport.

    ``bytes_sent``/``bytes_recv`` are totals; ``inter_bytes_*`` the part that
    crossed to or came from another node (``intra = total - inter``).
    """

    bytes_sent: int = 0
    bytes_recv: int = 0
    inter_bytes_sent: int = 0
    inter_bytes_recv: int = 0
    messages_sent: int = 0
    messages_recv: int = 0

    def reset_traffic(self) -> None:
        self.bytes_sent = self.bytes_recv = self.inter_bytes_sent = self.inter_bytes_recv = 0
        self.messages_sent = self.messages_recv = 0

    def as_dict(self) -> dict:
        return asdict(self)


class Transport:
    """Point-to-point messages over ``comm``, counted per link class (see module docstring).

    Args:
        comm: the communicator (a reducer's private duplicate); not freed here.
        node_of: node of every rank of ``comm``.
        counts: where to count (default: a fresh ``Traffic``).

    Attributes:
        comm, rank, size, node_of: as given.
        remote: ``remote[r]`` is True when rank r is on another node.
        counts: the ``Traffic`` counted into.
        emulated: False here (``EmulatedTransport`` says True).
    """

    emulated = False
    virtual = False
    footprint = 0  # bytes a rank of the current call's buffers (the virtual clock's cache model)

    def __init__(self, comm: MPI.Comm, node_of: list[int], counts: Traffic | None = None) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        if len(node_of) != self.size:
            raise ValueError(f"node_of has {len(node_of)} entries for {self.size} ranks")
        self.node_of = list(node_of)
        me = self.node_of[self.rank]
        self.remote = [n != me for n in self.node_of]
        self.counts = Traffic() if counts is None else counts
        self._posted: dict[int, tuple] = {}  # tracing only: id(request) -> (name, peer, bytes, t0)
        # world rank of each rank of comm: the stall watchdog names whom a wait is for
        self.world_of = MPI.Group.Translate_ranks(comm.Get_group(), list(range(self.size)),
                                                  MPI.COMM_WORLD.Get_group())
        stall.watch()  # every wait below is watched (p2p/stall.py, 2a.)

    def describe(self) -> dict:
        """JSON-able summary: emulation and node map."""
        return {"emulated": self.emulated, "nodes": max(self.node_of) + 1}

    # ------------------------------------------------------------ counting
    def _count_send(self, nbytes: int, dest: int) -> None:
        c = self.counts
        c.bytes_sent += nbytes
        c.messages_sent += 1
        if self.remote[dest]:
            c.inter_bytes_sent += nbytes

    def _count_recv(self, nbytes: int, source: int) -> None:
        c = self.counts
        c.bytes_recv += nbytes
        c.messages_recv += 1
        if self.remote[source]:
            c.inter_bytes_recv += nbytes

    def account(self, sent: int, recv: int, inter_sent: int = 0, inter_recv: int = 0) -> None:
        """Count bytes moved by an MPI collective outside the transport (e.g. a node's Reduce)."""
        c = self.counts
        c.bytes_sent += sent
        c.bytes_recv += recv
        c.inter_bytes_sent += inter_sent
        c.inter_bytes_recv += inter_recv

    def cross_at_once(self, k: Any, receiving: Any = None) -> None:
        """``k`` ranks of a node send and ``receiving`` receive across node boundaries at once,
        each a count or (own, ranks, messages) (the virtual clock's interface sharing,
        ``VirtualTransport``); nothing here."""

    def direct(self) -> MPI.Comm | None:
        """Return ``comm`` for direct calls (see the module docstring): this class only.

        Emulated links and the virtual clock must see every message: None there."""
        return self.comm if type(self) is Transport else None

    def close(self) -> None:
        """Free what the transport holds besides ``comm`` (nothing here)."""

    # ------------------------------------------------------------ blocking
    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int) -> None:
        """Send ``sendbuf`` to ``dest`` while receiving ``recvbuf`` from ``source`` (one tag)."""
        rec = trace.active()
        t0 = clock.now() if rec is not None else 0.0
        _begin(1, self.world_of[source])
        self.comm.Sendrecv(sendbuf, dest, tag, recvbuf, source, tag)
        _end()
        ns, nr = sendbuf.nbytes, recvbuf.nbytes
        c = self.counts
        c.bytes_sent += ns
        c.bytes_recv += nr
        c.messages_sent += 1
        c.messages_recv += 1
        if self.remote[dest]:
            c.inter_bytes_sent += ns
        if self.remote[source]:
            c.inter_bytes_recv += nr
        if rec is not None:
            rec.complete("sendrecv", "p2p", t0, clock.now(), peer=dest, source=source,
                         bytes=ns)

    def send(self, buf: Any, dest: int, tag: int) -> None:
        """Blocking send of ``buf`` to ``dest``."""
        rec = trace.active()
        t0 = clock.now() if rec is not None else 0.0
        _begin(1, self.world_of[dest])
        self.comm.Send(buf, dest, tag)
        _end()
        self._count_send(buf.nbytes, dest)
        if rec is not None:
            rec.complete("send", "p2p", t0, clock.now(), peer=dest, bytes=buf.nbytes)

    def recv(self, buf: Any, source: int, tag: int) -> None:
        """Blocking receive into ``buf`` from ``source``."""
        rec = trace.active()
        t0 = clock.now() if rec is not None else 0.0
        _begin(1, self.world_of[source])
        self.comm.Recv(buf, source, tag)
        _end()
        self._count_recv(buf.nbytes, source)
        if rec is not None:
            rec.complete("recv", "p2p", t0, clock.now(), peer=source, bytes=buf.nbytes)

    def recv_any(self, buf: Any, tag: int, sources: Any = None) -> int:
        """Blocking receive into ``buf`` from any source (arrival order); return the source.

        ``sources``: the ranks that may still send on ``tag`` before this rank answers
        any of them (the virtual transport serves the earliest in virtual time among
        them); ignored here. The message is probed, then received with ``recv``, so a
        subclass's link emulation, counting and trace apply to it as to any receive."""
        st = MPI.Status()
        self.comm.Probe(MPI.ANY_SOURCE, tag, st)
        src = st.Get_source()
        self.recv(buf, src, tag)
        return src

    def collective(self, kind: str, nbytes: int, remote: bool, comm: MPI.Comm, fn: Any,
                   *args: Any) -> None:
        """Run the MPI collective ``fn(*args)`` over ``comm`` (here: just call it).

        ``kind`` (allreduce, reduce, bcast, allgather), ``nbytes`` per rank and
        ``remote`` (it crosses nodes) let the virtual transport charge it."""
        _begin(comm.Get_size() - 1)
        fn(*args)
        _end()

    # --------------------------------------------------------- non-blocking
    def isend(self, buf: Any, dest: int, tag: int) -> Any:
        """Start sending ``buf`` to ``dest``; complete it with ``waitall``."""
        req = self.comm.Isend(buf, dest, tag)
        self._count_send(buf.nbytes, dest)
        if trace.active() is not None:
            self._posted[id(req)] = ("send", dest, buf.nbytes, clock.now())
        return req

    def irecv(self, buf: Any, source: int, tag: int) -> Any:
        """Start receiving into ``buf`` from ``source``; complete it with ``waitall``."""
        req = self.comm.Irecv(buf, source, tag)
        self._count_recv(buf.nbytes, source)
        if trace.active() is not None:
            self._posted[id(req)] = ("recv", source, buf.nbytes, clock.now())
        return req

    def waitall(self, requests: list) -> None:
        """Wait until every request from ``isend``/``irecv`` in ``requests`` has completed."""
        self._wait_requests(requests)
        rec = trace.active()
        if rec is not None and self._posted:
            t1 = clock.now()
            for r in requests:
                info = self._posted.pop(id(r), None)
                if info is not None:
                    name, peer, nbytes, t0 = info
                    rec.complete(name, "p2p", t0, t1, peer=peer, bytes=nbytes)

    def _wait_requests(self, requests: list) -> None:
        """Block until the MPI requests in ``requests`` complete.

        The one place where the transport waits on requests (``waitall`` and the
        emulated blocking calls all come here): a stall inspector wraps this
        method to see who waits on what, and for how long.
        """
        _begin(len(requests))
        MPI.Request.Waitall(requests)
        _end()


class BlockingByRequests:
    """The blocking calls as their non-blocking pair and one ``waitall``: for transports whose
    timing lives in ``isend``/``irecv``/``waitall`` (emulated links, the virtual clock).
    Put it before ``Transport`` in the bases."""

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int) -> None:
        r = self.irecv(recvbuf, source, tag)
        self.waitall([r, self.isend(sendbuf, dest, tag)])

    def send(self, buf: Any, dest: int, tag: int) -> None:
        self.waitall([self.isend(buf, dest, tag)])

    def recv(self, buf: Any, source: int, tag: int) -> None:
        self.waitall([self.irecv(buf, source, tag)])
