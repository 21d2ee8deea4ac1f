"""Rank script: every strategy × bucket size × overlap × dtype trains the same model; the final
params go to OUTDIR/<label>.npz (worker 0's checkpoint) for the test to compare.

Usage (under ``python -m mpi4py``): ``engine_agree.py OUTDIR``. The model has enough tensors
(5 layers, 10 tensors) that small buckets split it many ways. A backward slowed per layer
(``slow_backward``) gives the communication thread every chance to race ahead.
"""

import dataclasses
import json
import sys
import time

from mpi4py import MPI
from mpi_harness import STRATEGY_CASES, report

from mpicomm.nn import MLP
from mpicomm.train import loop as T

outdir = sys.argv[1]
slow = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
_backward = MLP.backward


def slow_backward(self):
    for i in _backward(self):
        yield i
        time.sleep(slow)  # the next layer's grads come late; a bucket sent early would be stale


if slow:
    MLP.backward = slow_backward
T.limit_blas_threads(1)
size = MPI.COMM_WORLD.Get_size()
base = T.TrainConfig(layers=(16, 32, 32, 32, 4), steps=6, batch_size=8, train_samples=256,
                     test_samples=32, eval_samples=32, log_every=0, lr=0.05)
# (bucket MB, overlap): the single-allreduce reference first; a slowed backward needs overlap
CASES = ((1000.0, False), (0.0, True), (0.003, True)) if slow else (
    (1000.0, False), (0.0, True), (0.0, False), (0.003, True), (25.0, True))
labels = []
for strategy, options in STRATEGY_CASES:
    if options.get("ranks_per_node", 1) > size:
        continue
    for dtype in ("float64",) if slow else ("float64", "float32"):
        for bucket_mb, overlap in CASES:
            label = (f"{strategy}-{options.get('variant', '')}-{int(options.get('dedicated', 0))}"
                     f"-{dtype}-{bucket_mb}-{int(overlap)}")
            cfg = dataclasses.replace(base, strategy=strategy, dtype=dtype, bucket_mb=bucket_mb,
                                      overlap=overlap, checkpoint=f"{outdir}/{label}.npz",
                                      **options)
            rec = T.run_training(cfg, verbose=False)
            if not rec["params_in_sync"]:
                report(ok=False, error=f"{label}: workers out of sync")
            labels.append([label, strategy, dtype, bucket_mb, overlap,
                           bool(options.get("dedicated")), rec["buckets"]])
if MPI.COMM_WORLD.Get_rank() == 0:
    with open(f"{outdir}/runs.json", "w") as f:
        json.dump(labels, f)
report(ok=True)
