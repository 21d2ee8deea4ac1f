"""Rank script: model-parallel runs against the unsplit loop (ring over the replicas): same losses.

Usage (under ``python -m mpi4py``): ``layout_equal.py RUNS_JSON LAYERS``: RUNS_JSON maps a label
to ``TrainConfig`` overrides (``pipeline_stages``, ``tensor_parallel``, ...); LAYERS the widths.
Rank 0 reports, per run, the largest relative difference of the per-step losses and the record.
"""

import json
import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.train import loop as L

world = MPI.COMM_WORLD
kw = dict(layers=tuple(int(w) for w in sys.argv[2].split(",")), steps=5, dtype="float64",
          batch_size=16, train_samples=512, test_samples=64, eval_samples=128, log_every=0,
          momentum=0.9, weight_decay=1e-3, warmup_steps=3)
refs: dict = {}
out = {}
for label, extra in json.loads(sys.argv[1]).items():
    rec = L.run_training(L.TrainConfig(**kw, **extra), world, verbose=False)
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
    out[label] = dict(rel=float(np.abs(a - b).max() / np.abs(b).max()), rec=rec)
report(ok=all(v["rel"] < 1e-9 for v in out.values()), runs=out)
