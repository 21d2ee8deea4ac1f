"""mpicomm: compare gradient-synchronisation strategies over MPI.

    from mpi4py import MPI
    import mpicomm

    r = mpicomm.make_reducer("ring", comm=MPI.COMM_WORLD)
    r.allreduce(buf, op="mean")      # in place; returns buf
    topo = mpicomm.Topology(MPI.COMM_WORLD, ranks_per_node=None)
"""

# first: picks the MPI thread level (--thread-level / MPICOMM_THREAD_LEVEL) before
# anything imports mpi4py.MPI, which initialises MPI
from mpicomm import _mpi_init  # noqa: F401
from mpicomm.errors import ConfigError
from mpicomm.options import ReducerOptions
from mpicomm.reducers import REDUCERS, MismatchError, Reducer, make_reducer, strategies
from mpicomm.topology import Topology

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "REDUCERS",
    "MismatchError",
    "Reducer",
    "ReducerOptions",
    "Topology",
    "make_reducer",
    "strategies",
    "__version__",
]
