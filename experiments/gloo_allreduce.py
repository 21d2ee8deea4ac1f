"""PyTorch gloo all_reduce on CPU, timed the way ``mpicomm bench`` times (for comparison).

Not part of the package (torch is not a dependency); run it from a venv with torch:

    python experiments/gloo_allreduce.py --ranks 2 -b 4K -e 64M -f 4 -n 20 --json gloo.json

Two processes on this host (torch.multiprocessing, TCP rendezvous on 127.0.0.1).
Per size: warm-up calls, then timed calls one by one; per call the slowest
rank's time (a MAX all_reduce of the time array afterwards); median, min, max;
algbw = bytes/time, busbw = algbw·2(p-1)/p — the same definitions as bench.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from mpicomm.core.units import parse_bytes  # the one size parser (docs/bench.md, "Units")


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.ranks)
    p = args.ranks
    sizes, s = [], args.minbytes
    while s <= args.maxbytes:
        sizes.append(s)
        s *= args.stepfactor
    buf = torch.zeros(max(sizes) // 4, dtype=torch.float32)
    rows = []
    for nbytes in sizes:
        x = buf[: nbytes // 4]
        for _ in range(args.warmup):
            dist.all_reduce(x)
        times = torch.empty(args.iters, dtype=torch.float64)
        dist.barrier()
        for i in range(args.iters):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            times[i] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        # check: every rank contributes rank+1, so each element must be p(p+1)/2
        x.fill_(rank + 1)
        dist.all_reduce(x)
        wrong = torch.tensor([int((x != p * (p + 1) / 2).sum())])
        dist.all_reduce(wrong)
        med = float(times.median())
        algbw = nbytes / med / 1e9
        rows.append({"strategy": "gloo", "ranks": p, "bytes": nbytes, "time_us": med * 1e6,
                     "min_us": float(times.min()) * 1e6, "max_us": float(times.max()) * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (p - 1) / p,
                     "wrong": int(wrong[0])})
        if rank == 0:
            r = rows[-1]
            print(f"{nbytes:>11} {r['time_us']:>10.2f} {r['min_us']:>10.2f} {r['max_us']:>10.2f} "
                  f"{r['algbw_gbps']:>7.2f} {r['busbw_gbps']:>7.2f} {r['wrong']:>6}", flush=True)
    if rank == 0 and args.json:
        import torch as _t

        with open(args.json, "w") as f:
            json.dump({"torch": _t.__version__, "backend": "gloo", "results": rows}, f, indent=1)
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("-b", "--minbytes", type=parse_bytes, default=parse_bytes("4K"))
    ap.add_argument("-e", "--maxbytes", type=parse_bytes, default=parse_bytes("64M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--port", type=int, default=int(os.environ.get("GLOO_PORT", "29517")))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch.multiprocessing as mp

    print(f"# torch gloo all_reduce, {args.ranks} processes, float32 sum, iters {args.iters}")
    print(f"#{'size (B)':>10} {'time (us)':>10} {'min':>10} {'max':>10} {'algbw':>7} "
          f"{'busbw':>7} {'#wrong':>6}")
    mp.spawn(worker, args=(args, args.port), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
