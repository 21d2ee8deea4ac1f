"""``python -m mpicomm model``: the α-β-γ model's predictions held against measurement.

Measuring needs at least two ranks (one rank has no link to measure: a one-line error).
Every printed number is finite: an unmeasured bandwidth prints ``-`` and a
crossover the model never reaches is said in words, never as 2147483648 B.
``--predict`` computes for a cluster that is not here: formulas only, no MPI traffic
(errors exit 2 without ``MPI_Abort``; ``cli/predict.py`` over ``bench.predict``). The sweep
is bench's (``bench.harness``), the model beside each row ``bench.model_rows``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from mpi4py import MPI

from mpicomm.bench import harness as bench
from mpicomm.bench.model_rows import add_predictions
from mpicomm.cli.bench import add_arguments as bench_arguments
from mpicomm.cli.bench import (
    bench_config,
    chosen_strategies,
    reducer_options,
    sweep_problem,
    usage_error,
)
from mpicomm.cli.predict import add_arguments as predict_arguments
from mpicomm.cli.predict import run_predict
from mpicomm.cli.predict_step import NOT_WITH_MODEL, STEP_ONLY
from mpicomm.core import clock, flops
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import is_given
from mpicomm.core.options import ReducerOptions
from mpicomm.core.units import fmt_bytes, fmt_num
from mpicomm.costmodel.cluster_predict import auto_crossover as crossover_on
from mpicomm.costmodel.formulas import ModelParams, auto_crossover, with_emulated_links
from mpicomm.costmodel.measure import measure
from mpicomm.costmodel.profiles import cluster_of

__all__ = ["add_arguments", "run", "HELP", "USES_MPI", "uses_mpi", "unused_flags", "print_model"]

HELP = "alpha-beta-gamma cost model: predicted vs measured time"
USES_MPI = True


def uses_mpi(args: argparse.Namespace) -> bool:
    """``--predict`` sends no message: a usage error needs no ``MPI_Abort``."""
    return not getattr(args, "predict", False)

# flags only one of the two modes reads: given to the other, they are refused (exit 2)
PREDICT_ONLY = ("ranks", "gamma_rate", "table", "compute_ms", "params", "calibrate",
                *STEP_ONLY)
MEASURE_ONLY = ("iters", "warmup_iters", "rounds", "check", "datatype", "op", "device", "seed",
                "baseline", "clock", "compute_scale", "links_from", "compress", "crossover_bytes",
                "validate", "cuda_aware", "thread_level")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """bench's flags (its sweep measures), then ``--predict`` and its own."""
    bench_arguments(p)
    p.set_defaults(minbytes=4096, iters=20)
    predict_arguments(p)  # --predict and its flags (cli/predict.py)


def unused_flags(args: argparse.Namespace) -> list[str]:
    """The flags set (to other than their default) that this run would not read, each with
    why: "-n (measuring only)"."""
    fresh = argparse.ArgumentParser()
    add_arguments(fresh)
    defaults = vars(fresh.parse_args([]))
    flag = {a.dest: a.option_strings[0] for a in fresh._actions if a.option_strings}
    given = {d for d in flag if is_given(args, d, getattr(args, d, None) != defaults.get(d))}
    if not args.predict:
        why = dict.fromkeys(PREDICT_ONLY, "--predict only")
    else:
        why = dict.fromkeys(MEASURE_ONLY, "measuring only")
        if not args.strategies:  # the default variants set their own
            why.update(dict.fromkeys(("servers", "dedicated", "variant", "channels"),
                                     "with --strategies only"))
        why.update(dict.fromkeys(NOT_WITH_MODEL, "not with --model") if args.model else
                   dict.fromkeys(STEP_ONLY[1:], "with --model only"))
        profile = args.profile or (None if args.inter_link else "dgx-h100-ib400")
        if profile is not None:
            why["gamma_rate"] = "explicit links only, not with --profile"
        if profile == "this-machine":
            why.update(dict.fromkeys(("inter_link", "intra_link", "nics_per_node"),
                                     "not with this-machine's measured links"))
        else:
            why.update(dict.fromkeys(("params", "calibrate"), "--profile this-machine only"))
    return [f"{flag[d]} ({why[d]})" for d in flag if d in why and d in given]


def run(args: argparse.Namespace) -> int:
    """``--predict``: the formulas for a cluster that is not here; else measure this job."""
    unused = unused_flags(args)
    if unused and args.predict:
        raise ConfigError(f"{', '.join(unused)}: cannot take effect in this `model --predict` "
                          "run; drop it")
    if args.predict:  # formulas only, for a cluster that is not here (cli/predict.py)
        return run_predict(args)
    if unused:
        return usage_error(f"{', '.join(unused)}: cannot take effect in a measuring "
                           "`model` run; add --predict or drop it")
    return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    """1. parameters (measured links; an emulated class takes its flags' latency and
    bandwidth, or the real link where slower); 2. measurements; 3. the table, rank 0.
    Under the virtual clock with a modelled device both columns are the model's (the
    charged cluster's links, the device's adds): nothing of this host is measured."""
    world = MPI.COMM_WORLD
    names = chosen_strategies(args)
    if names is None:
        return 2
    if world.Get_size() < 2:
        return usage_error("model needs links to measure: run it as `mpiexec -n N python "
                           "-m mpicomm model ...` with N >= 2 (this job has 1 rank)")
    options = reducer_options(args)
    opts = ReducerOptions.from_kwargs("model", **options)  # a bad link: one line, no message
    cfg = bench_config(args, opts.compress)  # lossy: as bench, no checks
    why = sweep_problem(cfg, "model", world)
    if why:
        return usage_error(why)
    charged = cluster_of(args, world.Get_size()) if clock.virtual() is not None else None
    params = None if charged is not None and flops.active() else \
        measure(world, max(cfg.sizes), args.ranks_per_node, progress="model: measuring")
    if charged is None:  # the wall clock: the emulated classes over the measured links
        params = with_emulated_links(params, opts.inter_link, opts.intra_link)
    p = world.Get_size()
    if options["crossover_bytes"] is None:  # auto switches where this model says
        options["crossover_bytes"] = (auto_crossover(p, params) if charged is None
                                      else crossover_on(p, charged))
    rows = bench.run_bench(names, options, cfg, args.baseline)
    if world.Get_rank() != 0:
        return 0
    add_predictions(rows, p, params, options, charged)
    return _report(args, rows, params, options, cfg, charged, p)


def _report(args: argparse.Namespace, rows: list[dict], params: ModelParams | None, options: dict,
            cfg: bench.BenchConfig, charged: object, p: int) -> int:
    """Rank 0: the table and the files; exit 1 when a result was wrong (as bench)."""
    from mpicomm.core.environment import environment

    note = bench.emulation_note(options)
    if note:
        print(note)
    print_model(params, rows, options["crossover_bytes"])
    meta = {"command": "model", "argv": sys.argv, "environment": environment(),
            "clock": clock.name(),  # the clock the measured times are in
            "params": None if params is None else asdict(params),
            "options": options, "config": asdict(cfg),
            "cluster": None if charged is None else charged.as_dict(),
            "auto_crossover_bytes": options["crossover_bytes"], "world_ranks": p}
    bench.write_records(rows, meta, args.json, args.csv)
    wrong = sum(r["wrong"] for r in rows)
    if wrong:  # as bench: a wrong result fails the run
        print(f"# FAILED: {wrong} elements off the expected sum "
              f"({', '.join(sorted({r['strategy'] for r in rows if r['wrong']}))})")
    return 1 if wrong else 0


def _gbps(sizes, per_byte, every: int = 2) -> str:
    pairs = [(m, b) for m, b in zip(sizes, per_byte, strict=True) if m >= 4096][::every]
    return ", ".join(f"{fmt_bytes(m)} {1e-9 / b:.1f}" for m, b in pairs if b > 0) or "-"


def _crossover_text(crossover: int, largest: int = 1 << 30) -> str:
    if crossover > largest:
        return f"none up to {fmt_bytes(largest)} (recursive doubling predicted faster throughout)"
    return f"{fmt_bytes(crossover)} ({crossover} B)"


def print_model(params: ModelParams | None, rows: list[dict], crossover: int) -> None:
    if params is None:  # the virtual clock's device model: nothing of this host enters
        print(f"# both columns are the model's: the cluster above, adds on the modelled "
              f"{flops.describe()['name']}; auto crossover {_crossover_text(crossover)}")
    else:
        _print_params(params, crossover)
    print(f"#{'size (B)':>11} {'strategy':>20} {'predicted':>10} {'measured':>10} "
          f"{'meas/pred':>9} {'busbw':>7}")
    print(f"#{'':>11} {'':>20} {'(us)':>10} {'(us)':>10} {'':>9} {'(GB/s)':>7}")
    for row in sorted(rows, key=lambda r: (r["bytes"], r["strategy"])):
        pred, ratio = row["predicted_us"], row["measured_over_predicted"]
        print(f"{row['bytes']:>12} {row['strategy']:>20} "
              f"{fmt_num(pred, '.2f'):>10} {fmt_num(row['time_us'], '.2f'):>10} "
              f"{fmt_num(ratio, '.2f'):>9} {fmt_num(row['busbw_gbps'], '.2f'):>7}")


def _print_params(params: ModelParams, crossover: int) -> None:
    """The lines of this host's measured links and adds (``measure``)."""
    for kind in ("intra", "inter"):
        link = getattr(params, kind)
        fit = fmt_num(1e-9 / link.beta_fit if link.beta_fit > 0 else None, ".1f")
        how = f"emulated {link.emulated}" if link.emulated else f"pair {link.pair}"
        print(f"# {kind}-node {how}: alpha {fmt_num(link.alpha, '.2f', 1e6)} us "
              f"(exchange {fmt_num(link.exchange_alpha(), '.2f', 1e6)} us); 1/beta ping-pong "
              f"fit {fit} GB/s")
        print(f"#   1/beta(m) ping-pong GB/s: {_gbps(link.sizes, link.beta)}")
        if link.beta_x:
            print(f"#   1/beta(m) exchange  GB/s: {_gbps(link.sizes, link.beta_x)}")
    print(f"# 1/gamma(m) after exchange GB/s: {_gbps(params.gamma_sizes, params.gamma)}")
    if params.gamma_local:
        print(f"# 1/gamma(m) local np.add GB/s: {_gbps(params.gamma_sizes, params.gamma_local)}")
    print(f"# nodes {params.num_nodes}, ranks per node {params.local_size}; "
          f"auto crossover {_crossover_text(crossover)}")
