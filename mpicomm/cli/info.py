"""``python -m mpicomm info``: what MPI, topology and buffer support this job has.

Prints (rank 0) versions, the MPI library, CUDA-awareness, CuPy (its version,
or absent with the install hint), the GPUs CuPy sees, the strategies, the
topology, and one line per rank: host, node, local rank.
"""

from __future__ import annotations

import argparse
import json

from mpi4py import MPI

from mpicomm.core.environment import environment
from mpicomm.core.gpu import gpu_info
from mpicomm.core.topology import Topology
from mpicomm.reducers import strategies

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "print MPI, topology and buffer-support facts"
USES_MPI = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks-per-node", type=int, default=None,
                   help="simulate nodes of K consecutive ranks (default: ask MPI)")
    from mpicomm.cli.helptext import DefaultsFormatter

    p.formatter_class = DefaultsFormatter


def run(args: argparse.Namespace) -> int:
    comm = MPI.COMM_WORLD
    topo = Topology(comm, ranks_per_node=args.ranks_per_node)
    rows = comm.gather((comm.rank, MPI.Get_processor_name(), topo.node_id, topo.local_rank))
    if comm.rank == 0:
        info = environment()
        info.update(gpu_info())  # cuda_aware_mpi, cupy (version or None), gpus
        info["strategies"] = strategies()
        info["topology"] = topo.describe()
        print(json.dumps(info, indent=2))
        for rank, host, node, local in rows:
            print(f"rank {rank:3d}  host {host}  node {node}  local_rank {local}")
    topo.free()
    return 0
