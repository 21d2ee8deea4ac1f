"""ring with a quantising codec (fp16 or int8): re-quantise per hop, sum in float32.

p ranks on a ring, the buffer of n values cut in p segments (``chunk_bounds``);
``enc`` is the codec (``quantize.Fp16Codec`` / ``Int8Codec``), b its bytes per
value (2 for fp16, 1 + 4/64 for int8; float32 itself is 4).

0. (op="mean") every rank scales its input by 1/p first, so no partial sum
   exceeds the largest input (fp16 cannot overflow on the way).
1. Reduce-scatter, p-1 steps. At step k rank i encodes its partial sum of
   segment (i-1-k) mod p, sends it right, receives the left neighbour's encoded
   partial sum of segment (i-2-k) mod p, decodes it and adds it into its own
   copy in float32. After p-1 steps rank i holds segment i summed — each hop
   re-quantised the partial sum it sent.
2. Rank i encodes its summed segment once and decodes it back into place, so
   the owner holds exactly what the others will decode.
3. Allgather, p-1 steps: the encoded segments travel unchanged (no further
   rounding); each rank decodes each one into place. All ranks end bitwise equal.

Cost (α latency, β s/byte, γ s/byte to add; ε s/value to encode or decode):

    T = 2(p-1)·α + 2·(p-1)/p·n·b·β + (p-1)/p·n·(4γ + 3ε)
    bytes sent per rank = 2·(p-1)/p·n·b   (+ headers: 4 per message for fp16)

against 2·(p-1)/p·n·4 without compression: ×0.5 (fp16), ×0.266 (int8).

Error (per element, p ranks, inputs x_r after step 0): every partial sum is
rounded once per hop (p-1 times in step 1) and the final sum once (step 2):

    fp16: |err| ≤ p·2^-11·Σ_r|x_r|                 (+ the underflow term of quantize.py)
    int8: |err| ≤ (p/2)·max_hops scale,  scale ≤ Σ_r max_chunk|x_r| / 127

(chunk = the 64 values of a message sharing one scale).
"""

from __future__ import annotations

import numpy as np

from mpicomm.p2p import Transport
from mpicomm.reducers.ring import chunk_bounds

__all__ = ["WireBuffers", "q_reduce_scatter", "q_allgather", "QuantizedRing"]


class WireBuffers:
    """Three reused ``uint8`` message buffers (send, receive A, receive B), grown on demand."""

    def __init__(self) -> None:
        self.bufs = [np.empty(0, dtype=np.uint8) for _ in range(3)]

    def reserve(self, nbytes: int) -> list[np.ndarray]:
        if self.bufs[0].size < nbytes:
            self.bufs = [np.empty(nbytes, dtype=np.uint8) for _ in range(3)]
        return self.bufs


def q_reduce_scatter(p2p: Transport, ring: list[int], pos: int, flat: np.ndarray,
                     bounds: list[int], enc, wire: WireBuffers, tag: int) -> None:
    """Step 1 over the ranks ``ring`` (this rank is ``ring[pos]``): segment ``pos`` summed."""
    q = len(ring)
    if q == 1:
        return
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    send, recv, _ = wire.bufs
    for k in range(q - 1):
        s, r = (pos - 1 - k) % q, (pos - 2 - k) % q
        out, mine = flat[bounds[s] : bounds[s + 1]], flat[bounds[r] : bounds[r + 1]]
        enc.encode(out, send)
        p2p.sendrecv(send[: enc.wire_bytes(out.size)], right,
                     recv[: enc.wire_bytes(mine.size)], left, tag)
        enc.decode_add(recv, mine)


def _parts_bytes(enc, parts: list[tuple[int, int]]) -> int:
    return sum(enc.wire_bytes(hi - lo) for lo, hi in parts)


def _encode_parts(enc, flat, parts, msg, decode_back: bool) -> None:
    off = 0
    for lo, hi in parts:
        nb = enc.wire_bytes(hi - lo)
        enc.encode(flat[lo:hi], msg[off : off + nb])
        if decode_back:
            enc.decode(msg[off : off + nb], flat[lo:hi])
        off += nb


def _decode_parts(enc, msg, flat, parts) -> None:
    off = 0
    for lo, hi in parts:
        nb = enc.wire_bytes(hi - lo)
        enc.decode(msg[off : off + nb], flat[lo:hi])
        off += nb


def q_allgather(p2p: Transport, ring: list[int], pos: int, flat: np.ndarray,
                bounds: list[int], enc, wire: WireBuffers, tag: int,
                parts: list[list[tuple[int, int]]] | None = None) -> None:
    """Steps 2-3: encode own segment once, pass encoded segments round, decode each.

    ``parts[i]`` (default: segment i whole) are the ranges segment i is encoded
    in, back to back in one message — hierarchical encodes per virtual segment,
    so that nodes of different sizes round the same values alike.
    """
    q = len(ring)
    if parts is None:
        parts = [[(bounds[i], bounds[i + 1])] for i in range(q)]
    _, cur, nxt = wire.bufs
    _encode_parts(enc, flat, parts[pos], cur, decode_back=True)
    if q == 1:
        return
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    for k in range(q - 1):
        s, r = (pos - k) % q, (pos - 1 - k) % q
        p2p.sendrecv(cur[: _parts_bytes(enc, parts[s])], right,
                     nxt[: _parts_bytes(enc, parts[r])], left, tag)
        _decode_parts(enc, nxt, flat, parts[r])
        cur, nxt = nxt, cur


class QuantizedRing:
    """The ring of ``inner`` (a ``RingReducer``) with codec ``enc`` (see module docstring)."""

    def __init__(self, inner, enc) -> None:
        self.p2p, self.rank, self.size = inner.p2p, inner.rank, inner.size
        self.enc = enc
        self.ring = list(range(self.size))
        self.wire = WireBuffers()
        self._bounds: dict[int, list[int]] = {}

    def __call__(self, flat: np.ndarray, scale: float | None) -> None:
        if scale is not None:
            flat *= scale
        bounds = self._bounds.get(flat.size)
        if bounds is None:
            bounds = self._bounds[flat.size] = chunk_bounds(flat.size, self.size)
        largest = max(bounds[i + 1] - bounds[i] for i in range(self.size))
        self.wire.reserve(self.enc.wire_bytes(largest))
        q_reduce_scatter(self.p2p, self.ring, self.rank, flat, bounds, self.enc, self.wire, 31)
        q_allgather(self.p2p, self.ring, self.rank, flat, bounds, self.enc, self.wire, 32)
