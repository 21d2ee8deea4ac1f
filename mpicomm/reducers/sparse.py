"""What every strategy's top-k gather shares: message slots, encoding, the local sum.

A sum of sparse vectors is not sparse alike, so top-k pairs are gathered, not
reduced on the way (as in DGC / BytePS): each strategy moves every rank's
(index, value) message (``codecs.TopKCodec``, error feedback by
``codecs.ErrorFeedback``) in its own pattern — ring, nodes then leaders, or
push to servers — and every rank adds the messages in the same order.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import flops

__all__ = ["SlotBuffer", "add_slots"]


class SlotBuffer:
    """One reused ``uint8`` buffer of ``slots`` messages of ``slot_bytes`` each."""

    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=np.uint8)

    def reserve(self, slots: int, slot_bytes: int) -> np.ndarray:
        need = slots * slot_bytes
        if self.buf.size < need:
            self.buf = np.empty(need, dtype=np.uint8)
        return self.buf[:need]


def add_slots(buf: np.ndarray, slots: int, slot_bytes: int, k: int, codec, out: np.ndarray,
              scale: float | None) -> None:
    """Zero ``out``, add every slot's ``k`` pairs into it (in slot order), scale once."""
    out.fill(0)
    for s in range(slots):  # one vectorised scatter-add per rank's message
        codec.decode_add(buf[s * slot_bytes : (s + 1) * slot_bytes], k, out)
    if scale is not None:
        out *= scale
        flops.scale(out.size)
