"""Rank script: check one strategy against a NumPy reference on random data.

Every rank draws its own input from (seed, rank, case) and can redraw every
other rank's input, so each rank computes the expected sum independently of
the reducer, in float64. Usage (under ``python -m mpi4py``)::

    check_reducer.py STRATEGY '{"servers": 2}' --lengths 1,2,5 --dtypes float32 --ops sum,mean
"""

import argparse
import json

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm


def rank_input(seed: int, rank: int, case: int, n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng([seed, rank, case])
    return rng.standard_normal(n).astype(dtype)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("strategy")
    ap.add_argument("options", nargs="?", default="{}")
    ap.add_argument("--lengths", default="1,2,1000")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--ops", default="sum,mean")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--repeat", type=int, default=2, help="calls per case (reuse of buffers)")
    ap.add_argument("--xp", default="numpy", choices=["numpy", "cupy"], help="buffer kind")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    cupy = None
    if args.xp == "cupy":
        import cupy

        cupy.cuda.Device(comm.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    size = comm.Get_size()
    lengths = [int(x) if x != "p-1" else max(size - 1, 1) for x in args.lengths.split(",")]
    reducer = mpicomm.make_reducer(args.strategy, comm=comm, **json.loads(args.options))
    if not reducer.is_worker:
        reducer.serve()
        st = reducer.stats
        report(ok=True, role="server", bytes_sent=st.bytes_sent, bytes_recv=st.bytes_recv,
               inter_bytes_sent=st.inter_bytes_sent, inter_bytes_recv=st.inter_bytes_recv)
        return
    workers = reducer.num_workers
    wr = reducer.worker_rank
    failures = []
    case = 0
    for n in lengths:
        for dtype in args.dtypes.split(","):
            for op in args.ops.split(","):
                for rep in range(args.repeat):
                    case += 1
                    mine = rank_input(args.seed, wr, case, n, dtype)
                    total = np.zeros(n, dtype=np.float64)
                    scale = np.zeros(n, dtype=np.float64)
                    for r in range(workers):
                        x = rank_input(args.seed, r, case, n, dtype).astype(np.float64)
                        total += x
                        scale += np.abs(x)
                    if op == "mean":
                        total /= workers
                        scale /= workers
                    buf = mine.copy()
                    if args.xp == "cupy":
                        buf = cupy.asarray(mine)
                    out = reducer.allreduce(buf, op=op)
                    if args.xp == "cupy":
                        if out is not buf:
                            failures.append("allreduce did not return its buffer")
                        out = buf = out.get()
                    eps = np.finfo(dtype).eps
                    err = np.abs(out.astype(np.float64) - total)
                    bound = 4 * workers * eps * (scale + 1e-30)
                    nbad = int((err > bound).sum())
                    if out is not buf or out.dtype != np.dtype(dtype) or nbad:
                        failures.append(
                            f"n={n} {dtype} {op} rep={rep}: {nbad} wrong elements, "
                            f"max err {float(err.max()):.3g}"
                        )
    reducer.close()
    report(
        ok=not failures,
        error="; ".join(failures[:5]) or None,
        cases=case,
        strategy=args.strategy,
        bytes_sent=reducer.stats.bytes_sent,
        bytes_recv=reducer.stats.bytes_recv,
        calls=reducer.stats.calls,
        inter_bytes_sent=reducer.stats.inter_bytes_sent,
        inter_bytes_recv=reducer.stats.inter_bytes_recv,
        emulated=reducer.describe()["emulated"],
        # the CuPy stand-in counts host<->device copies: the tests check none is hidden
        transfers=dict(cupy.transfers) if getattr(cupy, "STANDIN", False) else None,
    )


main()
