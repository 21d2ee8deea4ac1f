"""Rank script: N steps of DDP (float64) with DDP's own gloo allreduce, then with
mpicomm's hook for each strategy; every rank reports how far its params are from gloo's.

Usage (under ``python -m mpi4py``): ``torch_ddp_agree.py STEPS RUNS_JSON`` where RUNS_JSON is
a list of ``[label, strategy, options]`` (options go to ``HookState``, ``op`` included). The
test judges the reported distances; ``ok`` means the rank ran every run.
"""

import json
import os
import sys

import torch
from mpi4py import MPI
from mpi_harness import report
from torch.nn.parallel import DistributedDataParallel as DDP

import mpicomm.torch as mt

steps, runs = int(sys.argv[1]), json.loads(sys.argv[2])
torch.set_num_threads(1)
os.environ.pop("MASTER_ADDR", None)
os.environ.pop("MASTER_PORT", None)
mt.init_process_group()
rank = MPI.COMM_WORLD.Get_rank()


def train(hook_state):
    """Return the flat params after ``steps`` SGD+momentum steps, and the number of buckets."""
    torch.manual_seed(0)  # same init on every rank and every run
    model = torch.nn.Sequential(torch.nn.Linear(13, 37), torch.nn.Tanh(), torch.nn.Linear(37, 29),
                                torch.nn.ReLU(), torch.nn.Linear(29, 5)).double()
    # tiny buckets: several per step, so bucket boundaries and indices are exercised
    ddp = DDP(model, bucket_cap_mb=0.004)
    if hook_state is not None:
        ddp.register_comm_hook(hook_state, mt.comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for _ in range(steps):
        x = torch.randn(16, 13, generator=gen, dtype=torch.float64)
        y = torch.randint(0, 5, (16,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


torch.manual_seed(0)
start = torch.cat([p.detach().reshape(-1) for p in torch.nn.Sequential(
    torch.nn.Linear(13, 37), torch.nn.Tanh(), torch.nn.Linear(37, 29), torch.nn.ReLU(),
    torch.nn.Linear(29, 5)).double().parameters()])
ref = train(None)
moved = float((ref - start).abs().max())
for label, strategy, options in runs:
    with mt.HookState(strategy, **options) as state:
        got = train(state)
        diff = float((got - ref).abs().max())
        report(label=label, diff=diff, moved=moved, iterations=state.iteration,
               buckets=len(state.bucket_calls), calls=sum(state.bucket_calls.values()),
               nbytes=sum(state.bucket_nbytes.values()))
report(ok=True)
