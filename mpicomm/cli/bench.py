"""``python -m mpicomm bench``: nccl-tests-style sweep of every strategy over message sizes.

    mpiexec -n 2 python -m mpicomm bench -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float

The harness (``mpicomm.bench.harness``) sweeps, times, checks and formats; this
module is the command: flags, header, rows, summary, crossovers, files.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from mpi4py import MPI

from mpicomm.analysis.crossover import crossover_lines
from mpicomm.bench import harness as H
from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.core.units import fmt_bytes, jsonable
from mpicomm.reducers import check_request

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "nccl-tests-style sweep: time, algbw, busbw, #wrong per size"
USES_MPI = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The nccl-tests flags and the reducer options (``harness.add_arguments``)."""
    H.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Sweep the chosen strategies on every rank; rank 0 prints the rows and writes --json/--csv."""
    from mpicomm.core.environment import environment
    from mpicomm.core.options import ReducerOptions

    world = MPI.COMM_WORLD
    names = H.chosen_strategies(args)
    if names is None:
        return 2
    options = H.reducer_options(args)
    # parsed once (bad values: one line, before the header); the typed record goes down
    opts = ReducerOptions.from_kwargs("bench", **options)
    options["compress"] = opts.compress
    try:  # a codec a strategy cannot run: one line, before the header (same on every rank)
        for name in names:
            check_request(name, **options)
    except ConfigError as exc:
        if world.Get_rank() == 0:
            sys.stderr.write(f"mpicomm bench: error: {exc}\n")
        return 2
    cfg = H.BenchConfig(sizes=tuple(H.size_list(args.minbytes, args.maxbytes, args.stepfactor)),
                        iters=args.iters, rounds=args.rounds, warmup=args.warmup_iters,
                        check=args.check if opts.compress == "none" else 0,
                        dtype=args.datatype, op=args.op, seed=args.seed, device=args.device)
    if H.device_error(cfg.device, "bench") or H.memory_error(max(cfg.sizes), cfg.check > 0,
                                                             cfg.device, world):
        return 2
    level = H.thread_level_record(args)
    root = world.Get_rank() == 0
    sharing = H.cpu_sharing(world)
    if root:
        print(f"# mpicomm bench: {world.Get_size()} ranks, {cfg.dtype} {cfg.op} on {cfg.device}, "
              f"sizes {fmt_bytes(cfg.sizes[0])} .. {fmt_bytes(cfg.sizes[-1])} "
              f"x{args.stepfactor:g}, iters {cfg.iters} x {cfg.rounds} rounds, warmup "
              f"{cfg.warmup}, check {cfg.check}, thread level {level['provided']}")
        print(f"# strategies: {', '.join(names)}; options: {json.dumps(jsonable(options))}")
        note = H.emulation_note(options)
        if note:
            print(note)
        print(H.LEGEND.replace("vs baseline:", f"vs baseline ({args.baseline}"
                             f"{'' if args.baseline in names else ', not in this run: -'}):"))
        if sharing:
            print(f"# {sharing}")
        if world.Get_size() == 1:
            print(f"# {H.ONE_RANK_NOTE}")
        print(H.HEADER, flush=True)
    described: dict = {}
    rows = H.run_bench(names, options, cfg, args.baseline,
                       printer=lambda row: print(H.format_row(row), flush=True),
                       described=described, judge=sharing is None)
    if root:
        for name in names:
            mine = [r for r in rows if r["strategy"] == name]
            if mine:
                avg = sum(r["busbw_gbps"] for r in mine) / len(mine)
                bad = sum(r["wrong"] for r in mine)
                print(f"# {name:>18}: avg bus bandwidth {avg:8.3f} GB/s, "
                      f"out of bounds values {bad} {'OK' if bad == 0 else 'FAILED'}")
    params = None
    if len(names) > 1 and world.Get_size() > 1 and len(cfg.sizes) > 1:
        from mpicomm.costmodel.calibrate import quick_params

        params = quick_params(world)  # collective, ~20 ms: the model's crossovers
    if root:
        lines, crossings = [], []
        if world.Get_size() > 1:  # 1 rank: no messages, so no winners and no crossovers
            lines, crossings = crossover_lines(rows, names, world.Get_size(), params, options,
                                               cfg.seed)
        else:
            lines = [f"# {H.ONE_RANK_NOTE}"]
        if sharing:  # no crossover claims either: the scheduler decided the timings
            lines, crossings = [f"# {sharing}"], []
        for line in lines:
            print(line)
        meta = {"command": "bench", "argv": sys.argv, "environment": environment(),
                "clock": clock.name(),  # the clock the times are in (a default may pick it)
                "thread_level": level, "config": asdict(cfg), "options": options,
                "strategies": names, "baseline": args.baseline, "world_ranks": world.Get_size(),
                "reducers": described, "crossovers": crossings,
                "cluster": H.cluster_record(args, world.Get_size())}
        H.write_records(rows, meta, args.json, args.csv)
    return 1 if any(r["wrong"] for r in rows) else 0
