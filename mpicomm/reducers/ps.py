"""ps: a centralised parameter server — workers push, servers sum, workers pull.

W workers, S servers. The buffer is split into S contiguous key ranges
(``chunk_bounds(n, S)``, as ps-lite shards keys); server s owns range s.

Per call:

1. Push: every worker sends range s of its buffer to server s (``Isend``).
2. Reduce: server s receives range s from every worker into preallocated
   rows and sums them (op="mean" scales the sum once). Colocated servers take
   the pushes in pieces of at most ``PIECE_BYTES`` (as the ring does) and add
   each piece while it is still in cache.
3. Pull: server s sends the summed range s back to every worker, which
   receives it in place (``Irecv`` straight into the buffer).

Placement:

- ``dedicated=False`` (default): servers are colocated with workers, on ranks
  ``s·p//S`` (spread out, so on real nodes they land on different nodes); all p
  ranks are workers and a server's own range needs no message.
- ``dedicated=True``: the last S ranks only serve (``is_worker`` False; they
  call ``serve()``, which returns once every worker has called ``close()``);
  the first p-S ranks are workers. Each push starts with a 32-byte header
  (command, length, dtype, op), so a server checks on every call that all
  workers agree and learns when they are done.

Compressed (colocated only; ``dedicated=True`` servers speak float32): fp16/int8
are the steps' ``wire``: each worker pushes range s whole and encoded (the input
scaled by 1/W first for op="mean"); server s decodes and adds every push in the
buffer's dtype (no re-quantised partial sums), encodes the sum once, rounds its
own copy to it (``seal``) and sends it encoded; workers decode it into place.
Each input is rounded once, the sum once: fp16 |err| ≤ 2^-11·(Σ_r|x_r| + |Σ_r x_r|)
·(1 + 2^-11); int8 |err| ≤ Σ_r scale(x_r)/2 + scale(sum)/2. top-k pushes sparse
pairs per range and pulls the sum back sparse (``_sparse``).

Cost, for S servers each owning n/S bytes (W pushes into each server link):

    T_ps ≈ 2(W-1)·α + 2·(W-1)·(n/S)·β + (W-1)·(n/S)·γ   (colocated; W instead of W-1
                                                         when dedicated)
    compressed (b bytes a value): 2(W-1)·α + 2·(W-1)·(n/S)·b·β + (W-1)·(n/S)·(γ + ε) + 2·n·ε

(Colocated pushes travel in ⌈(n/S)/PIECE_BYTES⌉ rounds, each ending in a
``Waitall``: that many extra α, negligible next to a 1 MiB piece's transfer.)

With emulated links (docs/links.md) only the *sender's* interface is held, so
the pushes of workers on other nodes travel in parallel while a server's
answers queue on its interface: T ≈ ⌈(n/S)/piece⌉·(α + piece·β) + k·(α + (n/S)·β)
+ adds, k = the workers on other nodes (``costmodel.ps_time_interfaces``).

With S = 1 the server's link carries 2(W-1)·n bytes: linear in the number of
workers, the bottleneck the ring removes. With S = W colocated servers each
link carries 2(W-1)/W·n, as much as the ring — the BytePS argument — and the
latency term is paid in parallel, not in sequence.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicomm.core import flops, tags
from mpicomm.core.backend import array_module, sync_device
from mpicomm.core.codes import CODE_DTYPES, DTYPE_CODES, DTYPE_NAMES, OP_MEAN, OP_NAMES, OP_SUM
from mpicomm.core.errors import ConfigError
from mpicomm.reducers.base import MismatchError, Reducer
from mpicomm.reducers.ring import PIECE_BYTES, chunk_bounds, piece_items
from mpicomm.reducers.sparse import SlotBuffer

__all__ = ["ParameterServerReducer"]

_TAG_HEADER, _TAG_PUSH, _TAG_PULL, _TAG_COUNT = (tags.PS_HEADER, tags.PS_PUSH, tags.PS_PULL,
                                                 tags.PS_COUNT)
_CMD_REDUCE, _CMD_CLOSE = 1, 2


class _Plan:
    """Shard bounds, per-worker receive rows and byte counts for one buffer shape."""

    def __init__(
        self,
        n: int,
        dtype,
        xp,
        servers: list[int],
        my_shard: int | None,
        n_senders: int,
        dedicated: bool,
        rows_store: dict,
    ) -> None:
        self.bounds = chunk_bounds(n, len(servers))
        self.largest = max(self.bounds[i + 1] - self.bounds[i] for i in range(len(servers)))
        self.piece = piece_items(np.dtype(dtype).itemsize)
        self.rows = self.acc = None
        if my_shard is not None:
            width = self.bounds[my_shard + 1] - self.bounds[my_shard]
            senders = max(n_senders, 1)
            if dedicated:  # whole ranges, summed into acc
                self.rows = xp.empty((senders, width), dtype=dtype)
                self.acc = xp.empty(width, dtype=dtype)
            else:  # piece by piece, in rows shared by every length (see ``rows_store``)
                per_row = max(min(width, self.piece), 1)
                need = senders * per_row * np.dtype(dtype).itemsize
                raw = rows_store.get(xp.__name__)
                if raw is None or raw.nbytes < need:  # at most senders x one piece
                    raw = rows_store[xp.__name__] = xp.empty(senders * PIECE_BYTES, dtype=np.uint8)
                self.rows = raw[:need].view(dtype).reshape(senders, per_row)


class ParameterServerReducer(Reducer):
    """Parameter-server AllReduce with S sharded servers, colocated or dedicated."""

    name = "ps"
    compressions = ("fp16", "int8", "topk")

    @classmethod
    def check_compress(cls, options, able=None) -> None:
        super().check_compress(options, able)
        if options.dedicated and options.compress != "none":
            raise ConfigError(f"compress={options.compress!r}: ps with dedicated servers is not "
                              f"supported (their serve() loop speaks float32); use colocated "
                              f"servers (dedicated=False) or strategy ring/hierarchical")

    def __init__(self, comm, options, **kw) -> None:
        # placement is checked before super() duplicates the communicator: no message yet
        p = (MPI.COMM_WORLD if comm is None else comm).Get_size()
        S = options.servers
        if options.dedicated and S >= p:
            raise ConfigError(
                f"ps: dedicated=True needs at least one worker: servers={S} with {p} ranks"
            )
        if not options.dedicated and S > p:
            raise ConfigError(f"ps: servers={S} exceeds the {p} ranks (colocated servers)")
        super().__init__(comm, options, **kw)
        self.dedicated = options.dedicated
        if self.dedicated:
            self.servers = list(range(p - S, p))
            self.workers = list(range(p - S))
        else:
            self.servers = [s * p // S for s in range(S)]
            self.workers = list(range(p))
        self.shard = self.servers.index(self.rank) if self.rank in self.servers else None
        self.is_worker = self.rank in self.workers
        self.num_workers = len(self.workers)
        self.worker_rank = self.workers.index(self.rank) if self.is_worker else None
        if self.stall_channel is not None:  # a dedicated server makes no calls: never "behind"
            self.stall_channel.participants = list(self.workers)
        if self.dedicated:
            # first-use agreement among workers only; servers check headers per call
            color = 0 if self.is_worker else MPI.UNDEFINED
            sub = self.comm.Split(color, key=self.rank)
            self._agree_comm = sub if sub != MPI.COMM_NULL else None
        self._plans: dict[tuple, _Plan] = {}
        self._rows: dict = {}  # array module -> colocated receive rows, senders x one piece
        self._others = [w for w in self.workers if w != self.rank]  # peers of a server
        self._sp_push, self._sp_rows, self._sp_pulls = SlotBuffer(), SlotBuffer(), SlotBuffer()
        self._sp_counts = np.zeros(S, dtype=np.int64)  # top-k: pairs each server sends back
        self._header = np.zeros(4, dtype=np.int64)
        node = self.p2p.node_of
        here = [r for r in range(p) if node[r] == node[self.rank]]
        # (send, receive) ranks of this node on its interfaces at once: pushes leave from
        # the node's workers and arrive at its servers; the answers go the other way
        self._push_shares = (sum(r in self.workers for r in here),
                             sum(r in self.servers for r in here))
        self._pull_shares = self._push_shares[::-1]

    def crossing_ranks(self) -> int:
        """Every rank of a node may push across at once (each call sets the push's and the
        pull's own counts per direction: ``_push_shares``)."""
        return self.comm.Get_size()

    def describe(self) -> dict:
        d = super().describe()
        d.update(servers=self.servers, dedicated=self.dedicated)
        return d

    def _plan(self, n: int, dtype, xp) -> _Plan:
        key = (n, np.dtype(dtype).char, xp.__name__)
        plan = self._plans.get(key)
        if plan is None:
            senders = self.num_workers - (0 if self.dedicated else 1)
            plan = _Plan(
                n, dtype, xp, self.servers, self.shard, senders, self.dedicated, self._rows
            )
            self._plans[key] = plan
        return plan

    # ------------------------------------------------------------ colocated
    def _allreduce(self, flat, scale):
        if self.dedicated:
            return self._worker_call(flat, scale)
        p2p, me, wire = self.p2p, self.rank, self.wire
        plan = self._plan(flat.size, flat.dtype, array_module(flat))
        b = plan.bounds
        others = self._others
        lo_me = b[self.shard] if self.shard is not None else 0
        hi_me = b[self.shard + 1] if self.shard is not None else 0
        # 1-3. push and sum piece by piece (the count comes from the largest range, so
        # every rank agrees); each received piece is added while still in cache.
        # A wire pushes each range whole, encoded, and the server adds the decoded pushes.
        piece = plan.piece if wire is None else max(plan.largest, 1)
        if wire is not None:
            def nb(m: int) -> int:
                return wire.nbytes(m, flat.dtype)
        p2p.cross_at_once(*self._push_shares)
        for off in range(0, max(plan.largest, 1), piece):
            reqs = []
            if self.shard is not None:  # server: receive this piece from every other worker
                m = max(min(hi_me - lo_me - off, piece), 0)
                for i, w in enumerate(others):
                    row = plan.rows[i, :m] if wire is None else wire.slot(i, nb(m))
                    reqs.append(p2p.irecv(row, w, _TAG_PUSH))
            for s, server in enumerate(self.servers):  # worker: push this piece of range s
                if server != me:
                    lo = min(b[s] + off, b[s + 1])
                    part = flat[lo : min(lo + piece, b[s + 1])]
                    msg = part if wire is None else wire.encode(part, ("push", s))
                    reqs.append(p2p.isend(msg, server, _TAG_PUSH))
            p2p.waitall(reqs)
            if self.shard is not None and m:
                mine = flat[lo_me + off : lo_me + off + m]
                for i in range(len(others)):
                    if wire is None:
                        np.add(mine, plan.rows[i, :m], out=mine)
                        flops.add(m)
                    else:
                        wire.decode_add(wire.slot(i, nb(m)), mine)
                if not isinstance(flat, np.ndarray):  # the next piece's Irecv reuses rows
                    sync_device(mine)
        own = send_own = flat[lo_me:hi_me]
        if self.shard is not None:
            if scale is not None:
                own *= scale
                flops.scale(own.size)
            sync_device(own)
            if wire is not None:  # the server keeps exactly what the workers decode
                send_own = wire.seal(own, "pull")
        # 4. pull every other server's range into place; serve own range to all
        p2p.cross_at_once(*self._pull_shares)
        pulls = []
        for s, server in enumerate(self.servers):
            if server != me:
                part = flat[b[s] : b[s + 1]]
                got = part if wire is None else wire.slot(("pull", s), nb(part.size))
                pulls.append(p2p.irecv(got, server, _TAG_PULL))
        if self.shard is not None:
            for w in others:
                pulls.append(p2p.isend(send_own, w, _TAG_PULL))
        p2p.waitall(pulls)
        if wire is not None:
            for s, server in enumerate(self.servers):
                if server != me:
                    part = flat[b[s] : b[s + 1]]
                    wire.decode(wire.slot(("pull", s), nb(part.size)), part)

    def _sparse(self, flat, scale, residual) -> None:
        """top-k (colocated): workers push sparse per range, servers pull back the sum, sparse.

        Range s has n_s values; each worker selects k_s = ceil(RATIO·n_s) pairs in it
        (top-k per range, so every push has a size the server knows).

        1. encode per range s the k_s largest of x + residual (relative indices), push;
        2. server s zeroes its range and adds the W pushes in worker order; mean scales;
        3. pull: the server sends its count c of non-zeros (8 bytes), then c ≤ W·k_s pairs;
        4. each worker zeroes every other range and scatters the pulled pairs into it.

            T ≈ 4(W-1)·α + (W-1)·k_s·P·β (push) + (W-1)·c·P·β (pull) + O(n)   (P = 4 + w)
            bytes sent per worker ≈ RATIO·n·P + 8·S; per server also (W-1)·(8 + c·P)
        """
        p2p, ef, me, sh, S = self.p2p, self.feedback, self.rank, self.shard, len(self.servers)
        codec = ef.codec
        b = self._plan(flat.size, flat.dtype, np).bounds
        ks = [codec.k_of(b[s + 1] - b[s]) for s in range(S)]
        nbs = [codec.pair_bytes(k, flat.itemsize) for k in ks]
        slot = max(nbs)
        push = self._sp_push.reserve(S, slot)  # 1.
        for s in range(S):
            ef.encode(flat[b[s] : b[s + 1]], push[s * slot :],
                      None if residual is None else residual[b[s] : b[s + 1]])
        W = len(self._others) + 1
        rows = self._sp_rows.reserve(W, slot)
        reqs = []
        p2p.cross_at_once(*self._push_shares)
        if sh is not None:
            reqs = [p2p.irecv(rows[i * slot : i * slot + nbs[sh]], w, _TAG_PUSH)
                    for i, w in enumerate(self._others)]
            rows[(W - 1) * slot : (W - 1) * slot + nbs[sh]] = push[sh * slot : sh * slot + nbs[sh]]
        reqs += [p2p.isend(push[s * slot : s * slot + nbs[s]], server, _TAG_PUSH)
                 for s, server in enumerate(self.servers) if server != me]
        p2p.waitall(reqs)
        cap = W * slot
        p2p.cross_at_once(*self._pull_shares)
        pulls = self._sp_pulls.reserve(S, cap)
        counts = self._sp_counts
        sends = []
        if sh is not None:  # 2.-3.
            own = flat[b[sh] : b[sh + 1]]
            own.fill(0)
            for i in range(W):
                codec.decode_add(rows[i * slot :], ks[sh], own)
            if scale is not None:
                own *= scale
                flops.scale(own.size)
            nz = np.flatnonzero(own).astype(np.int32)
            c = counts[sh] = nz.size
            msg = pulls[sh * cap :]
            idx, val = codec.split(msg, c, flat.dtype)
            idx[:] = nz
            np.take(own, nz, out=val)
            sends = [p2p.isend(counts[sh : sh + 1], w, _TAG_COUNT) for w in self._others]
            sends += [p2p.isend(msg[: codec.pair_bytes(c, flat.itemsize)], w, _TAG_PULL)
                      for w in self._others]
        others = [(s, server) for s, server in enumerate(self.servers) if server != me]  # 4.
        p2p.waitall([p2p.irecv(counts[s : s + 1], server, _TAG_COUNT) for s, server in others])
        got = [p2p.irecv(pulls[s * cap : s * cap + codec.pair_bytes(int(counts[s]),
                                                                    flat.itemsize)],
                         server, _TAG_PULL) for s, server in others]
        p2p.waitall(got + sends)
        for s, _ in others:
            part = flat[b[s] : b[s + 1]]
            part.fill(0)
            codec.decode_add(pulls[s * cap :], int(counts[s]), part)

    # ------------------------------------------------------------ dedicated
    def _worker_call(self, flat, scale):
        p2p = self.p2p
        b = self._plan(flat.size, flat.dtype, array_module(flat)).bounds
        h = self._header
        h[:] = (_CMD_REDUCE, flat.size, DTYPE_CODES[flat.dtype],
                OP_MEAN if scale is not None else OP_SUM)
        reqs = []
        p2p.cross_at_once(*self._push_shares)
        for s, server in enumerate(self.servers):
            reqs.append(p2p.isend(h, server, _TAG_HEADER))
            reqs.append(p2p.isend(flat[b[s] : b[s + 1]], server, _TAG_PUSH))
        p2p.waitall(reqs)
        p2p.cross_at_once(*self._pull_shares)
        p2p.waitall([p2p.irecv(flat[b[s] : b[s + 1]], server, _TAG_PULL)
                     for s, server in enumerate(self.servers)])

    def serve(self) -> None:
        """Sum pushes and answer pulls until every worker has called ``close()``."""
        if self._closed:
            raise RuntimeError("ps: this reducer is closed")
        if self.is_worker:
            raise RuntimeError(f"ps: rank {self.rank} is a worker, not a dedicated server")
        import time

        p2p, W = self.p2p, self.num_workers
        headers = np.zeros((W, 4), dtype=np.int64)
        # a worker that never calls again nor close()s would leave this server waiting
        # silently: after MPICOMM_STALL_WARN_S seconds (default 60; 0: never) say which
        import os

        warn_s = float(os.environ.get("MPICOMM_STALL_WARN_S", "60") or 0)
        while True:
            # 1. one header from every worker: all reduce the same shape, or all close
            reqs = [p2p.irecv(headers[i], w, _TAG_HEADER) for i, w in enumerate(self.workers)]
            if warn_s > 0 and not p2p.emulated:  # emulated requests wait in the transport
                self._wait_headers(reqs, warn_s)
            p2p.waitall(reqs)
            t0 = time.perf_counter()
            cmds = headers[:, 0]
            if (cmds == _CMD_CLOSE).all():
                return
            if not (headers == headers[0]).all():
                raise MismatchError(self._header_mismatch(headers))
            _, n, dtype_code, opcode = (int(x) for x in headers[0])
            plan = self._plan(n, CODE_DTYPES[dtype_code], np)
            rows = plan.rows
            # 2. receive every worker's range, sum, scale once
            p2p.cross_at_once(*self._push_shares)
            p2p.waitall([p2p.irecv(rows[i], w, _TAG_PUSH) for i, w in enumerate(self.workers)])
            acc = plan.acc
            np.add.reduce(rows, axis=0, out=acc)
            flops.charge(acc.size * (W - 1), acc.size * (W + 1))  # one pass over W rows
            if opcode == OP_MEAN:
                acc *= 1.0 / W
                flops.scale(acc.size)
            # 3. answer the pulls
            p2p.cross_at_once(*self._pull_shares)
            p2p.waitall([p2p.isend(acc, w, _TAG_PULL) for w in self.workers])
            self.stats.add(time.perf_counter() - t0)

    def _wait_headers(self, reqs: list, warn_s: float) -> None:
        """Wait for the workers' headers; every ``warn_s`` seconds name the silent ones.

        Polls (``Testall``) without sleeping for the first millisecond, so a
        server answering a busy job adds no latency, then sleeps 100 µs between
        polls: a server that waits for minutes does not hold a core.
        """
        import sys
        import time

        started = time.monotonic()
        fast_until, deadline = started + 1e-3, started + warn_s
        while not MPI.Request.Testall(reqs):
            now = time.monotonic()
            if now > fast_until:
                time.sleep(1e-4)
            if now > deadline:
                deadline += warn_s
                silent = [w for w, r in zip(self.workers, reqs, strict=True) if not r.Test()]
                if silent:
                    sys.stderr.write(
                        f"mpicomm: ps: server rank {self.rank} has waited {now - started:.0f} s "
                        f"for workers {silent} (no allreduce, no close()): a worker that ends "
                        "without close() (or `with make_reducer(...)`) leaves its server "
                        "waiting\n")
                    sys.stderr.flush()

    def _header_mismatch(self, headers: np.ndarray) -> str:
        parts = []
        for w, h in zip(self.workers, headers, strict=True):
            if h[0] == _CMD_CLOSE:
                parts.append(f"rank {w}: closed")
            else:
                parts.append(
                    f"rank {w}: {h[1]} elements {DTYPE_NAMES.get(int(h[2]), h[2])} "
                    f"op {OP_NAMES.get(int(h[3]), h[3])}"
                )
        return f"ps: server rank {self.rank}: workers disagree: " + "; ".join(parts)

    def _release(self) -> None:
        """Tell every dedicated server this worker is done; free the workers' communicator."""
        if self.dedicated and self.is_worker:
            self._header[:] = (_CMD_CLOSE, 0, 0, 0)
            p2p = self.p2p
            p2p.waitall([p2p.isend(self._header, s, _TAG_HEADER) for s in self.servers])
        if self._agree_comm is not None and self._agree_comm is not self.comm:
            self._agree_comm.Free()
