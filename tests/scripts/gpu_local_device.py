"""Rank script: pick this rank's GPU by local rank (core.gpu.use_local_device), then run a
hierarchical allreduce on device buffers; report the device, the host and the check."""

import os

import cupy
import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.core.gpu import use_local_device

comm = MPI.COMM_WORLD
index = use_local_device(cupy, comm)
buf = cupy.full(1001, comm.Get_rank() + 1, dtype=cupy.float32)
with mpicomm.make_reducer("hierarchical", comm=comm) as reducer:
    reducer.allreduce(buf)
p = comm.Get_size()
right = bool(np.all(cupy.asnumpy(buf) == p * (p + 1) / 2))
report(ok=right, device=index, current=cupy.cuda.Device().id, host=MPI.Get_processor_name(),
       devices=cupy.cuda.runtime.getDeviceCount(),
       visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
