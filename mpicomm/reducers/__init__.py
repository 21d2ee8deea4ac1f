"""Gradient-synchronisation strategies behind one interface (one file per algorithm).

A new strategy is one file defining a ``Reducer`` subclass and one line in
``REDUCERS`` below.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions
from mpicomm.reducers.auto import AutoReducer
from mpicomm.reducers.base import MismatchError, Reducer
from mpicomm.reducers.hierarchical import HierarchicalReducer
from mpicomm.reducers.multiring import MultiRingReducer
from mpicomm.reducers.native import NativeReducer
from mpicomm.reducers.ps import ParameterServerReducer
from mpicomm.reducers.recursive_doubling import RecursiveDoublingReducer
from mpicomm.reducers.ring import RingReducer
from mpicomm.reducers.tree import TreeReducer

__all__ = ["REDUCERS", "make_reducer", "Reducer", "MismatchError", "strategies"]

REDUCERS: dict[str, type[Reducer]] = {
    "native": NativeReducer,
    "ring": RingReducer,
    "hierarchical": HierarchicalReducer,
    "ps": ParameterServerReducer,
    "recursive_doubling": RecursiveDoublingReducer,
    "auto": AutoReducer,
    "tree": TreeReducer,
}


def strategies() -> list[str]:
    """Return the registered strategy names."""
    return list(REDUCERS)


def make_reducer(name: str, comm: MPI.Comm | None = None, **options) -> Reducer:
    """Create the reducer for strategy ``name``. Collective over ``comm``.

    Args:
        name: one of ``strategies()``.
        comm: communicator to reduce over (default ``MPI.COMM_WORLD``).
        **options: ``ReducerOptions`` fields; every strategy accepts all of
            them and ignores those it does not use. Unknown names are an error.
            ``"ring"`` with ``channels`` > 1 builds the multi-channel ring.

    Returns:
        A ``Reducer`` whose ``allreduce(buf, op="sum"|"mean")`` works in place.
    """
    cls = REDUCERS.get(name)
    if cls is None:
        raise ConfigError(f"unknown strategy {name!r}; valid strategies: {', '.join(REDUCERS)}")
    opts = ReducerOptions.from_kwargs(f"make_reducer({name!r})", **options)
    if opts.compress != "none":  # the codecs layer sits above: it wraps what this builds
        raise ConfigError(f"compress={opts.compress!r}: compressed reducers are built by "
                          f"mpicomm.make_reducer (mpicomm.codecs.make_reducer)")
    if cls is RingReducer and opts.channels > 1:  # ring over K channels: its own file
        cls = MultiRingReducer
    return cls(comm, opts)
