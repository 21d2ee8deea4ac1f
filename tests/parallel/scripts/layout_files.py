"""Rank script: a split model's files through the one loop: checkpoint and resume, trace.

Usage (under ``python -m mpi4py``): ``layout_files.py DIR RUNS_JSON LAYERS [tensorboard]``:
RUNS_JSON maps a label to ``TrainConfig`` overrides (``pipeline_stages``, ...). Per run, in
DIR/LABEL: 6 steps straight (``--checkpoint full.npz --trace trace.json``, and
``--tensorboard tb`` when asked), then 3 steps saved to half.npz and resumed to 6. Rank 0
reports whether the final whole-model parameters (every rank's, gathered) and the two
checkpoints' arrays are bit-identical, and the run's record.
"""

import json
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.train import loop as L

world = MPI.COMM_WORLD
root = Path(sys.argv[1])
kw = dict(layers=tuple(int(w) for w in sys.argv[3].split(",")), dtype="float64",
          batch_size=16, train_samples=512, test_samples=64, eval_samples=128, log_every=0,
          momentum=0.9, weight_decay=1e-3, warmup_steps=3)
tb = len(sys.argv) > 4 and sys.argv[4] == "tensorboard"
out = {}
for label, extra in json.loads(sys.argv[2]).items():
    d = root / label
    if world.Get_rank() == 0:
        d.mkdir(parents=True)
    world.Barrier()
    files = dict(trace=str(d / "trace.json"), tensorboard=str(d / "tb") if tb else None)
    full, half = {}, {}
    rec = L.run_training(L.TrainConfig(**kw, **extra, **files, steps=6,
                                       checkpoint=str(d / "full.npz")), world, verbose=False,
                         keep=full)
    L.run_training(L.TrainConfig(**kw, **extra, steps=3, checkpoint=str(d / "half.npz")),
                   world, verbose=False)
    again = L.run_training(L.TrainConfig(**kw, **extra, steps=6, resume=True,
                                         checkpoint=str(d / "half.npz")), world, verbose=False,
                           keep=half)
    same = world.allreduce(int(np.array_equal(full["params"], half["params"])), op=MPI.MIN)
    files_same = None
    if world.Get_rank() == 0:
        with np.load(d / "full.npz") as a, np.load(d / "half.npz") as b:
            files_same = all(np.array_equal(a[k], b[k]) for k in ("params", "momentum"))
    files_same = world.bcast(files_same, root=0)
    out[label] = dict(params_same=bool(same), files_same=files_same, rec=rec,
                      resumed_from=again["resumed_from_step"],
                      losses=(rec["loss_history"], again["loss_history"]))
report(ok=all(v["params_same"] and v["files_same"] for v in out.values()), runs=out)
