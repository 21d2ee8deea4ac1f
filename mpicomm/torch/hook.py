"""A DistributedDataParallel communication hook that reduces every bucket with mpicomm.

    state = HookState("ring")                    # or "ps", servers=2; compress="int8"; ...
    ddp.register_comm_hook(state, comm_hook)

For each bucket, when DDP has all its gradients (during backward, last layers first):

1. take the bucket's flat gradient tensor ``bucket.buffer()``;
2. reduce it in place with the state's reducer, ``op="mean"``: the chosen strategy
   sums it over the ranks and scales by 1/p (DDP's own hook divides first, then
   sums; the two differ only in rounding);
3. record the bucket's bytes and seconds in the state (per bucket index);
4. return a completed ``torch.futures.Future`` holding the buffer: DDP copies it
   into the parameters' ``.grad``.

The reduction is blocking: unlike DDP's asynchronous gloo/NCCL allreduce, it
does not overlap the rest of backward. Cost: that of the strategy on each
bucket (``docs/torch.md``), n = the bucket's bytes.
"""

# no ``from __future__ import annotations`` here: DDP's register_comm_hook compares the
# hook's evaluated annotations with dist.GradBucket and torch.futures.Future[torch.Tensor]
import time
from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from mpicomm.core.errors import ConfigError
from mpicomm.reducers import make_reducer  # the one factory (mpicomm.make_reducer)
from mpicomm.torch.tensor import allreduce

__all__ = ["HookState", "comm_hook"]


class HookState:
    """The state of ``comm_hook``: the mpicomm reducer, and per-bucket bytes and seconds.

    Args:
        strategy: an mpicomm strategy ("ring", "hierarchical", "ps", "native", "auto", ...).
        comm: MPI communicator (default ``MPI.COMM_WORLD``); its ranks must be the
            torch.distributed ranks (``init_process_group`` makes them so).
        op: ``"mean"`` (what DDP expects) or ``"sum"``.
        **options: ``ReducerOptions`` (``servers``, ``ranks_per_node``, ``variant``,
            ``compress="fp16" | "int8" | "topk:RATIO"``, ...), through the one public
            factory ``mpicomm.make_reducer``.
            ``dedicated=True`` is refused: DDP trains on every rank, so parameter
            servers must be colocated with the workers. ``validate`` defaults to False
            here (the ranks' bucket sizes are checked on the reducer's first call only):
            DDP checks the model's shapes across ranks when it is built and gives every
            rank the same bucket layout, so a per-bucket Allgather would only add latency.

    A context manager: ``with HookState("ps", servers=2) as state:`` closes the reducer.
    """

    __slots__ = (
        # the reduction
        "strategy", "reducer", "op",
        # progress: optimizer steps seen (a step ends with the bucket marked last)
        "iteration",
        # per-bucket record, keyed by bucket.index() (DDP rebuilds buckets after step 1)
        "bucket_calls", "bucket_nbytes", "bucket_seconds",
    )

    def __init__(self, strategy: str = "ring", *, comm: MPI.Comm | None = None, op: str = "mean",
                 **options: Any) -> None:
        if options.get("dedicated"):
            raise ConfigError(
                "HookState: dedicated parameter servers do not train, but DDP runs on every "
                "rank; use colocated servers (HookState('ps', servers=S))"
            )
        if op not in ("mean", "sum"):
            raise ConfigError(f"HookState: op must be 'mean' or 'sum', got {op!r}")
        self.strategy, self.op = strategy, op
        options.setdefault("validate", False)  # see Args
        self.reducer = make_reducer(strategy, comm=comm, **options)
        if dist.is_initialized() and (dist.get_rank(), dist.get_world_size()) != (
            self.reducer.rank, self.reducer.size
        ):
            size, rank = self.reducer.size, self.reducer.rank
            self.reducer.close()
            raise ConfigError(
                f"HookState: torch.distributed has rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, the MPI communicator rank {rank} of {size}; "
                "set torch.distributed up with mpicomm.torch.init_process_group(comm=...)"
            )
        self.iteration = 0
        self.bucket_calls: dict[int, int] = {}
        self.bucket_nbytes: dict[int, int] = {}
        self.bucket_seconds: dict[int, float] = {}

    def comm_seconds(self) -> float:
        """Return the seconds spent reducing buckets since the last ``reset_stats``."""
        return sum(self.bucket_seconds.values())

    def reset_stats(self) -> None:
        """Forget the per-bucket record (after a warm-up, say); keep the reducer."""
        self.bucket_calls.clear()
        self.bucket_nbytes.clear()
        self.bucket_seconds.clear()

    def close(self) -> None:
        """Free the reducer's communicator (twice is harmless)."""
        if self.reducer is not None:
            self.reducer.close()
            self.reducer = None

    def __enter__(self) -> "HookState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def comm_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average ``bucket``'s gradients over the ranks with ``state``'s reducer (module doc steps)."""
    if state.reducer is None:
        raise RuntimeError("mpicomm.torch.comm_hook: the HookState is closed")
    t0 = time.perf_counter()
    buf = bucket.buffer()  # 1.
    i = bucket.index()
    allreduce(buf, state.reducer, op=state.op, key=i)  # 2. (top-k keeps a residual per bucket)
    # 3.
    state.bucket_calls[i] = state.bucket_calls.get(i, 0) + 1
    state.bucket_nbytes[i] = buf.numel() * buf.element_size()
    state.bucket_seconds[i] = state.bucket_seconds.get(i, 0.0) + time.perf_counter() - t0
    if bucket.is_last():
        state.iteration += 1
    fut = torch.futures.Future()  # 4.
    fut.set_result(buf)
    return fut
