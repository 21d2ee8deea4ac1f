"""Rank script: P = 4 pipelines under the virtual clock; report each run's measured bubble.

Usage (under ``python -m mpi4py``): ``bubble_virtual.py RUNS`` with RUNS like
``1f1b:4,gpipe:16x3`` (schedule:micro-batches, and ``xN``: N runs, the median reported).
Every run trains the same 4-layer MLP of
width 1024 on 1024 rows a step (float32), one stage per rank, its input 1536 wide so
that stage 0 (no input gradient: F + B = 2·1536·1024) costs what the others do (3·1024²);
rank 0 reports per run
``bubble_measured``, ``bubble_formula`` and ``idle_share_by_stage`` from the run's record.
"""

import sys

from mpi4py import MPI
from mpi_harness import report

from mpicomm.core import clock
from mpicomm.p2p import virtual
from mpicomm.train import loop as L
from mpicomm.train.blas import limit_blas_threads

world = MPI.COMM_WORLD
virtual.install(1.0)
limit_blas_threads(1)  # as the command does: one BLAS thread per rank, its CPU time charged
kw = dict(layers=(1536,) + (1024,) * 4, batch_size=1024, steps=8, train_samples=2048,
          test_samples=64, log_every=0, pipeline_stages=4)
out = {}
for spec in sys.argv[1].split(","):
    run, _, times = spec.partition("x")
    kind, M = run.split(":")
    recs = [L.run_training(L.TrainConfig(**kw, schedule=kind, micro_batches=int(M)), world,
                           verbose=False) for _ in range(int(times or 1))]
    rec = sorted(recs, key=lambda r: r["bubble_measured"])[len(recs) // 2]  # the median run
    out[run] = {k: rec[k] for k in ("bubble_measured", "bubble_formula", "idle_share_by_stage",
                                    "clock")}
    out[run]["bubbles"] = [r["bubble_measured"] for r in recs]
report(ok=clock.name() == "virtual", runs=out)
