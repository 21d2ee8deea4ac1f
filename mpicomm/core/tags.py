"""Every MPI message tag mpicomm sends with, in one registry.

A strategy sends on its own duplicated communicator, so two strategies cannot
match each other's messages; within one, the tags keep its phases apart (a
fold never matches an exchange). One list makes a new tag's collision visible:
``tests/test_layout.py`` checks that the values are distinct and that the
per-segment ranges (``BASE + segment``) do not reach another tag.
"""

from __future__ import annotations

__all__ = ["TAGS", "RANGES"]

# ring (reducers/ring.py): reduce-scatter, allgather
RING_RS, RING_AG = 1, 2
# cost-model calibration (costmodel/calibrate.py, literal there): ping-pong, exchange
CALIBRATE_PINGPONG, CALIBRATE_EXCHANGE = 7, 8
# hierarchical (reducers/hierarchical.py): intra-node reduce-scatter and allgather;
# the inter-node ring of segment v sends with HIER_INTER + v
HIER_INTRA_RS, HIER_INTRA_AG, HIER_INTER = 11, 12, 100
# ps as an allreduce (reducers/ps.py)
PS_HEADER, PS_PUSH, PS_PULL = 21, 22, 23
# the parameter-server protocol (ps/protocol.py: servers own parameters and optimizer)
PSP_HEADER, PSP_PUSH, PSP_STATUS, PSP_PULL, PSP_FINAL, PSP_SNAPSHOT = 31, 32, 33, 34, 35, 36
# compressed variants (codecs/): quantized hierarchical (inter ring of segment v: + v),
# sparse hierarchical, quantized ps, sparse ps, sparse allgather
HQ_RS, HQ_AG, HQ_INTER = 41, 42, 1000
SPARSE_AG = 51
HS_INTRA, HS_LEADERS, HS_DOWN = 61, 62, 63
PSQ_PUSH, PSQ_PULL = 71, 72
PSS_PUSH, PSS_COUNT, PSS_PULL = 81, 82, 83
# recursive doubling (reducers/recursive_doubling.py): fold, exchange, unfold
RD_FOLD, RD_EXCHANGE, RD_UNFOLD = 91, 92, 93
# stall detection (p2p/stall.py, on its own side communicator)
STALL_ASK, STALL_ANSWER = 7001, 7002

TAGS: dict[str, int] = {name: value for name, value in globals().items()
                        if name.isupper() and isinstance(value, int)}
# tags that are the base of a range (BASE + segment index), and the range's width
RANGES: dict[str, int] = {"HIER_INTER": 900, "HQ_INTER": 6000}
