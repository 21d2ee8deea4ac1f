"""Rank script: pipeline runs against the unsplit loop (ring over the replicas): the same losses.

Usage (under ``python -m mpi4py``): ``pipeline_equal.py RUNS`` with RUNS a comma list of
``P:M:SCHEDULE``. Each rank reports, per run, the largest relative loss difference and the
run's record.
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.train import loop as L

world = MPI.COMM_WORLD
kw = dict(layers=(20, 33, 17, 9, 7), steps=5, dtype="float64", batch_size=16, train_samples=512,
          test_samples=64, eval_samples=128, log_every=0, momentum=0.9, weight_decay=1e-3,
          warmup_steps=3)
refs: dict = {}
out = {}
for run in sys.argv[1].split(","):
    P, M, sch = run.split(":")
    rec = L.run_training(L.TrainConfig(pipeline_stages=int(P), micro_batches=int(M), schedule=sch,
                                       **kw), world, verbose=False)
    R = rec["workers"]
    if R not in refs:  # the unsplit loop on R data-parallel ranks
        sub = world.Split(0 if world.Get_rank() < R else MPI.UNDEFINED, world.Get_rank())
        ref = None
        if sub != MPI.COMM_NULL:
            ref = L.run_training(L.TrainConfig(strategy="ring", **kw), sub, verbose=False)
            sub.Free()
        refs[R] = world.bcast(ref["loss_history"] if ref else None, root=0)
    a, b = np.array(rec["loss_history"]), np.array(refs[R])
    rec.pop("loss_history_step")
    out[run] = dict(rel=float(np.abs(a - b).max() / np.abs(b).max()), rec=rec)
report(ok=all(v["rel"] < 1e-9 for v in out.values()), runs=out)
