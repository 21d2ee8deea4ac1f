"""Rank script (2 ranks): ``make_reducer`` refuses what is not a usable intracommunicator
(a string, ``MPI.COMM_NULL``, an intercommunicator: it hung in ``node_map``'s Allgather),
and ``allreduce`` names the valid ops for ``op=MPI.SUM``, on every rank, then still works."""

import numpy as np
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
from mpicomm.core.errors import ConfigError

world = MPI.COMM_WORLD
rank = world.Get_rank()
problems: list[str] = []


def expect(exc_type, fragment, fn):
    return expect_raises(problems, exc_type, fragment, fn)


expect(ConfigError, "comm='world' is a str; expected an mpi4py intracommunicator",
       lambda: mpicomm.make_reducer("ring", comm="world"))
expect(ConfigError, "comm is MPI.COMM_NULL",
       lambda: mpicomm.make_reducer("native", comm=MPI.COMM_NULL))
half = world.Split(rank % 2, rank)
inter = half.Create_intercomm(0, world, 1 - rank % 2, 7)
for name in ("ring", "native", "hierarchical", "ps"):
    expect(ConfigError, "comm is an intercommunicator",
           lambda name=name: mpicomm.make_reducer(name, comm=inter))
inter.Free()
half.Free()
with mpicomm.make_reducer("ring") as r:
    x = np.ones(5)
    for _ in range(2):  # the checked path, then the hot path's miss
        expect(ValueError, "unknown op <mpi4py.MPI.Op object", lambda: r.allreduce(x, op=MPI.SUM))
    msg = expect(ValueError, "valid ops: 'sum', 'mean'", lambda: r.allreduce(x, op=MPI.SUM))
    r.allreduce(x)
    if not np.array_equal(x, np.full(5, 2.0)):
        problems.append(f"the reducer was left broken: {x}")
report(ok=not problems, problems=problems)
