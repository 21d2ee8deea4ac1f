"""Rank script: train the same small model under every strategy in one job; save final params.

Usage (under ``python -m mpi4py``): ``train_agree.py OUTDIR RUNS_JSON`` where RUNS_JSON is a
list of ``[label, strategy, options]``. Each run's final checkpoint goes to OUTDIR/label.npz
(params and momentum); every rank reports the run's record summary.
"""

import dataclasses
import json
import sys

from mpi_harness import report

from mpicomm.train import loop as T

outdir, runs = sys.argv[1], json.loads(sys.argv[2])
base = T.TrainConfig(layers=(16, 32, 32, 4), steps=20, batch_size=8, train_samples=512,
                     test_samples=64, eval_samples=128, log_every=0, lr=0.05)
T.limit_blas_threads(1)
for label, strategy, options in runs:
    ck = f"{outdir}/{label}.npz"
    cfg = dataclasses.replace(base, strategy=strategy, checkpoint=ck, **options)
    rec = T.run_training(cfg, verbose=False)
    report(label=label, workers=rec["workers"], in_sync=rec["params_in_sync"],
           steps=rec["steps"], ok=bool(rec["params_in_sync"]))
