"""The wire: what an algorithm's step sends through when compression is on.

An algorithm (ring, hierarchical, recursive doubling, ps) holds ``wire = None``
for plain float messages — its steps then run exactly as without compression,
no extra call or copy — or a ``Wire`` around a quantising codec (fp16, int8).
A step then:

- ``exchange_add``: encodes what it sends, receives an encoded piece and adds
  the decoded values into its own (a reduce step);
- ``seal`` + ``pass_on``: encodes a finished segment once, rounding it in place
  (so the owner holds exactly what the others will decode), and passes encoded
  segments along unchanged, decoding each into place (an allgather step);
- ``encode`` / ``decode`` / ``decode_add`` into reused slot buffers, for
  algorithms that post several messages at once (ps).

Bytes on the wire: ``nbytes(m, dtype)`` = b·m + header (b = 2 for fp16, 1 + 4/64 for
int8), so an algorithm moving n·4 bytes of float32 moves about n·b.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Wire"]

Parts = list[tuple[int, int]]


class Wire:
    """A quantising ``codec`` (``Fp16Codec`` / ``Int8Codec``) with reused message buffers.

    ``prescale``: op="mean" scales the input by 1/p before the first step, so no
    partial sum exceeds the largest input (fp16's range).
    """

    prescale = True

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.name = codec.name
        self._slots: dict[Any, np.ndarray] = {}

    def nbytes(self, m: int, dtype) -> int:
        """Bytes on the wire for ``m`` values of ``dtype``."""
        return self.codec.wire_bytes(m, dtype)

    def slot(self, key: Any, nbytes: int) -> np.ndarray:
        """A reused ``uint8`` buffer of ``nbytes`` for slot ``key`` (grown, never shrunk)."""
        buf = self._slots.get(key)
        if buf is None or buf.size < nbytes:
            buf = self._slots[key] = np.empty(max(nbytes, 1), dtype=np.uint8)
        return buf[:nbytes]

    def encode(self, x: np.ndarray, key: Any) -> np.ndarray:
        """Encode ``x`` into slot ``key``; return the message."""
        msg = self.slot(key, self.codec.wire_bytes(x.size, x.dtype))
        self.codec.encode(x, msg)
        return msg

    def decode(self, msg: np.ndarray, out: np.ndarray) -> None:
        self.codec.decode(msg, out)

    def decode_add(self, msg: np.ndarray, acc: np.ndarray) -> None:
        self.codec.decode_add(msg, acc)

    def seal(self, x: np.ndarray, key: Any) -> np.ndarray:
        """Encode ``x`` into slot ``key``, round ``x`` to what it decodes to; return the message."""
        msg = self.encode(x, key)
        self.codec.decode(msg, x)
        return msg

    # ---------------------------------------------------------- ring steps
    def exchange_add(self, p2p: Any, send: np.ndarray, mine: np.ndarray, right: int, left: int,
                     tag: int) -> None:
        """Send ``send`` encoded right; decode the piece from the left, add it into ``mine``."""
        msg = self.encode(send, "send")
        got = self.slot("recv", self.codec.wire_bytes(mine.size, mine.dtype))
        p2p.sendrecv(msg, right, got, left, tag)
        self.codec.decode_add(got, mine)

    def seal_parts(self, flat: np.ndarray, parts: Parts) -> None:
        """Encode ``flat``'s ranges ``parts`` back to back (slot "cur"), rounding them in place."""
        msg = self.slot("cur", self._parts_bytes(parts, flat.dtype))
        off = 0
        for lo, hi in parts:
            nb = self.codec.wire_bytes(hi - lo, flat.dtype)
            self.codec.encode(flat[lo:hi], msg[off : off + nb])
            self.codec.decode(msg[off : off + nb], flat[lo:hi])
            off += nb

    def pass_on(self, p2p: Any, flat: np.ndarray, send: Parts, recv: Parts, right: int,
                left: int, tag: int) -> None:
        """Send the encoded ranges ``send`` (sealed or received last) right; receive
        ``recv`` from the left, decode them into ``flat`` and keep them to send next."""
        nsend, nrecv = self._parts_bytes(send, flat.dtype), self._parts_bytes(recv, flat.dtype)
        cur, nxt = self.slot("cur", nsend), self.slot("nxt", nrecv)
        p2p.sendrecv(cur, right, nxt, left, tag)
        off = 0
        for lo, hi in recv:
            nb = self.codec.wire_bytes(hi - lo, flat.dtype)
            self.codec.decode(nxt[off : off + nb], flat[lo:hi])
            off += nb
        self._slots["cur"], self._slots["nxt"] = self._slots["nxt"], self._slots["cur"]

    def _parts_bytes(self, parts: Parts, dtype) -> int:
        return sum(self.codec.wire_bytes(hi - lo, dtype) for lo, hi in parts)
