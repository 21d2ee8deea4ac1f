"""Rank script: every registered strategy returns the same reduction (to fp reordering)."""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
configs = [(name, {}) for name in mpicomm.strategies()]
configs += [
    ("hierarchical", {"ranks_per_node": 2}),
    ("hierarchical", {"ranks_per_node": 2, "variant": "leader"}),
    ("ps", {"servers": min(3, size)}),
]
reducers = [(f"{n}{o or ''}", mpicomm.make_reducer(n, **o)) for n, o in configs]
problems = []
for case, n in enumerate(int(x) for x in sys.argv[1].split(",")):
    for dtype in (np.float32, np.float64):
        x = np.random.default_rng([7, rank, case]).standard_normal(n).astype(dtype)
        scale = np.abs(x).astype(np.float64)
        comm.Allreduce(MPI.IN_PLACE, scale)
        results = {}
        for label, red in reducers:
            results[label] = red.allreduce(x.copy(), op="sum").astype(np.float64)
        ref_label = reducers[0][0]
        bound = 4 * size * np.finfo(dtype).eps * (scale + 1e-30)
        for label, got in results.items():
            diff = np.abs(got - results[ref_label])
            if (diff > 2 * bound).any():
                problems.append(
                    f"n={n} {np.dtype(dtype)}: {label} vs {ref_label} max {diff.max():.3g}"
                )
report(
    ok=not problems, error="; ".join(problems[:5]) or None, compared=[lbl for lbl, _ in reducers]
)
