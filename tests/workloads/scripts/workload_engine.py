"""Rank script: the real gradient engine over a workload's real tensor list.

Usage (under ``python -m mpi4py``): ``workload_engine.py MODEL STRATEGY BUCKET_MB OVERLAP
[FOLD]``. One step of ``WorkloadModel`` (rank r's layer i gradient is (i+1)(r+1)e-6) through
``GradEngine`` and the strategy's reducer; every rank reports the largest relative error of
its reduced gradient against the mean (i+1)(p+1)/2·1e-6 per layer, the buckets the engine
planned against ``plan_buckets`` over the workload, and how many were reduced.

``FOLD`` > 1 (``--fold``): the virtual clock with that fold (each tensor holds ⌈n/F⌉
elements, the pieces and chunks are the unfolded run's, 1/F of their elements), the engine's
plan made on the full sizes: it must equal the unfolded plan bucket for bucket (its
tensors, its ready layer), each bucket over the same tensors of the folded buffer.
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.engine.buckets import plan_buckets
from mpicomm.engine.grad_engine import GradEngine
from mpicomm.p2p import install_clock, set_fold
from mpicomm.workloads import workload
from mpicomm.workloads.model import WorkloadModel

name, strategy, bucket_mb, overlap = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
fold = int(sys.argv[5]) if len(sys.argv) > 5 else 1
comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
if fold > 1:
    install_clock("virtual", 1.0, 1, None, None)
    set_fold(fold)
w = workload(name)
model = WorkloadModel(w, batch=2, rank=rank, fold=fold)
full = w.flat_tensors() if fold > 1 else None
with mpicomm.make_reducer(strategy, comm=comm) as reducer:
    engine = GradEngine(reducer, model.grads, model.tensors, model.spans,
                        bucket_bytes=bucket_mb * 2**20, overlap=overlap == "1",
                        full_tensors=full)
    model.forward(None, None)
    engine.backward(model.backward())
    reduced = sum(1 for _ in engine.reduced())
    engine.close()
err, seen = 0.0, 0
for i, span in enumerate(model.spans):
    if span.stop > span.start:
        want = (i + 1) * (p + 1) / 2 * 1e-6
        err = max(err, float(np.max(np.abs(model.grads[span] - want))) / want)
        seen += span.stop - span.start
plan = plan_buckets(w.flat_tensors(), 4, bucket_mb * 2**20)
same = [(b.index, b.ready_layer, b.tensors) for b in plan] == \
    [(b.index, b.ready_layer, b.tensors) for b in engine.buckets]
held = sum(b.size for b in engine.buckets) == model.num_params == seen
report(ok=err < 1e-5 and reduced == len(plan) == len(engine.buckets) and same and held,
       err=err, buckets=len(engine.buckets), planned=len(plan), reduced=reduced, same=same,
       held=held, elements=model.num_params)
