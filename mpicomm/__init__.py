"""mpicomm: compare gradient-synchronisation strategies over MPI.

    from mpi4py import MPI
    import mpicomm

    with mpicomm.make_reducer("ring", comm=MPI.COMM_WORLD) as r:
        r.allreduce(buf, op="mean")      # in place; returns buf
    topo = mpicomm.Topology(MPI.COMM_WORLD, ranks_per_node=None)

The names below are loaded on first use, so ``import mpicomm`` (or
``import mpicomm.costmodel`` for the pure formulas) does not start MPI; the
first use of ``make_reducer``, ``Topology`` and the like does.
"""

# first: picks the MPI thread level (--thread-level / MPICOMM_THREAD_LEVEL) before
# anything imports mpi4py.MPI, which initialises MPI
from mpicomm import _mpi_init  # noqa: F401
from mpicomm.core.errors import ConfigError

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

# public name -> module that defines it (imported on first access)
_LAZY = {
    "REDUCERS": "mpicomm.reducers",
    "MismatchError": "mpicomm.reducers",
    "Reducer": "mpicomm.reducers",
    "make_reducer": "mpicomm.reducers",
    "strategies": "mpicomm.reducers",
    "ReducerOptions": "mpicomm.core.options",
    "Topology": "mpicomm.core.topology",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mpicomm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
