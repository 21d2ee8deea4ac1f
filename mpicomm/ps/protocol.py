"""The parameter server's wire protocol: tags, commands and the two small records.

Every message is a contiguous NumPy buffer sent with mpi4py's buffer calls
(no pickling). Per step, worker w and server s exchange:

    w -> s   HEADER  float64[4]  (PUSH, step, lr, 0)       tag TAG_HEADER
    w -> s   PUSH    grads[lo_s:hi_s]                      tag TAG_PUSH
    s -> w   STATUS  float64[2]  (stop, version)           tag TAG_STATUS
    s -> w   PULL    params[lo_s:hi_s]                     tag TAG_PULL

A finished worker sends the header (DONE, steps, 0, 0) and then receives the
servers' final parameters (TAG_FINAL), so every worker ends with the servers'
model. For a checkpoint (sync only), worker 0 sends the header (SNAPSHOT, step,
0, 0) between two steps and receives each server's momentum range (TAG_SNAPSHOT),
then, with a codec, its exact parameter range (same tag: the workers hold the
decoded pulls). A snapshot's messages, header included, are not counted in the
run's traffic (``uncounted``): bytes per step stay the training's own.
Servers take headers from ``MPI.ANY_SOURCE`` and read the sender from
the status: arrival order is the order pushes are applied in (async/ssp).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from mpicomm.core import tags
from mpicomm.p2p.transport import Traffic

__all__ = ["TAG_HEADER", "TAG_PUSH", "TAG_STATUS", "TAG_PULL", "TAG_FINAL", "TAG_SNAPSHOT",
           "CMD_PUSH", "CMD_DONE", "CMD_SNAPSHOT", "MODES", "uncounted"]

TAG_HEADER, TAG_PUSH, TAG_STATUS = tags.PSP_HEADER, tags.PSP_PUSH, tags.PSP_STATUS
TAG_PULL, TAG_FINAL, TAG_SNAPSHOT = tags.PSP_PULL, tags.PSP_FINAL, tags.PSP_SNAPSHOT
CMD_PUSH, CMD_DONE, CMD_SNAPSHOT = 1.0, 2.0, 3.0
MODES = ("sync", "async", "ssp")
HEADER_BYTES = 32  # a header: float64[4]

_TRAFFIC = tuple(f.name for f in fields(Traffic))


@contextmanager
def uncounted(p2p: Any, header_from: int | None = None) -> Iterator[None]:
    """Leave the messages inside out of ``p2p.counts`` (a checkpoint's snapshot, not a step).

    ``header_from``: also take back the header already received from that rank (a
    server learns it is a snapshot only once the header is in).
    """
    c = p2p.counts
    saved = [getattr(c, name) for name in _TRAFFIC]
    try:
        yield
    finally:
        for name, value in zip(_TRAFFIC, saved, strict=True):
            setattr(c, name, value)
        if header_from is not None:
            c.bytes_recv -= HEADER_BYTES
            c.messages_recv -= 1
            if p2p.remote[header_from]:
                c.inter_bytes_recv -= HEADER_BYTES

