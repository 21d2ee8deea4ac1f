"""Rank script: each strategy without and with an emulated link: identical bits and counts."""

import numpy as np
from mpi4py import MPI
from mpi_harness import STRATEGY_CASES, report

import mpicomm
from mpicomm.p2p import Transport

comm = MPI.COMM_WORLD
problems = []


def run(strategy: str, options: dict):
    outs = []
    with mpicomm.make_reducer(strategy, comm=comm, **options) as r:
        if not r.is_worker:
            r.serve()
            return None, r.stats.as_dict(), type(r.p2p)
        for case, (n, dtype, op) in enumerate([(1001, "float32", "sum"), (7, "float64", "mean"),
                                               (300007, "float32", "mean")]):
            rng = np.random.default_rng([5, r.worker_rank, case])
            x = rng.standard_normal(n).astype(dtype)
            outs.append(r.allreduce(x, op=op).tobytes())
        stats = r.stats.as_dict()
    return outs, stats, type(r.p2p)


cases = 0
for strategy, options in STRATEGY_CASES:
    base = {"ranks_per_node": 2, **options}
    if strategy == "auto":  # a fixed switch size: its start-up calibration may differ per run
        base["crossover_bytes"] = 4096
    off_out, off_stats, off_kind = run(strategy, base)
    on_out, on_stats, _ = run(strategy, {**base, "inter_link": "1us,10GB/s"})
    for d in (off_stats, on_stats):
        d.pop("seconds")
    if off_kind is not Transport:
        problems.append(f"{strategy} {options}: emulation off uses {off_kind.__name__}")
    if off_out != on_out:
        problems.append(f"{strategy} {options}: results differ with emulation on")
    if off_stats != on_stats:
        problems.append(f"{strategy} {options}: counts differ: {off_stats} vs {on_stats}")
    cases += 1
report(ok=not problems, error="; ".join(problems) or None, cases=cases)
