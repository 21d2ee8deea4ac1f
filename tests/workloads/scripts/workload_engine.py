"""Rank script: the real gradient engine over a workload's real tensor list.

Usage (under ``python -m mpi4py``): ``workload_engine.py MODEL STRATEGY BUCKET_MB OVERLAP``.
One step of ``WorkloadModel`` (rank r's layer i gradient is (i+1)(r+1)e-6) through
``GradEngine`` and the strategy's reducer; every rank reports the largest relative error of
its reduced gradient against the mean (i+1)(p+1)/2·1e-6 per layer, the buckets the engine
planned against ``plan_buckets`` over the workload, and how many were reduced.
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.engine.buckets import plan_buckets
from mpicomm.engine.grad_engine import GradEngine
from mpicomm.workloads import workload
from mpicomm.workloads.model import WorkloadModel

name, strategy, bucket_mb, overlap = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
w = workload(name)
model = WorkloadModel(w, batch=2, rank=rank)
with mpicomm.make_reducer(strategy, comm=comm) as reducer:
    engine = GradEngine(reducer, model.grads, model.tensors, model.spans,
                        bucket_bytes=bucket_mb * 2**20, overlap=overlap == "1")
    model.forward(None, None)
    engine.backward(model.backward())
    reduced = sum(1 for _ in engine.reduced())
    engine.close()
err = 0.0
for i, span in enumerate(model.spans):
    if span.stop > span.start:
        want = (i + 1) * (p + 1) / 2 * 1e-6
        err = max(err, float(np.max(np.abs(model.grads[span] - want))) / want)
plan = plan_buckets(w.flat_tensors(), 4, bucket_mb * 2**20)
report(ok=err < 1e-5 and reduced == len(plan) == len(engine.buckets), err=err,
       buckets=len(engine.buckets), planned=len(plan), reduced=reduced)
