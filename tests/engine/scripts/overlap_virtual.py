"""Rank script: the issue's overlap command under the virtual clock, with the MLP's compute
charged by a flop model; rank 0 reports each run's step, compute, comm and overlap.

Usage (under ``python -m mpi4py``): ``overlap_virtual.py SECONDS_PER_FLOP RUNS`` with RUNS
like ``overlap,ahead,off`` (``--overlap``, ``--overlap-forward``, ``--no-overlap``).

Every matmul of the model's layers charges its 2·m·k·n flops at SECONDS_PER_FLOP
(``--flop-rate``, ``mpicomm.core.flops``) and the rest of the CPU time is charged x 1e-9
(~nothing: SGD, ReLU, the reductions' additions), so the compute is exactly the model's, on
any host and under any load, and what is measured is the schedule: which reductions run
behind which compute (as ``bubble_virtual.py`` measures a pipeline's). Layers 256,512x8,10,
batch 64, 8 buckets of 1 MiB, 2 ranks as 2 nodes over 50us,0.5GB/s: about 17 ms of
communication a step.
"""

import sys

from mpi4py import MPI
from mpi_harness import report

from mpicomm.core import clock
from mpicomm.p2p import virtual
from mpicomm.train import loop as L
from mpicomm.train.blas import limit_blas_threads

SECONDS_PER_FLOP = float(sys.argv[1])  # --flop-rate 1/SECONDS_PER_FLOP
virtual.install(1e-9)
limit_blas_threads(1)
kw = dict(strategy="ring", layers=(256,) + (512,) * 8 + (10,), bucket_mb=1.0, steps=12,
          ranks_per_node=1, inter_link="50us,0.5GB/s", log_every=0, train_samples=2048,
          test_samples=64, eval_samples=64, flop_rate=1 / SECONDS_PER_FLOP)
flags = {"overlap": {}, "ahead": {"overlap_forward": True}, "off": {"overlap": False}}
keys = ("step_time_mean_s", "compute_s", "comm_total_s", "comm_exposed_s", "optimizer_s",
        "overlap_fraction", "final_loss")
out = {}
for name in sys.argv[2].split(","):
    rec = L.run_training(L.TrainConfig(**kw, **flags[name]), MPI.COMM_WORLD, verbose=False)
    out[name] = {k: rec[k] for k in keys}
report(ok=clock.name() == "virtual" and clock.virtual().scale == 1e-9, runs=out)
