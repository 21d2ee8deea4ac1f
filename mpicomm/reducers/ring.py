"""ring: bandwidth-optimal AllReduce as a reduce-scatter followed by an allgather.

p ranks sit on a ring; rank i sends to i+1 and receives from i-1. The buffer of
n bytes is cut into p segments with ``np.array_split`` boundaries (any n works,
also n < p: some segments are empty).

1. Reduce-scatter, p-1 steps. At step k, rank i sends segment (i-1-k) mod p to
   the right and receives segment (i-2-k) mod p from the left into a scratch
   buffer, then adds it into its own copy of that segment. After p-1 steps rank
   i holds the full sum of segment i. A segment larger than ``PIECE_BYTES`` moves
   as consecutive pieces, each added as soon as it arrives: the scratch piece is
   still in cache when it is read, which saves one trip through memory (16 MiB
   on 2 ranks here: 1.25 ms instead of 1.55 ms; 64 MiB: 6.1 ms instead of 8.6 ms).
2. (op="mean") rank i scales segment i by 1/p: 1/p of the buffer, once.
3. Allgather, p-1 steps. At step k, rank i sends segment (i-k) mod p to the
   right and receives segment (i-1-k) mod p from the left, straight into the
   buffer. After p-1 steps every rank holds every reduced segment.

Compressed (``compress``): fp16/int8 are the steps' ``wire`` (``mpicomm.codecs.Wire``):
step 0 scales the input by 1/p (op="mean"); in step 1 each hop encodes the
partial sum it sends and the receiver decodes and adds it (re-quantised per hop);
step 2 encodes segment i once and rounds it in place (``seal``); step 3 passes
the encoded segments on unchanged, each rank decoding each into place — every
rank ends bitwise equal. top-k gathers every rank's (index, value) pairs round
the ring instead (``RingReducer._sparse``, over ``reducers.sparse``'s slots).

Cost (α latency, β seconds/byte, γ seconds/byte to reduce; ε s/value to encode
or decode; b bytes per value on the wire: 4 for float32, 2 for fp16, 1 + 4/64 for int8):

    T_ring = 2(p-1)·α + 2·(p-1)/p·n·β + (p-1)/p·n·γ
    compressed: 2(p-1)·α + 2·(p-1)/p·n·b·β + (p-1)/p·n·(γ + 3ε), bytes sent 2·(p-1)/p·n·b

Error of the compressed ring (inputs x_r after step 0): each partial sum is
rounded once per hop (p-1 times) and the final sum once (step 2):
fp16 |err| ≤ p·2^-11·Σ_r|x_r|; int8 |err| ≤ (p/2)·max scale, scale ≤ Σ_r chunk max|x_r|/127.

Each rank sends and receives 2(p-1)/p·n bytes: independent of p, which is why
the ring scales where a single parameter server does not. With emulated links
(docs/links.md) every step waits for the slowest link in the ring: on several
nodes α = the inter-node latency and β = 1/bandwidth (or the real link's, when
slower). (Pieces add
⌈n/(p·PIECE_BYTES)⌉ - 1 extra α per reduce-scatter step: negligible, since a
piece takes far longer than α to move.)

The two phases are also exported as functions over an explicit list of ranks
(``ring_reduce_scatter``, ``ring_allgather``), so ``hierarchical`` reuses them
for its intra-node and inter-node rings.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mpicomm.core import clock, flops, tags, trace
from mpicomm.core.backend import array_module, sync_device
from mpicomm.p2p import Transport
from mpicomm.reducers.base import Reducer
from mpicomm.reducers.sparse import SlotBuffer, add_slots

__all__ = [
    "RingReducer", "chunk_bounds", "ring_reduce_scatter", "ring_allgather", "PIECE_BYTES",
    "piece_items",
    "piece_scratch",
]

# reduce-scatter moves a segment in pieces of at most this many bytes (see step 1)
PIECE_BYTES = 1 << 20


def piece_items(itemsize: int) -> int:
    """Elements a piece holds: ``PIECE_BYTES`` of them, or 1/F of that under ``--fold F``
    (a folded element is charged F elements: the pieces, and so the messages, are the
    unfolded run's)."""
    return max(-(-(PIECE_BYTES // itemsize) // clock.fold()), 1)


def piece_scratch(store: dict, flat, items: int):
    """Return a reused scratch view of ``items`` (at most one piece) elements like ``flat``.

    ``store`` (one dict per reducer) keeps one ``PIECE_BYTES`` buffer per array
    module, allocated on first use; every length and dtype views into it, so a
    sweep over many sizes holds one piece of scratch, not one per size.
    """
    xp = array_module(flat)
    raw = store.get(xp.__name__)
    if raw is None:
        raw = store[xp.__name__] = xp.empty(PIECE_BYTES, dtype=np.uint8)
    nbytes = max(items, 1) * flat.itemsize
    if nbytes > PIECE_BYTES:
        raise ValueError(f"scratch of {nbytes} bytes exceeds one piece ({PIECE_BYTES})")
    return raw[:nbytes].view(flat.dtype)


def chunk_bounds(n: int, parts: int) -> list[int]:
    """Return ``parts + 1`` offsets cutting ``n`` items like ``np.array_split``.

    The first ``n % parts`` segments get one extra item.
    """
    base, extra = divmod(n, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def _exchange_add(p2p: Transport, send, mine, scratch, right: int, left: int, tag: int,
                  on_device: bool) -> None:
    """Send ``send`` right; receive the same-size piece from the left, add it into ``mine``."""
    got = scratch[: mine.size]
    p2p.sendrecv(send, right, got, left, tag)
    np.add(mine, got, out=mine)
    flops.add(mine.size)
    if on_device:  # scratch is reused next and `mine` may be sent next: the kernel must finish
        sync_device(mine)


def ring_reduce_scatter(
    p2p: Transport,
    ring: list[int],
    pos: int,
    flat,
    bounds: list[int],
    scratch,
    tag: int = 0,
    largest: int | None = None,
    wire=None,
) -> None:
    """Reduce-scatter ``flat`` over the ranks ``ring`` (this rank is ``ring[pos]``).

    Segment j is ``flat[bounds[j]:bounds[j+1]]``. On return this rank holds the
    sum over the ring of segment ``pos``; other segments hold partial sums.
    ``scratch`` must hold min(largest segment, ``PIECE_BYTES``). ``largest`` (the
    largest segment, in items) may be passed to skip recomputing it. Messages go
    through ``p2p``, which counts them. ``wire`` (a ``Wire``): each step sends its
    segment encoded, whole (no pieces), and adds the decoded one it receives.
    """
    q = len(ring)
    if q == 1:
        return
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    on_device = not isinstance(flat, np.ndarray)
    if largest is None:
        largest = max(bounds[i + 1] - bounds[i] for i in range(q))
    piece = piece_items(flat.itemsize)  # same on every rank: dtypes agree
    for k in range(q - 1):
        s = (pos - 1 - k) % q
        r = (pos - 2 - k) % q
        send = flat[bounds[s] : bounds[s + 1]]
        mine = flat[bounds[r] : bounds[r + 1]]
        if wire is not None:
            wire.exchange_add(p2p, send, mine, right, left, tag)
        elif largest <= piece:
            _exchange_add(p2p, send, mine, scratch, right, left, tag, on_device)
        else:  # piece by piece; the count comes from `largest`, so every rank agrees
            for lo in range(0, largest, piece):
                hi = lo + piece
                _exchange_add(p2p, send[lo:hi], mine[lo:hi], scratch, right, left, tag, on_device)


def ring_allgather(
    p2p: Transport, ring: list[int], pos: int, flat, bounds: list[int], tag: int = 0,
    wire=None, parts: list[list[tuple[int, int]]] | None = None,
) -> None:
    """Allgather segments over ``ring``: this rank contributes segment ``pos``.

    Receives land directly in ``flat``. ``wire``: segment ``pos`` is encoded once
    and rounded in place (also on a ring of one), the encoded segments travel on
    unchanged and are decoded into place; ``parts[i]`` (default: segment i whole)
    are the ranges segment i is encoded in, back to back in one message.
    """
    q = len(ring)
    if wire is not None:
        if parts is None:
            parts = [[(bounds[i], bounds[i + 1])] for i in range(q)]
        wire.seal_parts(flat, parts[pos])
    if q == 1:
        return
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    for k in range(q - 1):
        s = (pos - k) % q
        r = (pos - 1 - k) % q
        if wire is None:
            p2p.sendrecv(flat[bounds[s] : bounds[s + 1]], right, flat[bounds[r] : bounds[r + 1]],
                         left, tag)
        else:
            wire.pass_on(p2p, flat, parts[s], parts[r], right, left, tag)


def direct_ring(reducer: RingReducer, comm, bounds: list[int], scratch, scale: float | None,
                dtype, via: Transport | None = None) -> Callable:
    """Return ``run(flat)``: steps 1-3 for one layout (one piece per segment) on ``comm``'s
    ``Sendrecv`` itself, counted once per call (``Transport.direct``).

    Precomputed per layout: every step's segment bounds, the scratch view each
    reduce-scatter step receives into, the scale as a 0-d array of ``dtype`` and
    the bytes and messages to count. With tracing on, ``run`` is the reducer's
    ``_allreduce`` (every message through the transport, on the timeline).
    ``via`` (the virtual clock's transport): the steps' exchanges go through its
    ``sendrecv``, which times and counts them; the rest is as precomputed, so the
    clock charges the CPU time of the plan a wall-clock run takes.
    """
    p, me, counts, ring = reducer.size, reducer.rank, reducer.stats, reducer._ring
    right, left = ring[(me + 1) % p], ring[(me - 1) % p]
    remote = reducer.p2p.remote
    seg = [(bounds[i], bounds[i + 1]) for i in range(p)]
    rs = [(*seg[(me - 1 - k) % p], *seg[(me - 2 - k) % p],
           scratch[: bounds[(me - 2 - k) % p + 1] - bounds[(me - 2 - k) % p]])
          for k in range(p - 1)]
    ag = [(*seg[(me - k) % p], *seg[(me - 1 - k) % p]) for k in range(p - 1)]
    own_lo, own_hi = seg[me]
    item = np.dtype(dtype).itemsize
    sent = item * (sum(hi - lo for lo, hi, *_ in rs) + sum(hi - lo for lo, hi, _, _ in ag))
    recv = item * (sum(rh - rl for _, _, rl, rh, _ in rs) + sum(rh - rl for _, _, rl, rh in ag))
    inter_sent, inter_recv = (sent if remote[right] else 0), (recv if remote[left] else 0)
    factor = None if scale is None else np.array(scale, dtype=dtype)
    sendrecv = comm.Sendrecv if via is None else _sendrecv_of(via)
    add, mul, active = np.add, np.multiply, trace.active
    counting = via is None  # else the transport counts its messages
    t_rs, t_ag, steps, fallback = tags.RING_RS, tags.RING_AG, p - 1, reducer._allreduce

    def run(flat) -> None:
        if active() is not None:
            fallback(flat, scale)
            return
        for slo, shi, rlo, rhi, got in rs:  # 1.
            sendrecv(flat[slo:shi], right, t_rs, got, left, t_rs)
            mine = flat[rlo:rhi]
            add(mine, got, out=mine)
            flops.add(mine.size)
        if factor is not None:  # 2.
            own = flat[own_lo:own_hi]
            mul(own, factor, out=own)
            flops.scale(own.size)
        for slo, shi, rlo, rhi in ag:  # 3.
            sendrecv(flat[slo:shi], right, t_ag, flat[rlo:rhi], left, t_ag)
        if counting:
            counts.bytes_sent += sent
            counts.bytes_recv += recv
            counts.messages_sent += 2 * steps
            counts.messages_recv += 2 * steps
            if inter_sent or inter_recv:
                counts.inter_bytes_sent += inter_sent
                counts.inter_bytes_recv += inter_recv

    return run


def _sendrecv_of(p2p: Transport) -> Callable:
    """``p2p.sendrecv`` in ``Comm.Sendrecv``'s argument order (one tag: the send's)."""
    exchange = p2p.sendrecv

    def sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag) -> None:
        exchange(sendbuf, dest, recvbuf, source, sendtag)

    return sendrecv


class RingReducer(Reducer):
    """Ring AllReduce (reduce-scatter + allgather) with mpi4py point-to-point calls.

    Per (length, dtype) it keeps the segment boundaries; one ``PIECE_BYTES``
    scratch buffer serves every length (``piece_scratch``).
    """

    name = "ring"
    compressions = ("fp16", "int8", "topk")

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self._ring = list(range(self.size))
        self._plans: dict[tuple, tuple[list[int], object, int]] = {}
        self._store: dict = {}  # array module -> one piece of scratch
        self._slots = SlotBuffer()  # top-k: p messages

    def _plan(self, flat):
        key = (flat.size, flat.dtype.char, type(flat))
        plan = self._plans.get(key)
        if plan is None:
            bounds = chunk_bounds(flat.size, self.size)
            largest = max(bounds[i + 1] - bounds[i] for i in range(self.size))
            piece = piece_items(flat.itemsize)
            scratch = piece_scratch(self._store, flat, min(largest, piece))
            plan = self._plans[key] = (bounds, scratch, largest)
        return plan

    def crossing_ranks(self) -> int:
        """One rank of a node sends across its boundary (to the next node's first rank)."""
        return 1

    def _fast_plan(self, flat, scale):
        """The hot path on a direct transport, or the virtual clock's (through it): the steps
        of this layout, precomputed (a subclass that overrides ``_allreduce`` gets it: the
        base plan)."""
        comm = self.p2p.direct()
        via = self.p2p if self.p2p.virtual else None  # the virtual clock times every message
        bounds, scratch, largest = self._plan(flat)
        if comm is None and via is None or self.size == 1 \
                or largest > piece_items(flat.itemsize) \
                or type(self)._allreduce is not RingReducer._allreduce:
            return super()._fast_plan(flat, scale)
        return direct_ring(self, comm, bounds, scratch, scale, flat.dtype, via)

    def _allreduce(self, flat, scale):
        wire = self.wire
        if self.size == 1 and wire is None:
            if scale is not None:
                flat *= scale
                flops.scale(flat.size)
            return
        bounds, scratch, largest = self._plan(flat)
        ring_reduce_scatter(
            self.p2p, self._ring, self.rank, flat, bounds, scratch, tag=tags.RING_RS,
            largest=largest, wire=wire,
        )
        if scale is not None:
            own = flat[bounds[self.rank] : bounds[self.rank + 1]]
            own *= scale
            flops.scale(own.size)
            if not isinstance(flat, np.ndarray):
                sync_device(own)
        ring_allgather(self.p2p, self._ring, self.rank, flat, bounds, tag=tags.RING_AG, wire=wire)

    def _sparse(self, flat, scale, residual):
        """top-k: every rank's k pairs go round the ring; each rank sums all p messages.

        1. encode: the k = ceil(RATIO·n) largest of x + residual (error feedback);
        2. ring allgather of the p messages (one ``uint8`` buffer of p slots);
        3. zero, add the p messages in rank order (bitwise equal everywhere), scale.

            T = (p-1)·α + (p-1)·k·(4 + w)·β + p·k·γ + selection O(n)
            bytes sent = (p-1)·k·(4 + w)  (w = itemsize; against 2·(p-1)/p·n·w dense)

        Pays off while p·RATIO ≪ 1; the sum of what was sent is exact up to float summation.
        """
        p, me, ef = self.size, self.rank, self.feedback
        k = ef.codec.k_of(flat.size)
        nb = ef.codec.pair_bytes(k, flat.itemsize)
        buf = self._slots.reserve(p, nb)
        ef.encode(flat, buf[me * nb : (me + 1) * nb], residual)  # 1.
        ring_allgather(self.p2p, self._ring, me, buf, [s * nb for s in range(p + 1)],
                       tag=tags.RING_SPARSE)  # 2.
        add_slots(buf, p, nb, k, ef.codec, flat, scale)  # 3.
