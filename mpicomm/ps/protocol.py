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
decoded pulls).
Servers take headers from ``MPI.ANY_SOURCE`` and read the sender from
the status: arrival order is the order pushes are applied in (async/ssp).
"""

from __future__ import annotations

from mpicomm.core import tags

__all__ = ["TAG_HEADER", "TAG_PUSH", "TAG_STATUS", "TAG_PULL", "TAG_FINAL", "TAG_SNAPSHOT",
           "CMD_PUSH", "CMD_DONE", "CMD_SNAPSHOT", "MODES"]

TAG_HEADER, TAG_PUSH, TAG_STATUS = tags.PSP_HEADER, tags.PSP_PUSH, tags.PSP_STATUS
TAG_PULL, TAG_FINAL, TAG_SNAPSHOT = tags.PSP_PULL, tags.PSP_FINAL, tags.PSP_SNAPSHOT
CMD_PUSH, CMD_DONE, CMD_SNAPSHOT = 1.0, 2.0, 3.0
MODES = ("sync", "async", "ssp")
