"""The transport with emulated links: each message held to latency + m/bandwidth of its link.

Semantics (issue 7 §2): each rank has one emulated interface per link class
(inter-node, intra-node). A message of m bytes to a peer of an emulated class
holds the sender's interface of that class for latency + m/bandwidth; a rank's
messages on one class queue (``Interface.reserve``), different ranks' do not.
When the real transfer takes longer, nothing is added.

How (one header per emulated message, only while emulation is on):

1. ``isend``: book the message on the sender's interface -> emulated finish
   time F (perf_counter seconds); ``Isend`` an 8-byte header holding F, then
   the payload, with the same tag. MPI's non-overtaking rule matches the
   header with the receiver's header receive, posted first.
2. ``irecv``: ``Irecv`` the header, then the payload.
3. ``waitall``: wait for the real transfers, then sleep until the latest F
   among them — a send's own F, a receive's F from its header. So a receiver
   never has a message before its emulated arrival (the sender sleeping after
   its send would not stop it), and the real copy overlaps the emulated time
   instead of adding to it (as sleeping before the send would). The real wait
   of a batch holding an emulated message sleeps too: ``Testall`` every
   ``POLL_SECONDS`` instead of MPI's busy ``Waitall``, so ranks waiting on the
   emulated network leave the cores to the ranks copying (8 ranks on 2 cores).
   A batch of plain messages only waits as ``Transport`` does.

Blocking ``sendrecv``/``send``/``recv`` are ``isend``/``irecv`` + ``waitall``.
Peers on a class that is not emulated get plain messages (no header).

F is a ``time.perf_counter()`` value of the sender: CLOCK_MONOTONIC, shared by
every process of one host, which is where emulation is meant to be used (a
cluster rehearsed on one host with ``ranks_per_node``). Across real hosts the
clocks differ; see docs/links.md.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.core import trace
from mpicomm.core.links import LinkSpec
from mpicomm.p2p import stall
from mpicomm.p2p.links import Interface, sleep_until
from mpicomm.p2p.transport import BlockingByRequests, Traffic, Transport

__all__ = ["EmulatedTransport", "POLL_SECONDS"]

POLL_SECONDS = 1e-4  # real-transfer poll period while an emulated message is pending


class _Pending:
    """One posted emulated-transport message: its MPI requests and emulated finish."""

    __slots__ = ("reqs", "finish", "header", "name", "peer", "nbytes", "t0")

    def __init__(self, reqs, finish, header, name, peer, nbytes, t0) -> None:
        self.reqs = reqs
        self.finish = finish  # send: own finish time; receive: 0 (the header tells)
        self.header = header  # receive: the header buffer; send: the buffer to recycle
        self.name, self.peer, self.nbytes, self.t0 = name, peer, nbytes, t0


class EmulatedTransport(BlockingByRequests, Transport):
    """``Transport`` whose inter-node and/or intra-node links are emulated (module docstring).

    Args:
        comm, node_of, counts: as ``Transport``.
        inter_link, intra_link: ``LinkSpec`` of the emulated classes (None: real).
    """

    emulated = True

    def __init__(self, comm: MPI.Comm, node_of: list[int], counts: Traffic | None,
                 inter_link: LinkSpec | None, intra_link: LinkSpec | None) -> None:
        super().__init__(comm, node_of, counts)
        self.inter_link, self.intra_link = inter_link, intra_link
        inter = Interface(inter_link) if inter_link is not None else None
        intra = Interface(intra_link) if intra_link is not None else None
        self._iface = [inter if r else intra for r in self.remote]  # per peer; None: real link
        self._spare: list[np.ndarray] = []  # header buffers, reused

    def describe(self) -> dict:
        d = super().describe()
        d.update(inter_link=None if self.inter_link is None else str(self.inter_link),
                 intra_link=None if self.intra_link is None else str(self.intra_link))
        return d

    def _header(self) -> np.ndarray:
        return self._spare.pop() if self._spare else np.zeros(1, dtype=np.float64)

    # --------------------------------------------------------- non-blocking
    def isend(self, buf: Any, dest: int, tag: int) -> _Pending:
        nbytes = buf.nbytes
        self._count_send(nbytes, dest)
        now = time.perf_counter()
        iface = self._iface[dest]
        if iface is None:
            return _Pending([self.comm.Isend(buf, dest, tag)], 0.0, None, "send", dest, nbytes,
                            now)
        header = self._header()
        header[0] = finish = iface.reserve(nbytes, now)
        reqs = [self.comm.Isend(header, dest, tag), self.comm.Isend(buf, dest, tag)]
        return _Pending(reqs, finish, header, "send", dest, nbytes, now)

    def irecv(self, buf: Any, source: int, tag: int) -> _Pending:
        nbytes = buf.nbytes
        self._count_recv(nbytes, source)
        now = time.perf_counter()
        if self._iface[source] is None:
            return _Pending([self.comm.Irecv(buf, source, tag)], 0.0, None, "recv", source,
                            nbytes, now)
        header = self._header()
        reqs = [self.comm.Irecv(header, source, tag), self.comm.Irecv(buf, source, tag)]
        return _Pending(reqs, 0.0, header, "recv", source, nbytes, now)

    def waitall(self, requests: list) -> None:
        reqs = [r for p in requests for r in p.reqs]
        if any(p.header is not None for p in requests):
            self._sleep_wait(reqs)
        else:
            self._wait_requests(reqs)
        finish = 0.0
        for p in requests:
            if p.header is not None:
                f = p.finish if p.finish else float(p.header[0])
                finish = f if f > finish else finish
                self._spare.append(p.header)
                p.header = None
        sleep_until(finish)  # the emulated arrival / departure; at once if already past
        rec = trace.active()
        if rec is not None:
            t1 = time.perf_counter()
            for p in requests:
                rec.complete(p.name, "p2p", p.t0, t1, peer=p.peer, bytes=p.nbytes)

    def _sleep_wait(self, requests: list) -> None:
        """Like ``_wait_requests`` (the one place that waits on requests), sleeping between
        ``Testall`` polls instead of spinning in MPI."""
        stall.wait_begin(len(requests))  # watched as every wait (p2p/stall.py, 2a.)
        while not MPI.Request.Testall(requests):
            time.sleep(POLL_SECONDS)
        stall.wait_end()

