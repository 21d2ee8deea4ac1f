"""PyTorch DDP on the 8×8 digits: DDP's own gloo allreduce vs mpicomm's comm hook.

    mpiexec -n 4 python experiments/torch_ddp.py --strategy ring   # or ps, hierarchical, gloo
    mpiexec -n 2 python experiments/torch_ddp.py --strategy gloo,ring,ps --repeats 5
    mpiexec -n 2 python experiments/torch_ddp.py --strategy gloo,ring --compress fp16

Needs ``pip install 'mpicomm[torch,data]'``. Top to bottom:

1. flags; ``mpicomm.torch.init_process_group()`` (torch ranks = MPI ranks, no torchrun);
2. data: scikit-learn's digits, each rank its ``Shard`` of every global batch (as ``train``);
3. per round, per strategy (strategies take turns, so load on a shared host hits all alike):
   the same seeded MLP wrapped in ``DistributedDataParallel``; ``gloo`` = DDP's own
   allreduce (no hook), any other name = ``HookState(name, compress=--compress)`` +
   ``comm_hook`` (``--compress fp16 | int8 | topk:RATIO`` on the wire; gloo never compresses);
   SGD with momentum; the first steps (DDP rebuilds its buckets after step 1) are untimed;
4. a no-communication round (``ddp.no_sync()``) times compute alone, so every strategy's
   exposed comm share is ``1 − compute step / step`` — also for gloo, whose allreduce runs
   asynchronously inside DDP where no hook can time it; the hook's own measured share
   (blocking, so all exposed) is shown beside it;
5. rank 0 prints one row per strategy (median round): samples/s (global batch × timed steps /
   slowest rank's wall time), spread over rounds, ratio to gloo, step ms, comm shares,
   final training loss, held-out accuracy; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

NO_TORCH = ("torch_ddp.py: error: torch is not installed: pip install torch --index-url "
            "https://download.pytorch.org/whl/cpu (the CPU wheel), or offline from a wheel "
            "folder: pip install --no-index --find-links DIR torch (docs/torch.md)")
try:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError:  # one line from rank 0 and exit 2 on every rank, not a traceback per rank
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(NO_TORCH, file=sys.stderr, flush=True)
    sys.exit(2)

import mpicomm  # noqa: E402 - after the torch check
import mpicomm.torch as mt  # noqa: E402
from mpicomm.train.data import DataError, Shard, digits  # noqa: E402

WARMUP = 5  # untimed steps per run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--strategy", default="gloo,ring,ps",
                   help="comma list: gloo (DDP's allreduce) or an mpicomm strategy "
                   "(ring, ps, hierarchical, native, auto, recursive_doubling)")
    p.add_argument("--hidden", default="256,256", help="hidden widths of the MLP 64 → ... → 10")
    p.add_argument("--batch-size", type=int, default=64, help="rows per rank per step")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps per run")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--seed", type=int, default=0, help="model init, data split and order")
    p.add_argument("--repeats", type=int, default=1, help="rounds over all strategies")
    p.add_argument("--servers", type=int, default=0, help="ps: servers (0 = one per rank)")
    p.add_argument("--ranks-per-node", type=int, default=None,
                   help="hierarchical: simulated node size (default: 2 on one host)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (MiB)")
    p.add_argument("--compress", default="none",
                   help="the hook's codec on the wire: none | fp16 | int8 | topk:RATIO[:noef] "
                   "(docs/compression.md); gloo, DDP's own allreduce, never compresses")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--json", default=None, help="write the results here")
    return p.parse_args(argv)


def build_model(hidden: list[int], seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    widths, layers = [64, *hidden, 10], []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def hook_options(name: str, args: argparse.Namespace, comm: MPI.Comm) -> dict:
    opts = {"compress": args.compress}
    if name == "ps":
        opts["servers"] = args.servers or comm.Get_size()
    if name == "hierarchical":
        one_host = len(set(comm.allgather(MPI.Get_processor_name()))) == 1
        opts["ranks_per_node"] = args.ranks_per_node or (2 if one_host else None)
    return opts


def run(name: str, args: argparse.Namespace, ds, comm: MPI.Comm) -> dict:
    """Train one run with strategy ``name`` ("gloo", "local" = no comm, or mpicomm's); return its
    per-rank timings and scores."""
    model = build_model([int(w) for w in args.hidden.split(",")], args.seed)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    state = None
    if name not in ("gloo", "local"):
        state = mt.HookState(name, **hook_options(name, args, comm))
        ddp.register_comm_hook(state, mt.comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    shard = Shard(ds.x_train, ds.y_train, batch=args.batch_size, worker_rank=comm.Get_rank(),
                  num_workers=comm.Get_size(), seed=args.seed)
    xb, yb = torch.from_numpy(shard.xb), torch.from_numpy(shard.yb)  # views of reused buffers
    loss_fn = torch.nn.functional.cross_entropy
    step_s, losses = np.zeros(args.steps), np.zeros(args.steps)
    comm.Barrier()
    for i in range(args.steps):
        if i == WARMUP and state is not None:
            state.reset_stats()
        t0 = time.perf_counter()
        shard.next()  # fills xb, yb in place
        opt.zero_grad(set_to_none=False)
        if name == "local":
            with ddp.no_sync():
                loss = loss_fn(ddp(xb), yb)
                loss.backward()
        else:
            loss = loss_fn(ddp(xb), yb)
            loss.backward()
        opt.step()
        step_s[i] = time.perf_counter() - t0
        losses[i] = loss.item()
    hook_s = state.comm_seconds() if state is not None else float("nan")
    if state is not None:
        state.close()
    with torch.no_grad():
        pred = model(torch.from_numpy(ds.x_test)).argmax(dim=1).numpy()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().numpy()
    spread = np.empty_like(flat)
    comm.Allreduce(flat, spread, op=MPI.MAX)
    spread -= flat
    timed = step_s[WARMUP:]
    wall = np.array([timed.sum()])
    comm.Allreduce(MPI.IN_PLACE, wall, op=MPI.MAX)
    mean_step = np.array([np.median(timed)])
    comm.Allreduce(MPI.IN_PLACE, mean_step, op=MPI.SUM)
    shares = np.array([hook_s / timed.sum()])
    comm.Allreduce(MPI.IN_PLACE, shares, op=MPI.SUM)
    p = comm.Get_size()
    return {
        "strategy": name, "ranks": p, "global_batch": args.batch_size * p,
        "compress": "none" if state is None else args.compress,
        "samples_per_sec": args.batch_size * p * len(timed) / wall[0],
        "step_ms": 1e3 * mean_step[0] / p,  # median step, mean over ranks
        "hook_share": shares[0] / p,
        "final_loss": float(losses[-10:].mean()),
        "test_accuracy": float((pred == ds.y_test).mean()),
        "params_in_sync": bool(comm.allreduce(float(np.abs(spread).max()), op=MPI.MAX) == 0.0),
    }


def median_round(recs: list[dict], local_ms: float) -> dict:
    sps = [r["samples_per_sec"] for r in recs]
    rec = dict(sorted(recs, key=lambda r: r["samples_per_sec"])[(len(recs) - 1) // 2])
    rec["samples_per_sec_runs"] = sps
    rec["spread"] = (max(sps) - min(sps)) / rec["samples_per_sec"]
    rec["compute_step_ms"] = local_ms
    rec["comm_share"] = max(0.0, 1.0 - local_ms / rec["step_ms"])
    return rec


def table(records: list[dict]) -> str:
    gloo = next((r["samples_per_sec"] for r in records if r["strategy"] == "gloo"), None)
    head = ["strategy", "ranks", "samples/s", "±", "× gloo", "step ms", "comm", "hook",
            "loss", "test"]
    rows = [head]
    for r in records:
        hook = r["hook_share"]
        name = r["strategy"] + (f"+{r['compress']}" if r.get("compress", "none") != "none"
                                else "")
        rows.append([name, str(r["ranks"]), f"{r['samples_per_sec']:,.0f}",
                     f"{100 * r['spread']:.0f}%",
                     f"{r['samples_per_sec'] / gloo:.2f}" if gloo else "-",
                     f"{r['step_ms']:.3f}", f"{100 * r['comm_share']:.0f}%",
                     "-" if hook != hook else f"{100 * hook:.0f}%",
                     f"{r['final_loss']:.4f}", f"{100 * r['test_accuracy']:.1f}%"])
    widths = [max(len(row[j]) for row in rows) for j in range(len(head))]
    lines = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                       for j, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    names = [s.strip() for s in args.strategy.split(",") if s.strip()]
    valid = ["gloo", *mpicomm.strategies()]
    bad = [n for n in names if n not in valid]
    try:
        if bad or not names:
            raise ValueError(f"--strategy: unknown {bad or '(empty)'}; valid: {', '.join(valid)}")
        if args.steps <= WARMUP or args.repeats < 1:
            raise ValueError(f"--steps must be > {WARMUP} and --repeats >= 1")
        mpicomm.ReducerOptions.from_kwargs("torch_ddp", compress=args.compress)  # a bad codec
        if args.compress != "none" and set(names) == {"gloo"}:
            raise ValueError("--compress applies to the mpicomm hook, and gloo (DDP's own "
                             "allreduce) never compresses: add a strategy such as ring, or "
                             "drop --compress")
        ds = digits(64, 10, holdout=0.1, seed=args.seed)
        Shard(ds.x_train, ds.y_train, batch=args.batch_size, worker_rank=0,
              num_workers=comm.Get_size(), seed=args.seed)  # batch fits the data?
    except (ValueError, DataError) as exc:  # identical on every rank
        if rank0:
            print(f"torch_ddp: error: {exc}", flush=True)
        return 2
    torch.set_num_threads(args.threads)
    mt.init_process_group()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    local_ms = []
    for _ in range(args.repeats):
        local_ms.append(run("local", args, ds, comm)["step_ms"])
        for name in names:
            runs[name].append(run(name, args, ds, comm))
    records = [median_round(runs[n], float(np.median(local_ms))) for n in names]
    if rank0:
        print(f"DDP, MLP 64-{args.hidden.replace(',', '-')}-10 on digits "
              f"({len(ds.y_train)} train / {len(ds.y_test)} test), {comm.Get_size()} ranks, "
              f"batch {args.batch_size}/rank, {args.steps} steps, {args.repeats} round(s); "
              f"compute-only step {np.median(local_ms):.3f} ms")
        print(table(records))
        print("comm: exposed share of the step, 1 - (no-comm step)/step; hook: time inside "
              "the mpicomm hook / step (blocking, all exposed)")
        if not all(r["params_in_sync"] for r in records):
            print("WARNING: ranks ended with different parameters")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"command": " ".join(sys.argv), "torch": torch.__version__,
                           "results": records}, f, indent=1)
            print(f"wrote {args.json}")
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
