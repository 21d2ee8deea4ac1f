"""Rank script: unknown strategy/option names and bad option values are refused everywhere."""

import numpy as np
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm

problems = []


def expect(exc_type, fragment, fn):
    return expect_raises(problems, exc_type, fragment, fn)


expect(ValueError, "valid strategies: native, ring", lambda: mpicomm.make_reducer("rnig"))
expect(TypeError, "unknown option 'server'", lambda: mpicomm.make_reducer("ring", server=2))
expect(ValueError, "variant 'tree'", lambda: mpicomm.make_reducer("hierarchical", variant="tree"))
expect(ValueError, "servers must be", lambda: mpicomm.make_reducer("ps", servers=0))
expect(
    ValueError,
    "ranks_per_node must be >= 1",
    lambda: mpicomm.make_reducer("hierarchical", ranks_per_node=0),
)
size = MPI.COMM_WORLD.Get_size()
expect(ValueError, "exceeds", lambda: mpicomm.make_reducer("ps", servers=size + 1))
expect(
    ValueError,
    "needs at least one worker",
    lambda: mpicomm.make_reducer("ps", servers=size, dedicated=True),
)
# every strategy accepts every option, and ignores those it does not use
common = dict(ranks_per_node=1, variant="leader", servers=1, dedicated=False, validate=True)
for name in mpicomm.strategies():
    red = mpicomm.make_reducer(name, **common)
    x = np.ones(5)
    red.allreduce(x)
    if not np.array_equal(x, np.full(5, float(size))):
        problems.append(f"{name} with all options: wrong sum {x}")
    red.close()
report(ok=not problems, error="; ".join(problems) or None)
