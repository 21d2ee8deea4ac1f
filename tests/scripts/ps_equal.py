"""Sync PS (W workers + 1 server) against the allreduce loop (ring, W ranks): same parameters."""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.train import loop as L

world = MPI.COMM_WORLD
steps = int(sys.argv[1])
kw = dict(layers=(20, 33, 7), steps=steps, dtype="float64", batch_size=16, train_samples=512,
          test_samples=64, eval_samples=128, log_every=0, momentum=0.9, weight_decay=1e-3,
          warmup_steps=3, bucket_mb=0.0)
keep: dict = {}
rec = L.run_training(L.TrainConfig(strategy="ps", ps_mode=sys.argv[2], servers=int(sys.argv[3]),
                                    **kw), world, verbose=False, keep=keep)
W = rec["workers"]
sub = world.Split(0 if world.Get_rank() < W else MPI.UNDEFINED, world.Get_rank())
if sub != MPI.COMM_NULL:
    cfg = L.TrainConfig(strategy="ring", **kw)
    w = L.make_world(cfg, sub, False)
    job = L.set_up(cfg, w, None)
    engine = L.make_engine(cfg, w, job)
    L.train_steps(cfg, w, job, engine, None)
    engine.close()
    w.reducer.close()
    ring = job.model.params
    rel = float(np.abs(keep["params"] - ring).max() / np.abs(ring).max())
    moved = float(np.abs(ring - L.MLP(cfg.layers, seed=0, dtype="float64").params).max())
    report(ok=rel < 1e-9 and moved > 1e-3, rel=rel, moved=moved, rec=rec)
    sub.Free()
else:
    report(ok=True, role="server", rec=rec)
