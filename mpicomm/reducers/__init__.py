"""Gradient-synchronisation strategies behind one interface (one file per algorithm).

A new strategy is one file defining a ``Reducer`` subclass and one line in
``REDUCERS`` below.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions, parse_compress
from mpicomm.core.topology import spans_world
from mpicomm.reducers.auto import AutoReducer
from mpicomm.reducers.base import MismatchError, Reducer
from mpicomm.reducers.hierarchical import HierarchicalReducer
from mpicomm.reducers.multiring import MultiRingReducer
from mpicomm.reducers.native import NativeReducer
from mpicomm.reducers.ps import ParameterServerReducer
from mpicomm.reducers.recursive_doubling import RecursiveDoublingReducer
from mpicomm.reducers.ring import RingReducer
from mpicomm.reducers.tree import TreeReducer

__all__ = ["REDUCERS", "make_reducer", "check_request", "Reducer", "MismatchError", "strategies"]

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
        **options: ``ReducerOptions`` fields, ``compress`` included (``"none"``,
            ``"fp16"``, ``"int8"``, ``"topk:RATIO"``, ``"topk:RATIO:noef"``); every
            strategy accepts all of them and ignores those it does not use. Unknown
            names, and a codec the strategy cannot run, are refused before any message.
            ``"ring"`` with ``channels`` > 1 builds the multi-channel ring.

    Every rank must ask for the same strategy and options: one small Allgather of
    a hash of (name, options) checks it, and every rank raises ``ConfigError``
    naming both strategies otherwise (a mixed job would hang or sum garbage).

    Returns:
        A ``Reducer`` whose ``allreduce(buf, op="sum"|"mean", key=None)`` works in place.
    """
    base = MPI.COMM_WORLD if comm is None else comm
    check_comm(base)
    try:
        try:
            opts = check_request(name, **options)
        except Exception as exc:  # refused here: the other ranks must not wait in the agreement
            check_same_request(base, name, None, why=str(exc))
            raise
        check_same_request(base, name, opts)
    except ConfigError as exc:  # raised on every rank of ``base`` alike (the agreement)
        exc.on_every_rank = spans_world(base)
        raise
    cls = REDUCERS[name]
    if cls is RingReducer and opts.channels > 1:  # ring over K channels: its own file
        cls = MultiRingReducer
    return cls(base, opts)


def check_comm(comm: Any) -> None:
    """Raise ``ConfigError`` (before any message) unless ``comm`` is a usable
    intracommunicator: a string, ``MPI.COMM_NULL`` or an intercommunicator (whose
    collectives span two groups: ``node_map``'s Allgather hung on one) is refused."""
    valid = ("an mpi4py intracommunicator: MPI.COMM_WORLD (the default), or one made from it "
             "by Split, Dup or Create")
    if not isinstance(comm, MPI.Comm):
        raise ConfigError(f"make_reducer: comm={comm!r} is a {type(comm).__name__}; expected "
                          f"{valid}")
    if comm == MPI.COMM_NULL:
        raise ConfigError(f"make_reducer: comm is MPI.COMM_NULL (this rank is in no group of "
                          f"the split); expected {valid}; call make_reducer only on the ranks "
                          "of a group")
    if comm.Is_inter():
        raise ConfigError(f"make_reducer: comm is an intercommunicator; expected {valid}; "
                          "merge it first (comm.Merge())")


def check_request(name: str, **options) -> ReducerOptions:
    """Return ``name``'s options checked without MPI: ``ConfigError`` for an unknown strategy
    or option, or a codec the strategy cannot run (``compare`` asks for each strategy first)."""
    cls = REDUCERS.get(name)
    if cls is None:
        raise ConfigError(f"unknown strategy {name!r}; valid strategies: {', '.join(REDUCERS)}")
    opts = ReducerOptions.from_kwargs(f"make_reducer({name!r})", **options)
    kind = parse_compress(opts.compress)[0]
    cls.check_compress(opts, [n for n, c in REDUCERS.items() if kind in c.compressions])
    return opts


def check_same_request(comm: MPI.Comm, name: str, opts: ReducerOptions | None,
                       why: str = "") -> None:
    """Raise ``ConfigError`` on every rank unless all ranks of ``comm`` asked for ``name``
    with ``opts`` (one Allgather of (strategy index, hash of the options)).

    ``opts`` None: this rank refused its own request for reason ``why``; it still joins the
    Allgather and raises its own error, and every other rank raises one naming the first
    refusing rank and its reason (which that rank broadcasts), instead of waiting for it."""
    if comm.Get_size() == 1:
        return
    names = list(REDUCERS)
    mine = np.array([-1, 0] if opts is None else
                    [names.index(name), zlib.crc32(repr(opts).encode())], dtype=np.int64)
    every = np.empty((comm.Get_size(), 2), dtype=np.int64)
    comm.Allgather(mine, every)
    me = comm.Get_rank()
    refused = [int(r) for r in np.flatnonzero(every[:, 0] < 0)]
    if refused and len(refused) < len(every):  # some ranks refused: every rank learns why
        why = comm.bcast(why if me == refused[0] else None, root=refused[0])
        if opts is not None:
            raise ConfigError(f"make_reducer: rank {refused[0]} refused its request ({why}; "
                              f"ranks refusing: {refused}): every rank must ask for the same "
                              "strategy and valid options")
    if opts is None or (every == every[0]).all():
        return
    other = next(r for r in range(len(every)) if (every[r] != mine).any())
    theirs = names[int(every[other, 0])]
    if theirs != name:
        raise ConfigError(f"make_reducer: rank {me} asked for strategy {name!r}, rank {other} "
                          f"for {theirs!r}: every rank must use the same strategy")
    raise ConfigError(f"make_reducer({name!r}): rank {me} and rank {other} asked for different "
                      f"options (rank {me}: {opts}): every rank must pass the same options")
