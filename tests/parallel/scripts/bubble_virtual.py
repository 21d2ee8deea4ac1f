"""Rank script: P = 4 pipelines under the virtual clock; report each run's measured bubble.

Usage (under ``python -m mpi4py``): ``bubble_virtual.py RUNS`` with RUNS like
``1f1b:4,gpipe:16`` (schedule:micro-batches). Every run trains the same 4-layer MLP of width
256 on 1024 rows a step (float32), one stage per rank, its input 384 wide so that stage 0
(no input gradient: F + B = 2·384·256) costs what the others do (3·256²). The width is small
so that the real arithmetic is quick (16x less than at width 1024, 88 s of a loaded run);
the charged compute is the model's and the same as at width 1024 with 16x the flop rate.

The stages' compute is charged by a flop model, not CPU time: the clock charges CPU time x
1e-9 (~nothing), and every matmul of a stage charges 2·m·k·n flops at ``FLOP_RATE``
(``--flop-rate``, ``mpicomm.core.flops``). So the stages cost exactly what the formula
assumes (equal), on any host and under any load, and what is measured is the schedule: the
order of F and B, the messages between stages (charged by the link model) and the clock's
reading of idle time. (CPU time as the charge: a stage whose CPU time ran slow for a whole
run moved GPipe's bubble by -42% on CI's busy host and by -51% here under load;
docs/parallelism.md.) Rank 0 reports per run ``bubble_measured``, ``bubble_formula``,
``idle_share_by_stage``.
"""

import sys

from mpi4py import MPI
from mpi_harness import report

from mpicomm.core import clock
from mpicomm.p2p import virtual
from mpicomm.train import loop as L
from mpicomm.train.blas import limit_blas_threads

FLOP_RATE = 6.25e8  # 0.625 GFLOP/s: F of a 64-row micro-batch, 13.4 ms

world = MPI.COMM_WORLD
virtual.install(1e-9)
limit_blas_threads(1)
kw = dict(layers=(384,) + (256,) * 4, batch_size=1024, steps=6, train_samples=2048,
          test_samples=64, log_every=0, pipeline_stages=4, flop_rate=FLOP_RATE)
out = {}
for spec in sys.argv[1].split(","):
    kind, M = spec.split(":")
    rec = L.run_training(L.TrainConfig(**kw, schedule=kind, micro_batches=int(M)), world,
                         verbose=False)
    out[spec] = {k: rec[k] for k in ("bubble_measured", "bubble_formula", "idle_share_by_stage",
                                     "clock")}
report(ok=clock.name() == "virtual" and clock.virtual().scale == 1e-9, runs=out)
