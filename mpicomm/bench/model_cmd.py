"""``python -m mpicomm model``: the α-β-γ model's predictions held against measurement.

Needs at least two ranks (one rank has no link to measure: a one-line error).
Every printed number is finite: an unmeasured bandwidth prints ``-`` and a
crossover the model never reaches is said in words, never as 2147483648 B.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import asdict

from mpi4py import MPI

from mpicomm.bench.predict import add_arguments as predict_arguments
from mpicomm.bench.predict import run_predict
from mpicomm.bench.step_predict import NOT_WITH_MODEL, STEP_ONLY
from mpicomm.core import clock, flops
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import is_given
from mpicomm.core.options import ReducerOptions
from mpicomm.core.units import fmt_bytes, fmt_num
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_predict import auto_crossover as crossover_on
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.formulas import ModelParams, auto_crossover, predict, with_emulated_links
from mpicomm.costmodel.measure import measure
from mpicomm.costmodel.profiles import cluster_of

__all__ = ["add_arguments", "run", "unused_flags", "predicted"]

# flags only one of the two modes reads: given to the other, they are refused (exit 2)
PREDICT_ONLY = ("ranks", "gamma_rate", "table", "compute_ms", "params", "calibrate",
                *STEP_ONLY)
MEASURE_ONLY = ("iters", "warmup_iters", "rounds", "check", "datatype", "op", "device", "seed",
                "baseline", "clock", "compute_scale", "links_from", "compress", "crossover_bytes",
                "validate", "cuda_aware", "thread_level")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from mpicomm.bench.harness import add_arguments as bench_arguments

    bench_arguments(p)
    p.set_defaults(minbytes=4096, iters=20)
    predict_arguments(p)  # --predict and its flags (mpicomm.bench.predict)


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
    unused = unused_flags(args)
    if unused and args.predict:
        raise ConfigError(f"{', '.join(unused)}: cannot take effect in this `model --predict` "
                          "run; drop it")
    if args.predict:  # formulas only, for a cluster that is not here (mpicomm.bench.predict)
        return run_predict(args)
    from mpicomm.bench import harness as bench

    if unused:
        return bench.usage_error(f"{', '.join(unused)}: cannot take effect in a measuring "
                                 "`model` run; add --predict or drop it")
    from mpicomm.core.environment import environment

    world = MPI.COMM_WORLD
    names = bench.chosen_strategies(args)
    if names is None:
        return 2
    if world.Get_size() < 2:
        return bench.usage_error("model needs links to measure: run it as `mpiexec -n N python "
                                 "-m mpicomm model ...` with N >= 2 (this job has 1 rank)")
    if bench.device_error(args.device, "model"):
        return 2
    options = bench.reducer_options(args)
    opts = ReducerOptions.from_kwargs("model", **options)  # a bad link: one line, no message
    cfg = bench.BenchConfig(
        sizes=tuple(bench.size_list(args.minbytes, args.maxbytes, args.stepfactor)),
        iters=args.iters, rounds=args.rounds, warmup=args.warmup_iters,
        check=args.check if opts.compress == "none" else 0,  # lossy: as bench, no checks
        dtype=args.datatype,
        op=args.op, seed=args.seed, device=args.device)
    if bench.memory_error(max(cfg.sizes), cfg.check > 0, cfg.device, world):
        return 2
    # 1. parameters (measured links; an emulated class takes its flags' latency and
    # bandwidth, or the real link where slower); 2. measurements; 3. the table, rank 0.
    # Under the virtual clock with a modelled device both columns are the model's (the
    # charged cluster's links, the device's adds): nothing of this host is measured
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
    for row in rows:
        t = predicted(row["strategy"], p, row["bytes"], params, options, charged)
        row["predicted_us"] = None if t is None else t * 1e6
        row["measured_over_predicted"] = None if not t else row["time_us"] / (t * 1e6)
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


def predicted(strategy: str, p: int, n: int, params: ModelParams | None, options: dict,
              charged: Cluster | None = None) -> float | None:
    """The model's seconds for one call of the run: under the virtual clock the cost model
    on ``charged``, the cluster the clock charges (``cluster_time``, the one predictor), with
    the γ the clock charges an add: the modelled device's (``flops.gamma``), or under
    ``--accelerator host`` γ as measured here x ``--compute-scale`` (CPU time); under the
    wall clock the α-β-γ formulas on this host's measured links (``formulas.predict``)."""
    if charged is not None:
        vc = clock.virtual()
        gamma = flops.gamma() if flops.active() else \
            params.gamma_at(n / p) * (1.0 if vc is None else vc.scale)
        cluster = dataclasses.replace(charged, gamma_s_per_byte=max(gamma, 1e-300))
        return cluster_time(strategy, p, n, cluster, options)
    return predict(strategy, p, n, params, options, options["crossover_bytes"])


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
