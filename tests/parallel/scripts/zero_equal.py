"""Rank script: ring, ZeRO-1 and ZeRO-2 train the same model; parameters after every step agree.

Usage (under ``python -m mpi4py``): ``zero_equal.py STEPS BUCKET_MB``. Each rank reports the
largest relative difference to the ring's parameters over all steps, and the three records'
bytes per step and optimizer-state bytes.
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.engine import GradEngine
from mpicomm.engine.zero import ZeroEngine
from mpicomm.train import loop as L

steps, bucket_mb = int(sys.argv[1]), float(sys.argv[2])
kw = dict(layers=(20, 33, 7), steps=steps, dtype="float64", batch_size=16, train_samples=512,
          test_samples=64, eval_samples=128, log_every=0, momentum=0.9, weight_decay=1e-3,
          warmup_steps=3, bucket_mb=bucket_mb, overlap=False)
snaps: list = []  # the parameters at the start of every step of the current run
runs = {}
for label, extra in (("ring", dict(strategy="ring")),
                     ("zero1", dict(strategy="zero", zero_stage=1)),
                     ("zero2", dict(strategy="zero", zero_stage=2))):
    snaps.clear()
    keep: dict = {}
    orig = {}
    for cls in (GradEngine, ZeroEngine):  # record the parameters at the start of every step
        orig[cls] = cls.start_step

        def wrapped(self, step, lr, _o=orig[cls]):
            snaps.append(self._params_ref.copy())
            _o(self, step, lr)
        cls.start_step = wrapped
    real_make = L.make_engine

    def make_engine(cfg, world, job, _real=real_make):
        e = _real(cfg, world, job)
        e._params_ref = job.model.params
        return e
    L.make_engine = make_engine
    rec = L.run_training(L.TrainConfig(**kw, **extra), MPI.COMM_WORLD, verbose=False, keep=keep)
    L.make_engine = real_make
    for cls, fn in orig.items():
        cls.start_step = fn
    runs[label] = (np.array(snaps[1:] + [keep["params"]]), rec)

ring = runs["ring"][0]
rel = {k: float(np.abs(v[0] - ring).max() / np.abs(ring).max()) for k, v in runs.items()}
moved = float(np.abs(ring[-1] - ring[0]).max())
recs = {k: v[1] for k, v in runs.items()}
report(ok=max(rel.values()) < 1e-9 and moved > 1e-3 and len(ring) == steps, rel=rel,
       moved=moved, steps=len(ring),
       bytes={k: r["bytes_per_step"] for k, r in recs.items()},
       opt={k: r["optimizer_state_bytes"] for k, r in recs.items()},
       sync={k: r["params_in_sync"] for k, r in recs.items()},
       loss={k: r["final_loss"] for k, r in recs.items()})
