"""Rank script: mpicomm.torch.allreduce on good tensors (vs a NumPy reference, in place, no
copy) and bad ones (a clear error on every rank, before any message); HookState's refusals;
init_process_group without MASTER_ADDR/MASTER_PORT."""

import os

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
import mpicomm.torch as mt

torch.set_num_threads(1)
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
problems = []

# init_process_group: torch ranks are MPI ranks, with no rendezvous variables set
for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
    os.environ.pop(var, None)
mt.init_process_group()
mt.init_process_group()  # a second call is a no-op
if (dist.get_rank(), dist.get_world_size()) != (rank, size):
    problems.append(f"torch rank {dist.get_rank()}/{dist.get_world_size()} != MPI {rank}/{size}")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
if t.item() != size * (size + 1) / 2:
    problems.append(f"gloo all_reduce over the new group gave {t.item()}")


def check(r, strategy):
    """Good tensors match NumPy in place; bad ones raise a clear error and send nothing."""
    for dtype, shape in [(torch.float64, (1001,)), (torch.float32, (7, 13)), (torch.float64, ())]:
        gen = torch.Generator().manual_seed(rank)
        x = torch.randn(shape, generator=gen, dtype=dtype)
        parts = [torch.randn(shape, generator=torch.Generator().manual_seed(q), dtype=dtype)
                 .numpy() for q in range(size)]
        expect = np.mean(parts, axis=0)
        ptr = x.data_ptr()
        out = mt.allreduce(x, r)  # op="mean"
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        if out is not x or x.data_ptr() != ptr:
            problems.append(f"{strategy}: not in place")
        if not np.allclose(x.numpy(), expect, rtol=tol, atol=tol):
            problems.append(f"{strategy} {dtype} {shape}: mean differs from NumPy")
        mt.allreduce(x, r, op="sum")
        if not np.allclose(x.numpy(), expect * size, rtol=tol, atol=tol):
            problems.append(f"{strategy} {dtype} {shape}: sum differs from NumPy")
    # a leaf parameter's .grad and .detach() view are fine
    p = torch.nn.Parameter(torch.full((5,), float(rank)))
    with torch.no_grad():
        mt.allreduce(p.detach(), r)
    if not torch.allclose(p.detach(), torch.full((5,), (size - 1) / 2)):
        problems.append(f"{strategy}: detach() view not reduced in place")
    base = torch.zeros(4, 6, dtype=torch.float64)
    bad = [
        (TypeError, "unsupported dtype torch.int64", torch.zeros(8, dtype=torch.int64)),
        (TypeError, "unsupported dtype torch.float16", torch.zeros(8, dtype=torch.float16)),
        (ValueError, "not contiguous", base[:, ::2]),
        (ValueError, "not contiguous", base.t()),
        (ValueError, "requires grad", torch.zeros(3, requires_grad=True)),
        (ValueError, "device meta", torch.zeros(3, device="meta")),
        (TypeError, "expected a torch.Tensor, got ndarray", np.zeros(3)),
        (TypeError, "sparse", torch.zeros(3, 3).to_sparse()),
    ]
    for exc, fragment, tensor in bad:
        expect_raises(problems, exc, fragment, lambda t=tensor, r=r: mt.allreduce(t, r))
    # the next good call still works: the refusals sent nothing
    y = torch.ones(3, dtype=torch.float64)
    mt.allreduce(y, r, op="sum")
    if not torch.all(y == size):
        problems.append(f"{strategy}: reducer unusable after the refused calls")


for strategy, options in [("ring", {}), ("ps", {"servers": 2}), ("native", {})]:
    r = mpicomm.make_reducer(strategy, **options)
    check(r, strategy)
    r.close()

expect_raises(problems, mpicomm.ConfigError, "dedicated parameter servers",
              lambda: mt.HookState("ps", dedicated=True))
expect_raises(problems, mpicomm.ConfigError, "unknown strategy", lambda: mt.HookState("rign"))
expect_raises(problems, mpicomm.ConfigError, "op must be", lambda: mt.HookState("ring", op="max"))
state = mt.HookState("ring")
state.close()
state.close()  # twice is harmless
report(ok=not problems, problems=problems)
