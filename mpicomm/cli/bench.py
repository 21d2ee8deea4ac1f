"""``python -m mpicomm bench``: nccl-tests-style sweep of every strategy over message sizes.

    mpiexec -n 2 python -m mpicomm bench -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float

The harness (``mpicomm.bench.harness``) sweeps, times, checks and formats; this
module is the command: flags, their checks (``chosen_strategies``, shared with ``model``),
header, rows, summary, crossovers, files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import asdict

from mpi4py import MPI

from mpicomm._mpi_init import THREAD_LEVELS
from mpicomm.analysis.crossover import crossover_lines
from mpicomm.bench import harness as H
from mpicomm.bench.harness import DTYPES, size_list
from mpicomm.cli.flags import add_cluster_flags, add_flags
from mpicomm.cli.helptext import DefaultsFormatter
from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import CUDA_AWARE_ON_CPU, ReducerFields, check_strategy_options
from mpicomm.core.units import fmt_bytes, jsonable, parse_bytes
from mpicomm.reducers import check_request, strategies

__all__ = ["add_arguments", "run", "HELP", "USES_MPI", "reducer_options", "chosen_strategies",
           "bench_config", "sweep_problem", "usage_error"]

HELP = "nccl-tests-style sweep: time, algbw, busbw, #wrong per size"
USES_MPI = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the nccl-tests flags, the reducer options and --device; --help shows each default."""
    p.formatter_class = DefaultsFormatter
    p.add_argument("--strategies", default=None,
                   help="comma-separated strategies (default: all registered)")
    p.add_argument("--baseline", default="native",
                   help="strategy the 'vs' column compares to, when it is in the run")
    p.add_argument("-b", "--minbytes", type=parse_bytes, default="8",
                   help="smallest size: 8, 4K, 1M (binary, nccl-tests), 1MiB, 1MB (= 1e6)")
    p.add_argument("-e", "--maxbytes", type=parse_bytes, default="64M", help="largest message size")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0, help="size multiplication factor")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed calls per size and round")
    p.add_argument("-w", "--warmup_iters", type=int, default=5,
                   help="untimed calls per size (each round)")
    p.add_argument("--rounds", type=int, default=1,
                   help="turns per strategy at each size (strategies alternate; -n calls each)")
    p.add_argument("-c", "--check", type=int, default=1,
                   help="checked calls per size on fresh inputs (0: no check)")
    p.add_argument("-d", "--datatype", choices=sorted(DTYPES), default="float", help="element type")
    p.add_argument("-o", "--op", choices=["sum", "mean"], default="sum", help="reduction")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                   help="cpu: NumPy buffers; gpu: CuPy buffers (needs mpicomm[gpu])")
    p.add_argument("--seed", type=int, default=1, help="inputs derive from (seed, rank)")
    # the reducer options: generated from the one record (core.options.ReducerFields);
    # per-call agreement checks are off here: the bench checks the results itself
    add_flags(p, ReducerFields, defaults={"validate": False},
              notes={"validate": "(off here: the bench checks results itself; the first call "
                                 "is still checked)",
                     "compress": "(lossy: result checks are off unless none)"})
    add_cluster_flags(p)  # --profile (cli.flags: the one cluster-flag group)
    p.add_argument("--thread-level", choices=THREAD_LEVELS, default=None,
                   help="MPI thread level to request (read before MPI starts; default: "
                   "MPICOMM_THREAD_LEVEL, else mpi4py's multiple)")
    p.add_argument("--json", default=None, metavar="PATH", help="write records as JSON")
    p.add_argument("--csv", default=None, metavar="PATH", help="write records as CSV")


def reducer_options(args: argparse.Namespace) -> dict:
    """The ``ReducerOptions`` fields the command line sets (passed to every strategy)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(ReducerFields)}


def run(args: argparse.Namespace) -> int:
    """Sweep the chosen strategies on every rank; rank 0 prints the rows and writes --json/--csv."""
    from mpicomm.core.environment import environment
    from mpicomm.core.options import ReducerOptions

    world = MPI.COMM_WORLD
    names = chosen_strategies(args)
    if names is None:
        return 2
    options = reducer_options(args)
    # parsed once (bad values: one line, before the header); the typed record goes down
    opts = ReducerOptions.from_kwargs("bench", **options)
    options["compress"] = opts.compress
    if _refused(names, options, world.Get_rank()):
        return 2
    cfg = bench_config(args, opts.compress)
    why = sweep_problem(cfg, "bench", world)
    if why:
        return usage_error(why)
    level = H.thread_level_record(args.thread_level)
    root = world.Get_rank() == 0
    sharing = H.cpu_sharing(world)
    if root:
        _header(args, cfg, names, options, level, sharing, world.Get_size())
    described: dict = {}
    rows = H.run_bench(names, options, cfg, args.baseline,
                       printer=lambda row: print(H.format_row(row), flush=True),
                       described=described, judge=sharing is None)
    if root:
        _summary(rows, names)
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


def bench_config(args: argparse.Namespace, compress: str) -> H.BenchConfig:
    """The sweep's settings from the nccl-tests flags (a lossy ``compress``: no result checks)."""
    return H.BenchConfig(sizes=tuple(size_list(args.minbytes, args.maxbytes, args.stepfactor)),
                         iters=args.iters, rounds=args.rounds, warmup=args.warmup_iters,
                         check=args.check if compress == "none" else 0,
                         dtype=args.datatype, op=args.op, seed=args.seed, device=args.device)


def sweep_problem(cfg: H.BenchConfig, who: str, world: MPI.Comm) -> str | None:
    """Why the sweep cannot run here (``--device gpu`` without CuPy, buffers larger than a
    host's memory: collective), the same on every rank; None when it can."""
    return H.device_error(cfg.device, who) or H.memory_error(max(cfg.sizes), cfg.check > 0,
                                                             cfg.device, world)


def usage_error(message: str) -> int:
    """Print ``message`` once (rank 0) and return the usage exit code, 2, on every rank."""
    if MPI.COMM_WORLD.Get_rank() == 0:
        sys.stderr.write(f"mpicomm: {message}\n")
    return 2


def chosen_strategies(args: argparse.Namespace) -> list[str] | None:
    """Strategies to run, baseline first; None (after rank 0 printed why) on a bad flag."""
    known = strategies()
    names = known if args.strategies is None else [
        s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in names if s not in known]
    if unknown or not names:
        what = f"unknown strategy {', '.join(map(repr, unknown))}" if unknown else "no strategy"
        usage_error(f"{what}; valid strategies: {', '.join(known)}")
        return None
    if args.baseline not in known:  # a typo would leave the vs column empty
        usage_error(f"unknown --baseline {args.baseline!r}; valid strategies: "
                    f"{', '.join(known)}")
        return None
    bad = [f"{flag} {v}" for flag, v, lo in (("-n", args.iters, 1), ("--rounds", args.rounds, 1),
                                             ("-w", args.warmup_iters, 0), ("-c", args.check, 0))
           if v < lo]
    if bad:
        usage_error(f"{', '.join(bad)}: -n and --rounds must be >= 1, -w and -c >= 0")
        return None
    try:
        size_list(args.minbytes, args.maxbytes, args.stepfactor)
    except ValueError as exc:
        usage_error(str(exc))
        return None
    names = list(dict.fromkeys(names))
    if args.baseline in names:
        names.remove(args.baseline)
        names.insert(0, args.baseline)
    if getattr(args, "cuda_aware", None) is not None and args.device != "gpu":
        usage_error(CUDA_AWARE_ON_CPU)
        return None
    try:  # --servers 2 beside --strategies ring: the flag would be dropped
        check_strategy_options(args, names)
    except ConfigError as exc:
        usage_error(str(exc))
        return None
    return names


def _header(args: argparse.Namespace, cfg: H.BenchConfig, names: list[str], options: dict,
            level: dict, sharing: str | None, ranks: int) -> None:
    """Rank 0: the sweep's settings, notes, legend and the table's header."""
    print(f"# mpicomm bench: {ranks} ranks, {cfg.dtype} {cfg.op} on {cfg.device}, "
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
    if ranks == 1:
        print(f"# {H.ONE_RANK_NOTE}")
    print(H.HEADER, flush=True)


def _summary(rows: list[dict], names: list[str]) -> None:
    """Rank 0: each strategy's mean bus bandwidth and its out-of-bounds values."""
    for name in names:
        mine = [r for r in rows if r["strategy"] == name]
        if mine:
            avg = sum(r["busbw_gbps"] for r in mine) / len(mine)
            bad = sum(r["wrong"] for r in mine)
            print(f"# {name:>18}: avg bus bandwidth {avg:8.3f} GB/s, "
                  f"out of bounds values {bad} {'OK' if bad == 0 else 'FAILED'}")


def _refused(names: list[str], options: dict, rank: int) -> bool:
    """A codec a strategy cannot run: one line, before the header (the same on every rank)."""
    try:
        for name in names:
            check_request(name, **options)
    except ConfigError as exc:
        if rank == 0:
            sys.stderr.write(f"mpicomm bench: error: {exc}\n")
        return True
    return False
