"""Rank script: a NaN (or inf) in one rank's buffer stays NaN (inf) after a compressed
reduction, and the other values of the message are still summed within the bound."""

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

comm = MPI.COMM_WORLD
p = comm.Get_size()
problems = []
for strategy in ("ring", "ps", "hierarchical", "recursive_doubling"):
    for codec in ("fp16", "int8"):
        with mpicomm.make_reducer(strategy, compress=codec) as r:
            for dtype in (np.float32, np.float64):
                x = np.array([np.nan, 100, 1, 2, 3, 4], dtype=dtype)
                out = r.allreduce(x.copy())
                want = x[1:] * p
                tol = 2 * p * (2.0**-11 if codec == "fp16" else 100 / 127)
                if not np.isnan(out[0]) or not np.allclose(out[1:], want, atol=tol * 10):
                    problems.append(f"{strategy} {codec} {dtype.__name__}: {out}")
                big = np.array([1e50, 2e50, 3, 4], dtype=np.float64)
                out = r.allreduce(big.copy())
                if codec == "fp16" and not np.allclose(out[:2], big[:2] * p, rtol=p * 2.0**-10):
                    problems.append(f"{strategy} {codec} 1e50: {out}")
                inf = np.array([np.inf, 1, 2], dtype=dtype)
                out = r.allreduce(inf.copy())
                if np.isfinite(out[0]):
                    problems.append(f"{strategy} {codec} inf became {out[0]}")
report(ok=not problems, error="; ".join(problems[:4]) or None)
