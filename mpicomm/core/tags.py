"""Every MPI message tag mpicomm sends with, in one registry.

A strategy sends on its own duplicated communicator, so two strategies cannot
match each other's messages; within one, the tags keep its phases apart (a
fold never matches an exchange). One list makes a new tag's collision visible:
``tests/test_layout.py`` checks that the values are distinct and that the
per-segment ranges (``BASE + segment``) do not reach another tag.
"""

from __future__ import annotations

__all__ = ["TAGS", "RANGES"]

# ring (reducers/ring.py): reduce-scatter, allgather, top-k's allgather of (index, value) pairs
RING_RS, RING_AG, RING_SPARSE = 1, 2, 3
# cost-model calibration (costmodel/calibrate.py, literal there): ping-pong, exchange, the
# exchange's 8-byte line-up, and the ping-pong's repetition count (a tells b)
CALIBRATE_PINGPONG, CALIBRATE_EXCHANGE, CALIBRATE_LINE_UP, CALIBRATE_COUNT = 7, 8, 9, 6
# hierarchical (reducers/hierarchical.py): intra-node reduce-scatter and allgather;
# the inter-node ring of segment v sends with HIER_INTER + v
HIER_INTRA_RS, HIER_INTRA_AG, HIER_INTER = 11, 12, 100
# hierarchical top-k: node gather, leaders' exchange, back down the node
HIER_TOPK_INTRA, HIER_TOPK_LEADERS, HIER_TOPK_DOWN = 13, 14, 15
# ps as an allreduce (reducers/ps.py)
PS_HEADER, PS_PUSH, PS_PULL, PS_COUNT = 21, 22, 23, 24
# the parameter-server protocol (ps/protocol.py: servers own parameters and optimizer)
PSP_HEADER, PSP_PUSH, PSP_STATUS, PSP_PULL, PSP_FINAL, PSP_SNAPSHOT = 31, 32, 33, 34, 35, 36
# recursive doubling (reducers/recursive_doubling.py): fold, exchange, unfold
RD_FOLD, RD_EXCHANGE, RD_UNFOLD = 91, 92, 93
# tree (reducers/tree.py): up and down, + tree index (0 or 1)
TREE_UP, TREE_DOWN = 70, 72
# ring with K channels (reducers/multiring.py): channel c reduce-scatters on MULTIRING + 2c and
# allgathers on MULTIRING + 2c + 1
MULTIRING = 1000
# tensor parallelism (parallel/tensor.py): its activations' ring reduce-scatter and allgather
TP_RS, TP_AG = 1201, 1202
# stall detection (p2p/stall.py, on its own side communicator)
STALL_ASK, STALL_ANSWER = 7001, 7002
STALL_REPORT, STALL_VERDICT = 7003, 7004  # a stalled rank to the coordinator, and back

TAGS: dict[str, int] = {name: value for name, value in globals().items()
                        if name.isupper() and isinstance(value, int)}
# tags that are the base of a range (BASE + segment index), and the range's width
RANGES: dict[str, int] = {"HIER_INTER": 900, "TREE_UP": 2, "TREE_DOWN": 2, "MULTIRING": 128}
