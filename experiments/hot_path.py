"""Per-call overhead of the framework at 1 KiB on 2 ranks, the contenders taking turns.

Prints the per-call median (slowest rank) of:

- raw ``comm.Allreduce(IN_PLACE, buf)`` against mpicomm ``native`` (default options);
- a minimal 20-line Python ring (``Sendrecv`` on chunk views) against mpicomm ``ring``;
- the gradient engine's cost per extra bucket (a step of 8 buckets of 1 KiB against
  a step of 1, divided by 7) against one ``native`` call as the engine makes it
  (``op="mean"``: the sum and its 1/p multiply; the sum alone is printed too);

and the three ratios (targets: native ≤ 1.3×, ring ≤ 1.2×, extra bucket ≤ 1.2×).
``--parts`` adds what the per-call guarantees of ``native`` cost: the same call
with the stall inspector off (``stall_channel = None``) and its plan alone (the
``Allreduce`` and the byte count, without the checks, the guard, the inspector
and the timing), and a *bare wrapper*: 15 lines with the same guarantees (the layout
test, a concurrent-call guard, two clock reads, the stall log's two appends, the call
and second counts) around the same plan, written for this benchmark only — the floor
any Python-level wrapper with those guarantees pays here; and *guard and layout only*:
the layout test and the concurrent-call guard alone (the least the issue's safety and
once-per-layout check need), no timing and no stall log.
Every contender runs ``--calls`` calls per round, rounds taking turns, so a slow spell
of the machine hits all of them. Run::

    mpiexec -n 2 python experiments/hot_path.py [--bytes 1024] [--rounds 30] [--calls 200] [--parts]
    mpiexec -n 2 python -m cProfile -s tottime experiments/hot_path.py --rounds 3  # profile
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI

import mpicomm
from mpicomm.core import clock
from mpicomm.engine.grad_engine import GradEngine


def minimal_ring(comm: MPI.Comm, x: np.ndarray, tmp: np.ndarray, bounds: list[int]) -> None:
    """The textbook ring: reduce-scatter then allgather, Sendrecv on chunk views."""
    p, me = comm.Get_size(), comm.Get_rank()
    right, left = (me + 1) % p, (me - 1) % p
    for k in range(p - 1):
        s, r = (me - 1 - k) % p, (me - 2 - k) % p
        got = tmp[: bounds[r + 1] - bounds[r]]
        comm.Sendrecv(x[bounds[s] : bounds[s + 1]], right, 0, got, left, 0)
        mine = x[bounds[r] : bounds[r + 1]]
        np.add(mine, got, out=mine)
    for k in range(p - 1):
        s, r = (me - k) % p, (me - 1 - k) % p
        comm.Sendrecv(x[bounds[s] : bounds[s + 1]], right, 1, x[bounds[r] : bounds[r + 1]],
                      left, 1)


def bare_wrapper(plan, x: np.ndarray):
    """The same guarantees as ``Reducer.allreduce``'s hot path and nothing else (``--parts``)."""
    layouts, stats = {x.size: (x.dtype, "sum")}, SimpleNamespace(calls=0, seconds=0.0)
    guard, entered, waited, now = [True], [], [], clock.now

    def allreduce(buf: np.ndarray, op: str = "sum") -> np.ndarray:
        hot = layouts.get(buf.size) if type(buf) is np.ndarray else None
        if hot is None or hot[0] is not buf.dtype or hot[1] is not op or buf.ndim != 1:
            raise ValueError("not the planned layout")
        t0 = now()
        guard.pop()  # a second concurrent call raises IndexError
        entered.append(t0)
        try:
            plan(buf)
        finally:
            seconds = now() - t0
            waited.append(seconds)
            if len(waited) > 100_000:
                del waited[:], entered[:]
            guard.append(True)
        stats.calls += 1
        stats.seconds += seconds
        return buf

    return allreduce


def guard_and_layout(plan, x: np.ndarray):
    """The least any wrapper the issue asks for must do (``--parts``): the layout test and
    the concurrent-call guard around the plan, a call count, and nothing else (no timing,
    no stall log)."""
    layouts, guard, counts = {x.size: (x.dtype, "sum")}, [True], SimpleNamespace(calls=0)

    def allreduce(buf: np.ndarray, op: str = "sum") -> np.ndarray:
        hot = layouts.get(buf.size) if type(buf) is np.ndarray else None
        if hot is None or hot[0] is not buf.dtype or hot[1] is not op or buf.ndim != 1:
            raise ValueError("not the planned layout")
        guard.pop()
        try:
            plan(buf)
        finally:
            guard.append(True)
        counts.calls += 1
        return buf

    return allreduce


def engine_step(n_buckets: int, n: int) -> tuple[GradEngine, object]:
    """An engine over ``n_buckets`` tensors of ``n`` float32 each, one bucket per tensor."""
    grads = np.ones(n_buckets * n, dtype=np.float32)
    tensors = [(i, i * n, (i + 1) * n) for i in range(n_buckets)]
    spans = [slice(i * n, (i + 1) * n) for i in range(n_buckets)]
    reducer = mpicomm.make_reducer("native")
    eng = GradEngine(reducer, grads, tensors, spans, bucket_bytes=n * 4, overlap=False)
    layers = list(range(n_buckets - 1, -1, -1))

    def step() -> None:
        eng.backward(iter(layers))
        for _ in eng.reduced():
            pass

    return eng, SimpleNamespace(step=step, reducer=reducer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--parts", action="store_true", help="also native without its guarantees")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD.Dup()
    n = args.bytes // 4
    x = np.zeros(n, dtype=np.float32)  # stays 0: repeated sums never overflow
    tmp = np.empty(n, dtype=np.float32)
    p = comm.Get_size()
    bounds = [n * i // p for i in range(p + 1)]
    native, ring = mpicomm.make_reducer("native"), mpicomm.make_reducer("ring")
    eng1, one = engine_step(1, n)
    eng8, eight = engine_step(8, n)
    runs = {
        "raw Allreduce": lambda: comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM),
        "mpicomm native": lambda: native.allreduce(x),
        "mpicomm native mean": lambda: native.allreduce(x, op="mean"),
        "minimal ring": lambda: minimal_ring(comm, x, tmp, bounds),
        "mpicomm ring": lambda: ring.allreduce(x),
        "engine 1 bucket": one.step,
        "engine 8 buckets": eight.step,
    }
    if args.parts:
        bare = mpicomm.make_reducer("native")
        bare.allreduce(x)  # agreed: the plan exists from here on
        bare.stall_channel = None
        plan = native._fast_plan(x, None)
        runs["native, no inspector"] = lambda: bare.allreduce(x)
        runs["native plan alone"] = lambda: plan(x)
        runs["bare wrapper"] = (lambda f: lambda: f(x))(bare_wrapper(plan, x))
        runs["guard and layout only"] = (lambda f: lambda: f(x))(guard_and_layout(plan, x))
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            comm.Barrier()
            t0 = clock.now()
            for _ in range(args.calls):
                fn()
            per_call = (clock.now() - t0) / args.calls
            samples[name].append(comm.allreduce(per_call, op=MPI.MAX))
    med = {k: float(np.median(v)) * 1e6 for k, v in samples.items()}
    extra = (med["engine 8 buckets"] - med["engine 1 bucket"]) / 7
    if comm.Get_rank() == 0:
        print(f"{args.bytes} B, {p} ranks, median of {args.rounds} rounds x {args.calls} calls "
              "(slowest rank), µs per call:")
        for k, v in med.items():
            print(f"  {k:21s} {v:8.2f}")
        print(f"  {'extra bucket':21s} {extra:8.2f}")
        print(f"native / raw          {med['mpicomm native'] / med['raw Allreduce']:.2f}  "
              "(target <= 1.3)")
        if args.parts:
            print(f"bare wrapper / raw    {med['bare wrapper'] / med['raw Allreduce']:.2f}  "
                  "(the floor of the same guarantees in Python)")
            least = med["guard and layout only"] / med["raw Allreduce"]
            print(f"guard and layout / raw {least:.2f}  "
                  "(the floor of any checking wrapper: no timing, no stall log)")
        print(f"ring / minimal ring   {med['mpicomm ring'] / med['minimal ring']:.2f}  "
              "(target <= 1.2)")
        print(f"extra bucket / native mean {extra / med['mpicomm native mean']:.2f}  "
              "(target <= 1.2: the engine's own call, op='mean')")
        print(f"extra bucket / native sum  {extra / med['mpicomm native']:.2f}  "
              "(for reference: the sum has no scaling multiply)")
    for r in (native, ring, one.reducer, eight.reducer):
        r.close()
    eng1.close()
    eng8.close()
    comm.Free()


if __name__ == "__main__":
    main()
