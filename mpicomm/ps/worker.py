"""The worker's side of the parameter server: push gradients, pull parameters.

``PSWorker.push_pull`` posts, for every server s, the receives of s's status
and parameter range straight into the model's buffer, then sends the header
and gradient range, and waits for all of them (one ``waitall``: the pushes to
different servers travel in parallel). Cost per step, S servers of n/S keys:

    T ≈ 2α + 2·(n/S)·β   per server, servers in parallel (plus the server's wait
                         for the other pushes in sync mode)

With a codec (fp16/int8) the push is the encoded gradient range and the pull
the encoded change of the parameters (``PSServer``: error feedback through the
server's copy of this worker's parameters), which the worker decodes and adds:
β's n/S becomes ``codec.wire_bytes(n/S)``, plus an encode and a decode pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.ps import protocol as P
from mpicomm.ps.sharding import Layout

__all__ = ["PSWorker"]


class PSWorker:
    """A worker's client of the S servers in ``layout`` (messages through ``transport``)."""

    name = "ps"

    def __init__(self, transport: Any, layout: Layout, channel: Any = None,
                 label: str = "ps", codec: Any = None, dtype: Any = np.float32) -> None:
        """``channel``: the stall inspector's ``Channel`` (each push/pull is one call);
        ``codec``: encode pushes and decode pulls with it (None: plain floats of ``dtype``)."""
        self.p2p, self.layout, self.label, self.channel = transport, layout, label, channel
        S, b = len(layout.servers), layout.bounds
        self.header = np.zeros(4, dtype=np.float64)
        self.status = np.zeros((S, 2), dtype=np.float64)
        self.steps = 0
        self.codec = codec
        if codec is not None:  # one message buffer per server and direction, made once
            sizes = [b[s + 1] - b[s] for s in range(S)]
            self.push_msg = [np.empty(codec.wire_bytes(n, dtype), dtype=np.uint8)
                             for n in sizes]
            self.pull_msg = [np.empty(codec.wire_bytes(n, dtype), dtype=np.uint8)
                             for n in sizes]
            self.delta = [np.empty(n, dtype=dtype) for n in sizes]

    def push_pull(self, grads: Any, params: Any, step: int, lr: float) -> bool:
        """Push ``grads``, receive the servers' ``params`` in place; return True to stop.

        The stop flag comes from server 0 (async/ssp: the step budget is spent).
        """
        p2p, b, h = self.p2p, self.layout.bounds, self.header
        h[:] = (P.CMD_PUSH, step, lr, 0.0)
        ch = self.channel
        call = ch.begin(self.label) if ch is not None else 0.0
        codec, reqs = self.codec, []
        for s, srv in enumerate(self.layout.servers):
            reqs.append(p2p.irecv(self.status[s], srv, P.TAG_STATUS))
            into = params[b[s] : b[s + 1]] if codec is None else self.pull_msg[s]
            reqs.append(p2p.irecv(into, srv, P.TAG_PULL))
        for s, srv in enumerate(self.layout.servers):
            reqs.append(p2p.isend(h, srv, P.TAG_HEADER))
            push = grads[b[s] : b[s + 1]]
            if codec is not None:
                codec.encode(push, self.push_msg[s])
                push = self.push_msg[s]
            reqs.append(p2p.isend(push, srv, P.TAG_PUSH))
        p2p.waitall(reqs)
        if codec is not None:  # add the servers' encoded change to this worker's copy
            for s in range(len(self.layout.servers)):
                codec.decode(self.pull_msg[s], self.delta[s])
                params[b[s] : b[s + 1]] += self.delta[s]
        if call:
            ch.end(call)
        self.steps += 1
        return bool(self.status[0, 0])

    def snapshot(self, momentum: Any, params: Any = None) -> None:
        """Between two sync steps: receive every server's momentum range into ``momentum``;
        with a codec also its exact parameters into ``params`` (this worker holds the decoded
        pulls, which differ from them by the rounding the next pull will carry)."""
        with P.uncounted(self.p2p):  # a checkpoint's messages, not the run's bytes per step
            self._ask(P.CMD_SNAPSHOT, momentum, P.TAG_SNAPSHOT,
                      params if self.codec is not None else None)

    def finish(self, params: Any) -> None:
        """Tell every server this worker is done; receive the final parameters in place."""
        self._ask(P.CMD_DONE, params, P.TAG_FINAL)

    def _ask(self, cmd: float, into: Any, tag: int, then: Any = None) -> None:
        """Send header (cmd, steps) to every server; receive each one's range of ``into``
        (and then, same tag, of ``then``)."""
        p2p, b = self.p2p, self.layout.bounds
        self.header[:] = (cmd, self.steps, 0.0, 0.0)
        reqs = [p2p.irecv(buf[b[s] : b[s + 1]], srv, tag)
                for buf in (into, then) if buf is not None
                for s, srv in enumerate(self.layout.servers)]
        reqs += [p2p.isend(self.header, srv, P.TAG_HEADER) for srv in self.layout.servers]
        p2p.waitall(reqs)
