"""The PyTorch adapter on CUDA tensors (a step of experiments/gpu_check.sh).

    mpiexec -n 2 python experiments/gpu_torch_check.py

1. ``mpicomm.torch.allreduce`` on a CUDA tensor of every rank (drawn from (seed, rank)),
   with ring, ps and native, float32 and float64, against the mean of every rank's input
   computed on the CPU in float64;
2. DDP on CUDA (gloo process group from ``mpicomm.torch.init_process_group``), 4 steps,
   with ``HookState("ring")`` + ``comm_hook`` against DDP's own allreduce: the parameters
   agree to 1e-9 (float64).

Each rank prints one JSON line ``{"rank", "ok", "errors"}``; the exit status is 1 if any
check failed on this rank.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from mpi4py import MPI
from torch.nn.parallel import DistributedDataParallel as DDP

import mpicomm
import mpicomm.torch as mt


def check_allreduce(comm: MPI.Comm, device: torch.device, errors: list[str]) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    for strategy in ("ring", "ps", "native"):
        with mpicomm.make_reducer(strategy, comm=comm) as reducer:
            for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
                for n in (1, 1000, 1_000_003):
                    inputs = [np.random.default_rng([7, r, n]).standard_normal(n)
                              for r in range(size)]
                    want = np.mean(inputs, axis=0)
                    t = torch.tensor(inputs[rank], dtype=dtype, device=device)
                    out = mt.allreduce(t, reducer, op="mean")
                    err = float(np.abs(out.cpu().double().numpy() - want).max())
                    if out is not t or out.device != device or err > tol * (1 + np.abs(want).max()):
                        errors.append(f"allreduce {strategy} {dtype} n={n}: max error {err:.3g}")


def ddp_params(device: torch.device, hook: mt.HookState | None, rank: int) -> torch.Tensor:
    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(13, 37), torch.nn.Tanh(),
                                torch.nn.Linear(37, 5)).double().to(device)
    ddp = DDP(model, device_ids=[device.index], bucket_cap_mb=0.004)
    if hook is not None:
        ddp.register_comm_hook(hook, mt.comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(4):
        x = torch.randn(16, 13, generator=gen, dtype=torch.float64).to(device)
        y = torch.randint(0, 5, (16,), generator=gen).to(device)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


def main() -> int:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    import cupy

    cupy.cuda.Device(device.index).use()  # CuPy works on the tensor's device
    errors: list[str] = []
    try:
        check_allreduce(comm, device, errors)
        os.environ.pop("MASTER_ADDR", None)
        os.environ.pop("MASTER_PORT", None)
        mt.init_process_group()
        ref = ddp_params(device, None, rank)
        with mt.HookState("ring") as state:
            got = ddp_params(device, state, rank)
        diff = float((got - ref).abs().max())
        if diff > 1e-9:
            errors.append(f"DDP hook on CUDA: params differ from DDP's allreduce by {diff:.3g}")
    except Exception as exc:  # noqa: BLE001 - reported, then the exit status says it
        errors.append(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"rank": rank, "ok": not errors, "errors": errors[:10]}), flush=True)
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
