"""recursive_doubling: latency-optimal AllReduce, lg p rounds of whole-buffer exchanges.

Any rank count p works: with pof2 the largest power of two <= p and
rem = p - pof2, the first 2·rem ranks pair up first (as MPICH does).

1. Fold (only when p is not a power of two): among ranks 0 .. 2·rem-1, each
   even rank sends its buffer to the odd rank above it, which adds it in, and
   then sits out. The pof2 ranks left get new ranks 0 .. pof2-1 (odd rank i of
   the first 2·rem -> i // 2, rank i >= 2·rem -> i - rem).
2. Exchange, lg pof2 rounds. In round k (mask = 2^k) new rank j swaps its
   whole buffer with new rank j XOR mask (one ``Sendrecv`` into a scratch
   buffer) and adds the partner's values into its own. After round k every rank
   holds the sum over its block of 2^(k+1) new ranks; after the last round,
   over all. Both partners compute a + b (IEEE addition commutes), so every
   rank ends with bit-identical values.
3. (op="mean") every rank scales by 1/p.
4. Unfold: each odd rank of the first 2·rem sends the result to the even rank
   below it.

Compressed (fp16/int8, the steps' ``wire``): the input is scaled by 1/p first
(op="mean"); each message is encoded. In a round each partner first rounds its
own buffer to what it sends (``seal``), then adds the decoded partner's, so both
compute dec(a) + dec(b) and stay bitwise equal; the unfold sends the sealed
result (which every rank then rounds alike). A value is rounded lg pof2 + 2 times at most:
fp16 |err| ≤ (lg p + 2)·2^-11·Σ_r|x_r|; int8 |err| ≤ ((lg p + 2)/2)·max scale.

Cost, n bytes (α latency, β seconds/byte, γ seconds/byte to reduce; compressed:
n·b bytes on the wire instead of n, b bytes a value, plus ε s/value to encode or decode):

    T_rd = lg pof2·(α + n·β + n·γ)  [+ 2·(α + n·β) + n·γ when p is not a power of 2]
    compressed: lg pof2·(α + n·b·β + n·(γ + 3ε))  [+ 2·(α + n·b·β) + ...]

Only lg p latencies — against 2(p-1) for the ring — but every round moves the
whole buffer, so the bandwidth term is lg p·n instead of 2·(p-1)/p·n: the right
choice for small messages (MPICH uses it below 2 KiB), the wrong one for large.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import flops, tags
from mpicomm.core.backend import array_module, sync_device
from mpicomm.reducers.base import Reducer

__all__ = ["RecursiveDoublingReducer", "fold_plan"]

_TAG_FOLD, _TAG_EXCHANGE, _TAG_UNFOLD = tags.RD_FOLD, tags.RD_EXCHANGE, tags.RD_UNFOLD


def fold_plan(p: int, rank: int) -> tuple[int | None, int | None, list[int]]:
    """Return this rank's (fold partner below, fold partner above, exchange partners).

    ``below`` is set on an odd rank of the first 2·rem (it receives the even
    rank's buffer and later returns the result); ``above`` on an even rank of
    the first 2·rem (it hands its buffer up and sits out the exchange rounds,
    so its partner list is empty). Partners are world ranks, one per round.
    """
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    below = above = None
    if rank < 2 * rem:
        if rank % 2 == 0:
            return None, rank + 1, []
        below, new = rank - 1, rank // 2
    else:
        new = rank - rem

    def real(j: int) -> int:  # new rank -> world rank
        return 2 * j + 1 if j < rem else j + rem

    partners = []
    mask = 1
    while mask < pof2:
        partners.append(real(new ^ mask))
        mask <<= 1
    return below, above, partners


class RecursiveDoublingReducer(Reducer):
    """Recursive-doubling AllReduce (see module docstring) with a reused scratch buffer.

    One scratch allocation is kept and grown to the largest buffer seen; the
    per-(length, dtype) views into it are cached, so a call allocates nothing.
    """

    name = "recursive_doubling"
    compressions = ("fp16", "int8")
    why_not = "top-k pairs are gathered, not exchanged: use ring, hierarchical or ps"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self._below, self._above, self._partners = fold_plan(self.size, self.rank)
        self._store: dict[object, object] = {}  # array module -> raw byte buffer
        self._scratch: dict[tuple, object] = {}  # (length, dtype, module) -> view

    def _tmp(self, flat):
        xp = array_module(flat)
        key = (flat.size, flat.dtype.char, xp)
        tmp = self._scratch.get(key)
        if tmp is None:
            raw = self._store.get(xp)
            if raw is None or raw.nbytes < flat.nbytes:
                raw = self._store[xp] = xp.empty(max(flat.nbytes, 8), dtype=np.uint8)
                # views of the old buffer stay valid (they keep it alive) but are dropped
                self._scratch = {k: v for k, v in self._scratch.items() if k[2] is not xp}
            tmp = self._scratch[key] = raw[: flat.nbytes].view(flat.dtype)
        return tmp

    def _allreduce(self, flat, scale):
        p2p, wire = self.p2p, self.wire
        nb = 0 if wire is None else wire.nbytes(flat.size, flat.dtype)
        on_device = not isinstance(flat, np.ndarray)
        # 1. fold: an even rank of the first 2·rem hands its buffer up
        if self._above is not None:
            p2p.send(flat if wire is None else wire.encode(flat, "send"), self._above, _TAG_FOLD)
        elif self._below is not None:
            tmp = self._tmp(flat) if wire is None else wire.slot("recv", nb)
            p2p.recv(tmp, self._below, _TAG_FOLD)
            if wire is None:
                np.add(flat, tmp, out=flat)
                flops.add(flat.size)
            else:
                wire.decode_add(tmp, flat)
        # 2. lg pof2 rounds: swap the whole buffer with the partner, add
        if self._partners:
            tmp = self._tmp(flat) if wire is None else wire.slot("recv", nb)
            for partner in self._partners:
                if on_device:  # the last add must finish before MPI reads flat
                    sync_device(flat)
                if wire is None:
                    p2p.sendrecv(flat, partner, tmp, partner, _TAG_EXCHANGE)
                    np.add(flat, tmp, out=flat)
                    flops.add(flat.size)
                else:  # both partners add the same two rounded values
                    p2p.sendrecv(wire.seal(flat, "send"), partner, tmp, partner, _TAG_EXCHANGE)
                    wire.decode_add(tmp, flat)
        # 3. mean (a rank that sat out gets the scaled result in step 4)
        if scale is not None and self._above is None:
            np.multiply(flat, scale, out=flat)
            flops.scale(flat.size)
        if on_device:
            sync_device(flat)
        sealed = None
        if wire is not None and self._above is None and self.size & (self.size - 1):
            sealed = wire.seal(flat, "send")  # every rank rounds alike what step 4 sends
        # 4. unfold: return the result to the rank that sat out
        if self._above is not None:
            if wire is None:
                p2p.recv(flat, self._above, _TAG_UNFOLD)
            else:
                msg = wire.slot("recv", nb)
                p2p.recv(msg, self._above, _TAG_UNFOLD)
                wire.decode(msg, flat)
        elif self._below is not None:
            p2p.send(flat if wire is None else sealed, self._below, _TAG_UNFOLD)
