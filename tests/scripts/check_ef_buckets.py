"""Rank script: top-k error feedback through the grad engine keeps one residual per bucket.

Two buckets of equal length (layer 0 and layer 1, one tensor each) get different
random gradients every step; the engine reduces them with ring + ``topk:RATIO``.
Every rank recomputes each rank's inputs from (seed, rank, step) and runs an
independent NumPy reference of per-bucket error feedback (acc = x + residual;
send the k largest |acc|; residual = the rest), then compares the engine's
result step by step. Usage (under ``python -m mpi4py``)::

    check_ef_buckets.py --xp cupy --n 1000 --steps 4 --ratio 0.05
"""

import argparse
import math

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.engine import GradEngine


def grads_of(seed: int, rank: int, step: int, n: int) -> np.ndarray:
    return np.random.default_rng([seed, rank, step]).standard_normal(2 * n)


def reference_step(xs: list[np.ndarray], residuals: list[list[np.ndarray]], n: int,
                   k: int) -> np.ndarray:
    """The mean over ranks of what each rank sends, per bucket, updating the residuals."""
    total = np.zeros(2 * n)
    for r, x in enumerate(xs):
        for b, sl in enumerate((slice(0, n), slice(n, 2 * n))):
            acc = residuals[r][b] + x[sl]
            idx = np.argpartition(np.abs(acc), n - k)[n - k :]
            total[sl][idx] += acc[idx]
            acc[idx] = 0
            residuals[r][b] = acc
    return total / len(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--xp", default="numpy", choices=["numpy", "cupy"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ratio", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    xp = np
    if args.xp == "cupy":
        import cupy as xp
    comm, n = MPI.COMM_WORLD, args.n
    p, me = comm.Get_size(), comm.Get_rank()
    k = min(n, max(1, math.ceil(args.ratio * n)))
    reducer = mpicomm.make_reducer("ring", comm=comm, compress=f"topk:{args.ratio}")
    grads = xp.zeros(2 * n, dtype=np.float64)
    engine = GradEngine(reducer, grads, [(0, 0, n), (1, n, 2 * n)], [slice(0, n), slice(n, 2 * n)],
                        bucket_bytes=0, overlap=False)
    residuals = [[np.zeros(n), np.zeros(n)] for _ in range(p)]
    failures = []
    for step in range(args.steps):
        xs = [grads_of(args.seed, r, step, n) for r in range(p)]
        grads[...] = xp.asarray(xs[me])
        engine.backward(iter([1, 0]))
        sizes = [b.size for b in engine.reduced()]
        got = grads.get() if args.xp == "cupy" else grads.copy()
        want = reference_step(xs, residuals, n, k)
        err = float(np.abs(got - want).max())
        if sizes != [n, n] or err > 1e-12:
            failures.append(f"step {step}: buckets {sizes}, max error {err:.3g} against the "
                            "per-bucket reference")
    engine.close()
    reducer.close()
    report(ok=not failures, error="; ".join(failures[:3]) or None, steps=args.steps)


main()
