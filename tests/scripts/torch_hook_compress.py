"""Rank script: ``HookState(..., compress=...)`` reduces a bucket within the codec's bound,
and top-k keeps one residual per bucket index (two equal-length buckets stay apart)."""

import numpy as np
import torch
from mpi4py import MPI
from mpi_harness import report

from mpicomm.torch.hook import HookState, comm_hook

comm = MPI.COMM_WORLD
p, me = comm.Get_size(), comm.Get_rank()
problems = []


class Bucket:  # the three GradBucket methods the hook uses
    def __init__(self, t, i):
        self.t, self.i = t, i

    def buffer(self):
        return self.t

    def index(self):
        return self.i

    def is_last(self):
        return True


xs = [np.random.default_rng([3, r]).standard_normal(1001).astype(np.float32) for r in range(p)]
want = sum(xs) / p
with HookState("ring", compress="int8") as state:
    got = comm_hook(state, Bucket(torch.from_numpy(xs[me].copy()), 0)).wait().numpy()
    bound = (p + 2) * 0.5 * sum(np.abs(x).max() for x in xs) / p / 127
    if np.abs(got - want).max() > bound:
        problems.append(f"int8 hook error {np.abs(got - want).max()} > {bound}")
with HookState("ps", compress="topk:0.1") as state:
    for i in (0, 1):
        comm_hook(state, Bucket(torch.from_numpy(xs[me][:500].copy()), i))
    keys = sorted(state.reducer.codec_state())
    if keys != ["0", "1"]:
        problems.append(f"top-k residual keys {keys}, expected one per bucket")
report(ok=not problems, error="; ".join(problems) or None)
