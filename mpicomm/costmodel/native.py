"""MPI's own collectives as MPICH picks them: the one cost of ``native`` and of every MPI
collective a reducer calls (the virtual clock charges these; the predictor predicts them).

Pure, no MPI. p ranks, L of them per node (L = p: one node), n bytes per rank, (αi, βi) and
(αe, βe) of the two link classes (βe already carrying the NIC share of the ranks that cross
at once), γ seconds per byte to add inside MPI, α0 the per-call base latency.

    allreduce  n < SHORT_BYTES: recursive doubling, lg P rounds of the whole buffer, the first
               lg L inside a node (``recursive_doubling_cluster_time``); else Rabenseifner,
               recursive halving then doubling (``rabenseifner_cluster_time``) — MPICH's
               MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE switch
    reduce, bcast  binomial tree lg p·(α + nβ) short, else scatter (reduce-scatter) +
               gather (allgather): 2 lg p·α + 2(p−1)/p·nβ; at the slower class crossed
    allgather  recursive doubling of n per rank: lg p·α + (p−1)·nβ

The same functions on a measured link's tables (``--links-from``) are
``calibrate.measured_collective_seconds``.
"""

from __future__ import annotations

import math

from mpicomm.costmodel.cluster_formulas import (
    rabenseifner_cluster_time,
    recursive_doubling_cluster_time,
)

__all__ = ["SHORT_BYTES", "COLLECTIVES", "mpi_collective_time"]

SHORT_BYTES = 2048  # MPICH's short-message switch for its collectives (recursive doubling below)
COLLECTIVES = ("allreduce", "reduce", "bcast", "allgather")


def mpi_collective_time(kind: str, nbytes: float, p: int, local: int,
                        intra: tuple[float, float], inter: tuple[float, float],
                        gamma: float = 0.0, alpha_call: float = 0.0) -> float:
    """Seconds of MPI collective ``kind`` of ``nbytes`` per rank on p ranks, L = ``local`` per
    node (module docstring). ``ValueError`` for an unknown kind."""
    if kind not in COLLECTIVES:
        raise ValueError(f"unknown collective {kind!r}")
    if p < 2:
        return 0.0
    local = max(1, min(local, p))
    if kind == "allreduce":
        fn = recursive_doubling_cluster_time if nbytes < SHORT_BYTES else \
            rabenseifner_cluster_time
        return fn(p, nbytes, local, intra, inter, gamma, alpha_call)
    alpha, beta = inter if local < p else intra  # a tree or a doubling crosses the slow class
    lg = math.ceil(math.log2(p))
    add = 0.0 if kind in ("bcast", "allgather") else nbytes * gamma
    if kind == "allgather":
        return alpha_call + lg * alpha + (p - 1) * nbytes * beta
    if nbytes < SHORT_BYTES:
        return alpha_call + lg * (alpha + nbytes * beta + add)
    return alpha_call + 2 * lg * alpha + (p - 1) / p * (2 * nbytes * beta + add)
