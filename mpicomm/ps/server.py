"""The server loop: own a key range's parameters and optimizer state, apply pushes, answer pulls.

One server owns ``params[lo:hi]`` and its momentum. It takes headers from any
worker (``MPI.ANY_SOURCE`` + status: arrival order), then that worker's gradient
range, and in each mode:

1. ``sync``: keep the push in the worker's row; when every running worker has
   pushed this step, sum the rows in worker order, scale by 1/W (the mean, as the
   allreduce loop), apply the optimizer once, and answer every worker's pull.
2. ``async``: apply the push at once and answer that worker's pull. Nobody waits
   for anybody. The rule (``--ps-momentum``): ``lookahead`` (default, DANA-Zero,
   ``ps.lookahead``: a velocity per worker, and the pull answered with where the
   parameters are heading) or ``shared`` (the loop's SGD on g/W, one velocity:
   stale gradients and momentum oscillate, docs/ps.md).
3. ``ssp`` (bound S): apply at once as async, but hold the reply to a worker
   that has pushed c steps until the slowest running worker has pushed c − S
   (c − min ≤ S): no worker starts a step more than S ahead of the slowest.

Checkpoints (sync): worker 0's SNAPSHOT header, sent between two steps, is
answered with this shard's momentum; the step cannot move on before worker 0
pushes again, so the snapshot is that of a step boundary. Its messages are not
counted in the run's bytes (``protocol.uncounted``).

Staleness of an applied push (recorded per push): the pushing worker's step
minus the step count of the slowest worker still running — 0 in sync, ≤ S in
ssp, whatever arrival order gave in async. ``lag``: updates the server applied
between this worker's pull and its push (in sync 0, in async ~W−1 and more).

Stopping: ``sync`` workers run their steps; ``async``/``ssp`` run until server 0
has applied ``budget`` pushes (steps × W: the work of the sync run) and says
stop in its status reply, so workers finish at different steps. A finished
worker sends DONE; it no longer counts as "the slowest". When every worker is
done the servers send their final ranges to all and return.

Compression (``codec``: an fp16/int8 codec of ``mpicomm.codecs``): a push
arrives encoded and is decoded before it is applied; a pull carries the
encoded *change* of the parameters since what that worker holds — the server
keeps each worker's copy (``view[i]``, W·n/S floats) and adds to it exactly
what the worker will add, so the rounding of one pull is sent with the next
(error feedback) and never accumulates. The final parameters are sent whole.

Cost per push, n/S keys: α + (n/S)·β to receive, (n/S)·γ' for the optimizer
(4 vector passes; 7 with look-ahead), α + (n/S)·β for the reply; a server's link carries 2·W·n/S
per step, as the dedicated ``ps`` reducer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mpicomm.core import clock, flops, trace
from mpicomm.ps import protocol as P
from mpicomm.ps.lookahead import LookAheadMomentum
from mpicomm.ps.sharding import Layout

__all__ = ["PSServer"]


class PSServer:
    """Server of one shard.

    Args:
        transport: the job's ``Transport`` (messages and byte counts).
        layout: roles and key ranges; this rank must be a server in it.
        params: this shard's initial parameters (owned from now on).
        make_optimizer: ``(params, grads, velocity) -> update(lr)`` — the training
            loop's SGD rule applied to this shard, in place.
        mode, staleness: ``sync`` | ``async`` | ``ssp`` and the ssp bound S.
        budget: async/ssp: pushes after which server 0 says stop (None: never).
        lookahead: async/ssp: the ``LookAheadMomentum`` for ``params`` (None: apply
            ``make_optimizer``'s rule to g/W, one shared velocity).
        velocity: the shared velocity to start from (a resumed sync run); zeros if None.
        codec: encode pushes and pulls with it (``encode``/``decode``/``wire_bytes`` of an
            fp16/int8 codec); None: plain floats.
        held: with a codec, the parameters the workers hold (the decoded pulls; a resumed
            run's checkpoint); ``params`` if None.
    """

    def __init__(self, transport: Any, layout: Layout, params: np.ndarray,
                 make_optimizer: Callable[..., Callable[[float], None]], mode: str,
                 staleness: int = 0, budget: int | None = None,
                 lookahead: LookAheadMomentum | None = None,
                 velocity: np.ndarray | None = None, codec: Any = None,
                 held: np.ndarray | None = None) -> None:
        self.p2p, self.layout, self.mode, self.S, self.budget = (transport, layout, mode,
                                                                 staleness, budget)
        self.shard = layout.shard_of(transport.rank)
        self.coordinator = self.shard == 0
        W, width = len(layout.workers), params.size
        self.W = W
        self.p = params
        self.v = np.zeros_like(params) if velocity is None else velocity
        self.g = np.empty_like(params)
        self.rows = np.empty((W, width), dtype=params.dtype) if mode == "sync" else None
        self.update = make_optimizer(self.p, self.g, self.v)
        self.lookahead = lookahead if mode != "sync" else None
        self.status = np.zeros((W, 2), dtype=np.float64)
        self.pushed = np.zeros(W, dtype=np.int64)      # pushes applied, per worker
        self.done = np.zeros(W, dtype=bool)
        self.pending = np.zeros(W, dtype=bool)         # ssp: reply held back
        self.arrived = np.zeros(W, dtype=bool)         # sync: pushed this step
        self.pulled_at = np.zeros(W, dtype=np.int64)   # version each worker last pulled
        self.version = self.applied = 0
        self.stale_max = self.stale_sum = self.lag_max = self.lag_sum = 0
        self._lr = 0.0
        self.codec = codec
        if codec is not None:  # messages and each worker's copy of the parameters, made once
            nb = codec.wire_bytes(width, params.dtype)  # int8: scales in the dtype
            self.msg_in = np.empty((W if mode == "sync" else 1, nb), dtype=np.uint8)
            self.msg_out = np.empty((W, nb), dtype=np.uint8)
            self.view = np.repeat((params if held is None else held)[None, :], W, axis=0)
            self.delta = np.empty_like(params)

    # ------------------------------------------------------------ the loop
    def serve(self) -> dict:
        """Apply pushes and answer pulls until every worker is done; return this server's counts."""
        p2p = self.p2p
        hdr = np.zeros(4, dtype=np.float64)
        workers = np.asarray(self.layout.workers)
        index = {r: i for i, r in enumerate(self.layout.workers)}
        while not self.done.all():
            # arrival order; the virtual clock takes the earliest in virtual time among the
            # workers that may send (not done, not waiting for a reply); through the
            # transport: emulated links, counting, trace
            may_send = workers[~(self.done | self.pending | self.arrived)]
            src = p2p.recv_any(hdr, P.TAG_HEADER, may_send)
            i = index[src]
            if hdr[0] == P.CMD_PUSH:
                _at_step(int(hdr[1]))  # --trace-steps: record the pushes of the traced steps
            if hdr[0] == P.CMD_DONE:
                self.done[i] = True
            elif hdr[0] == P.CMD_SNAPSHOT:  # sync, between two steps: this shard's momentum
                with P.uncounted(p2p, header_from=src):  # a checkpoint's, not the run's bytes
                    p2p.send(self.v, src, P.TAG_SNAPSHOT)
                    if self.codec is not None:  # and its exact parameters (workers hold pulls)
                        p2p.send(self.p, src, P.TAG_SNAPSHOT)
                continue
            elif self.mode == "sync":
                self._take_push(self.rows[i], i, src)
                self.arrived[i], self._lr = True, float(hdr[2])
            else:
                self._take_push(self.g, 0, src)
                self._record(i)
                self._lr = float(hdr[2])
                t0 = clock.now()
                if self.lookahead is not None:
                    self.lookahead.push(i, self.g, self._lr)
                else:
                    self.g *= 1.0 / self.W
                    flops.scale(self.g.size)
                    self.update(self._lr)
                _traced(f"apply push of worker {i}", t0)
                self.pushed[i] += 1
                self.version += 1
                self.applied += 1
                if self.mode == "async":
                    self._reply([i])
                else:
                    self.pending[i] = True
            self._release()
        self._final()
        return self.counts()

    def _take_push(self, into: np.ndarray, slot: int, src: int) -> None:
        """Receive a push from ``src`` into ``into`` (decoded when compressed)."""
        if self.codec is None:
            self.p2p.recv(into, src, P.TAG_PUSH)
        else:
            self.p2p.recv(self.msg_in[slot], src, P.TAG_PUSH)
            self.codec.decode(self.msg_in[slot], into)

    def _pull_message(self, i: int, sent: np.ndarray) -> np.ndarray:
        """What worker ``i`` receives: ``sent``, or the encoded change from its copy."""
        if self.codec is None:
            return sent
        np.subtract(sent, self.view[i], out=self.delta)
        msg = self.msg_out[i]
        self.codec.encode(self.delta, msg)
        self.codec.decode(msg, self.delta)
        self.view[i] += self.delta  # exactly what the worker adds to its parameters
        flops.charge(sent.size, 3 * sent.size)  # the subtraction (the add: below)
        flops.add(sent.size)
        return msg

    def _release(self) -> None:
        """sync: finish a complete step; ssp: answer the pulls the bound now allows."""
        running = ~self.done
        if not running.any():
            return
        if self.mode == "sync":
            if self.arrived[running].all() and self.arrived.any():
                self._apply_step()
        elif self.mode == "ssp":
            slowest = self.pushed[running].min()
            ready = np.flatnonzero(self.pending & (self.pushed - slowest <= self.S))
            if ready.size:
                self.pending[ready] = False
                self._reply(ready)

    def _apply_step(self) -> None:
        t0 = clock.now()
        who = np.flatnonzero(self.arrived)
        for i in who:
            self._record(i)
        if who.size == self.W:
            np.add.reduce(self.rows, axis=0, out=self.g)
        else:  # a worker has left early (sync workers normally all run the same steps)
            np.add.reduce(self.rows[who], axis=0, out=self.g)
        flops.charge(self.g.size * (who.size - 1), self.g.size * (who.size + 1))  # one pass
        self.g *= 1.0 / self.W
        flops.scale(self.g.size)
        self.update(self._lr)
        _traced(f"apply step {self.version}", t0)
        self.pushed[who] += 1
        self.version += 1
        self.applied += who.size
        self.arrived[:] = False
        self._reply(who)

    def _record(self, i: int) -> None:
        running = ~self.done
        ahead = int(self.pushed[i] - self.pushed[running].min()) if running.any() else 0
        ahead = max(ahead, 0)
        lag = self.version - int(self.pulled_at[i])
        self.stale_max = max(self.stale_max, ahead)
        self.stale_sum += ahead
        self.lag_max = max(self.lag_max, lag)
        self.lag_sum += lag

    def _reply(self, who: Any) -> None:
        """Send status and this shard's parameters to the workers ``who`` (indices)."""
        p2p, workers = self.p2p, self.layout.workers
        stop = float(self.coordinator and self.budget is not None and
                     self.applied >= self.budget)
        sent = self.p if self.lookahead is None else self.lookahead.reply(self._lr)
        reqs = []
        for i in who:
            self.status[i] = (stop, self.version)
            self.pulled_at[i] = self.version
            reqs.append(p2p.isend(self.status[i], workers[i], P.TAG_STATUS))
            reqs.append(p2p.isend(self._pull_message(i, sent), workers[i], P.TAG_PULL))
        p2p.waitall(reqs)  # the parameters may change once the replies are out

    def _final(self) -> None:
        p2p = self.p2p
        p2p.waitall([p2p.isend(self.p, w, P.TAG_FINAL) for w in self.layout.workers])

    def counts(self) -> dict:
        """This server's record: pushes applied (total, per worker), staleness and lag."""
        n = max(self.applied, 1)
        return {"pushes_applied": int(self.applied),
                "pushes_by_worker": [int(c) for c in self.pushed],
                "staleness_max": int(self.stale_max), "staleness_mean": self.stale_sum / n,
                "lag_max": int(self.lag_max), "lag_mean": self.lag_sum / n,
                "versions": int(self.version)}


def _at_step(step: int) -> None:
    """Tell the trace's recorder (when one is set) which worker step the server now serves."""
    rec = trace.active()
    if rec is not None:
        rec.at_step(step)


def _traced(name: str, t0: float) -> None:
    """Record the server's optimizer work on the trace's timeline (when one is recording)."""
    rec = trace.active()
    if rec is not None:
        rec.complete(name, "server", t0, clock.now(), thread="training")
