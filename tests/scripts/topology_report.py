"""Rank script: report this rank's Topology (ranks_per_node from argv or the environment)."""

import sys

from mpi4py import MPI
from mpi_harness import report

import mpicomm

rpn = int(sys.argv[1]) if len(sys.argv) > 1 else None
t = mpicomm.Topology(MPI.COMM_WORLD, ranks_per_node=rpn)
report(
    ok=True,
    node_id=t.node_id,
    local_rank=t.local_rank,
    local_size=t.local_size,
    num_nodes=t.num_nodes,
    node_sizes=t.node_sizes,
    is_leader=t.is_leader,
    nodes=t.nodes,
    cross_rank=t.cross_rank,
    cross_size=t.cross_size,
    leaders_size=t.leaders.Get_size() if t.leaders is not None else None,
    intra_size=t.intra.Get_size(),
)
