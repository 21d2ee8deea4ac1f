"""Rank script: model-parallel runs against the unsplit loop (ring over the replicas): same losses.

Usage (under ``python -m mpi4py``): ``layout_equal.py RUNS_JSON LAYERS``: RUNS_JSON maps a label
to ``TrainConfig`` overrides (``pipeline_stages``, ``tensor_parallel``, and any other flag:
``accumulate``, ``bucket_mb``, ``overlap_forward``, ...); LAYERS the widths. The reference is
the ring on R ranks (R: the run's replicas) with the same overrides but the layout's. Rank 0
reports, per run, the largest relative difference of the per-step losses, the record, and the
keys of the reference's record the run's lacks.
"""

import json
import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.train import loop as L

LAYOUT = ("pipeline_stages", "micro_batches", "schedule", "tensor_parallel")

world = MPI.COMM_WORLD
kw = dict(layers=tuple(int(w) for w in sys.argv[2].split(",")), steps=5, dtype="float64",
          batch_size=16, train_samples=512, test_samples=64, eval_samples=128, log_every=0,
          momentum=0.9, weight_decay=1e-3, warmup_steps=3)
refs: dict = {}
out = {}
for label, extra in json.loads(sys.argv[1]).items():
    rec = L.run_training(L.TrainConfig(**{**kw, **extra}), world, verbose=False)
    R = rec["workers"]
    same = {k: v for k, v in extra.items() if k not in LAYOUT}
    key = (R, json.dumps(same, sort_keys=True))
    if key not in refs:  # the unsplit loop on R data-parallel ranks
        sub = world.Split(0 if world.Get_rank() < R else MPI.UNDEFINED, world.Get_rank())
        ref = None
        if sub != MPI.COMM_NULL:
            ref = L.run_training(L.TrainConfig(**{**kw, **same, "strategy": "ring"}), sub,
                                 verbose=False)
            sub.Free()
        refs[key] = world.bcast((ref["loss_history"], sorted(ref)) if ref else None, root=0)
    history, keys = refs[key]
    a, b = np.array(rec["loss_history"]), np.array(history)
    rec.pop("loss_history_step")
    out[label] = dict(rel=float(np.abs(a - b).max() / np.abs(b).max()), rec=rec,
                      missing=[k for k in keys if k not in rec and k != "loss_history_step"])
report(ok=all(v["rel"] < 1e-9 for v in out.values()), runs=out)
