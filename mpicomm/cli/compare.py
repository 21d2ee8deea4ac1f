"""``python -m mpicomm compare``: the same training run under every strategy, side by side.

    mpiexec -n 4 python -m mpicomm compare [--strategies native,ps,ring,hierarchical] [--json F]

In ONE mpiexec job, for each strategy in turn: the same seed, data, model and
flags go through ``train.run_training`` (the one loop). Then rank 0 prints one
table (throughput, step time, compute/comm share, bytes per step, final loss)
and a reading of who won and why in α-β-γ terms: ``costmodel.measure`` times
this job's links (ping-pong, ``np.add``) and ``costmodel.predict`` gives each
strategy's expected comm time, printed beside the measured one.

hierarchical uses ``--ranks-per-node`` (or ``MPICOMM_RANKS_PER_NODE``) when
given; otherwise the real nodes when the job spans several hosts, and simulated
nodes of 2 ranks when it runs on one host, so a laptop still exercises the
intra-/inter-node split. A 1-worker baseline (rank 0
alone, same per-worker batch) gives each strategy's scaling efficiency.

Verdicts respect noise (``analysis.reading``, ``analysis.verdict``): "A beats B" only
when the 95% interval of their speed ratio, from the step times of every round,
excludes 1; otherwise a tie with its interval. A comparison needs at least two
ranks: one rank is refused with a one-line error.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import zlib
from typing import Any

import numpy as np

from mpicomm import costmodel
from mpicomm.analysis import reading as report
from mpicomm.analysis.report import WIDTH, shown_columns
from mpicomm.analysis.verdict import cpu_sharing_warning, speed_interval
from mpicomm.bench.step_predict import own_reducers_cluster, run_step_s
from mpicomm.cli.config import add_train_flags, given, train_config
from mpicomm.cli.flags import add_cluster_flags
from mpicomm.core import clock, flops
from mpicomm.core.flags import is_given
from mpicomm.core.links import Link, link_from_env
from mpicomm.core.progress import Progress
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.costmodel.formulas import LinkModel, ModelParams
from mpicomm.costmodel.measure import measure as measure_model
from mpicomm.reducers import check_request, strategies
from mpicomm.train import layouts, metrics, parallel_setup
from mpicomm.train import loop as T
from mpicomm.train.checks import check
from mpicomm.train.config import check_strategy_options

__all__ = ["add_arguments", "run", "DEFAULT_STRATEGIES", "HELP", "USES_MPI"]

HELP = "train under several strategies in one job; side-by-side table"
USES_MPI = True

DEFAULT_STRATEGIES = ("native", "ps", "ring", "hierarchical")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add --strategies, --no-baseline, --repeats, --explain and the training flags."""
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help="comma-separated strategies to run, in order")
    p.add_argument("--no-baseline", dest="solo_baseline", action="store_false",
                   help="skip the 1-worker baseline (no scaling efficiency)")
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds over all strategies (they take turns); the verdict uses every "
                        "round, the table shows each strategy's median round (--model: 1 "
                        "unless given: the device model's rounds are identical)")
    p.add_argument("--layouts", default=None,
                   help="compare parallelism layouts instead of strategies: dp, zero, zero2, "
                        "ppK, tpK, dpAxppK (train.layouts; docs/parallelism.md)")
    p.add_argument("--explain", action="store_true",
                   help="also print how the verdict is decided (the statistics)")
    add_train_flags(p, single_run=False)
    add_cluster_flags(p)  # --profile (cli.flags: the one cluster-flag group)


ONE_RANK = ("a comparison needs several ranks: run it as `mpiexec -n N python -m mpicomm "
            "compare ...` with N >= 2 (this job has 1 rank)")


def _split_name(name: str) -> tuple[str, str | None]:
    """``ps:async`` -> ("ps", "async") (the real parameter server); ``ring`` -> ("ring", None)."""
    base, _, mode = name.partition(":")
    return base, mode or None


def _run_config(cfg: T.TrainConfig, name: str, bound: int) -> T.TrainConfig:
    """The run's config for a --strategies entry (``ps:ssp`` takes --staleness); checked."""
    base, mode = _split_name(name)
    return dataclasses.replace(cfg, strategy=base, ps_mode=mode,
                               staleness=bound if mode == "ssp" else 0)


def _median_run(recs: list[dict], baseline: float | None) -> dict:
    """Return the record of the median-throughput run, with every run's samples/s and its interval.

    ``samples_per_sec_spread`` (the table's ± column) is the larger of the
    half-width of the 95% bootstrap interval of the speed over the steps of
    every round, and half the range of the rounds' samples/s over their median:
    with one round, the within-run step spread, never a fake 0%.
    """
    sps = [r["samples_per_sec"] for r in recs]
    order = sorted(range(len(recs)), key=lambda i: sps[i])
    rec = dict(recs[order[(len(recs) - 1) // 2]])
    rec["repeats"] = len(recs)
    rec["samples_per_sec_runs"] = sps
    rounds = [r.get("step_times_s") or [] for r in recs]
    if any(rounds):
        iv = speed_interval(rounds, work=rec["global_batch"], widen=False)
        half_range = (max(sps) - min(sps)) / 2 / rec["samples_per_sec"]
        rec["samples_per_sec_spread"] = max(iv.half_width(), half_range)
        rec["samples_per_sec_interval"] = [iv.low, iv.high]
    else:
        rec["samples_per_sec_spread"] = None
    rec["baseline_samples_per_sec"] = baseline
    rec["scaling_efficiency"] = (rec["samples_per_sec"] / (rec["workers"] * baseline)
                                 if baseline else None)
    if len({r["param_crc32"] for r in recs}) > 1:  # same seed, same data: same result
        rec["params_in_sync"] = False
    return rec


def _ranks_on_busiest_host(comm) -> int:
    """The largest number of this job's ranks on one host (collective)."""
    host = zlib.crc32(platform.node().encode())
    hosts = metrics.gather_rows(comm, np.array([host], dtype=np.float64))[:, 0]
    return int(max(np.count_nonzero(hosts == h) for h in set(hosts.tolist())))


def _configure(args: argparse.Namespace, names: list[str],
               size: int) -> tuple[T.TrainConfig, dict[str, T.TrainConfig]]:
    """Check the compare flags; return the first strategy's config and each name's (ConfigError).

    A name is a strategy, or ``ps:MODE`` for the real parameter server (``ps:ssp``
    takes ``--staleness``).
    """
    bad = [s for s in names if _split_name(s)[0] not in strategies()
           or (_split_name(s)[1] is not None and _split_name(s)[0] != "ps")]
    if size < 2:
        raise T.ConfigError(ONE_RANK)
    if getattr(args, "model", None) and "repeats" not in given(args):
        args.repeats = 1  # --model: the device model's rounds are identical (--help)
    if args.repeats < 1:
        raise T.ConfigError(f"--repeats must be >= 1, got {args.repeats}")
    if not names or bad:
        raise T.ConfigError(
            f"--strategies: unknown {', '.join(map(repr, bad)) or '(empty list)'}; "
            f"valid strategies: {', '.join(strategies())} (and ps:sync, ps:async, ps:ssp)"
        )
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:  # one name's rounds would be pooled and printed on two identical rows
        raise T.ConfigError(f"--strategies names {', '.join(twice)} more than once; "
                            "--repeats runs a strategy several times")
    cfg = train_config(args, staleness=0, ps_mode=None,  # per name: ps:MODE
                       strategy=_split_name(names[0])[0])
    if parallel_setup.is_model_parallel(cfg):  # the table, reading and model are data-parallel
        raise T.ConfigError("--pipeline-stages / --tensor-parallel: compare --strategies times "
                            "data-parallel strategies; put layouts side by side with "
                            "--layouts dp,ppK,tpK,dpAxppK (docs/parallelism.md)")
    bound = getattr(args, "staleness", 0)
    if bound and "ps:ssp" not in names:
        raise T.ConfigError(f"--staleness {bound} bounds ps:ssp only, which --strategies does "
                            "not name")
    check_strategy_options(cfg, [_split_name(s)[0] for s in names], given=given(args))
    run_cfgs = {name: _run_config(cfg, name, bound) for name in names}
    for run_cfg in run_cfgs.values():  # every strategy's refusals before the first run
        check(run_cfg, size, single_run=False)  # e.g. a --straggler on ps:MODE's server
        if not run_cfg.ps_mode:
            check_request(run_cfg.strategy, **run_cfg.reducer_options())
    return cfg, run_cfgs


def run(args: argparse.Namespace) -> int:
    """Run every strategy in one job; rank 0 prints the table and reading, writes --json."""
    from mpicomm.core.topology import Topology

    if getattr(args, "layouts", None):  # parallelism layouts side by side
        return _run_layouts(args)
    comm = metrics.world()
    rank0 = comm.Get_rank() == 0
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    try:
        cfg, run_cfgs = _configure(args, names, comm.Get_size())
        user_rpn = resolve_ranks_per_node(cfg.ranks_per_node)
    except (T.ConfigError, ValueError, TypeError) as exc:  # same on every rank
        if rank0:
            print(f"mpicomm compare: error: {exc}", flush=True)
        return 2
    if cfg.blas_threads:
        T.limit_blas_threads(cfg.blas_threads)
    topo = Topology(comm, ranks_per_node=cfg.ranks_per_node)
    topology = topo.describe()
    # hierarchical: the user's node size; else the real nodes when the job spans
    # several hosts; else (one host) simulated nodes of 2 ranks
    hier_rpn = user_rpn if user_rpn is not None else None if topo.num_nodes > 1 else 2
    one_host = topo.num_nodes == 1
    topo.free()
    if one_host and user_rpn is None and "hierarchical" in names and len(names) > 1 and \
            link_from_env(None, "inter_link", "MPICOMM_INTER_LINK") is not None:
        # (--inter-link itself is refused earlier: cli.main); the variable would time
        # hierarchical on nodes of 2 across the link and the others on one node beside it
        if rank0:
            print("mpicomm compare: error: MPICOMM_INTER_LINK on one host without "
                  "--ranks-per-node: hierarchical would cross it on nodes of 2 ranks and the "
                  "other strategies, on one node, never; give --ranks-per-node K", flush=True)
        return 2
    sharing = cpu_sharing_warning(_ranks_on_busiest_host(comm))
    if rank0 and sharing:
        print(sharing, flush=True)

    try:
        runs, baselines = _rounds(args, cfg, run_cfgs, comm, (hier_rpn, user_rpn))
    except T.SetupError:
        return 2
    baseline = float(np.median(baselines)) if baselines else None
    records = [_median_run(runs[name], baseline) for name in names]
    # the α-β-γ parameters of this job's links, and each strategy's predicted comm time
    model = _cost_params(comm, records[0], hier_rpn, args)
    _predict(args, cfg, run_cfgs, records, model, (hier_rpn, user_rpn))
    if rank0:
        _print_results(args, cfg, records, runs, model, topology, baseline, names, sharing)
    return 0


def _predict(args: argparse.Namespace, cfg: T.TrainConfig, run_cfgs: dict, records: list[dict],
             model: ModelParams, rpn: tuple[int | None, int | None]) -> None:
    """Each record's predicted comm time (and with --model its whole step), on the layout it
    ran on (``_rounds``: ``rpn`` is hierarchical's nodes, the others')."""
    for name, rec in zip(run_cfgs, records, strict=True):
        opts = {**cfg.reducer_options(), "op": "mean",  # the engine averages
                "ranks_per_node": rpn[0] if name == "hierarchical" else rpn[1]}
        # auto: at the switch size it actually used (its own calibration), not this model's;
        # the real parameter server (ps:MODE) has no allreduce formula
        rec["predicted_comm_s"] = None if ":" in name else predicted_comm(
            name, rec, model, opts, args)
        if cfg.model is not None and ":" not in name:  # --model: the whole step predicted
            rec["predicted_step_s"] = run_step_s(run_cfgs[name], name, rec["ranks"],
                                                 charged_cluster(name, rec, model, opts, args),
                                                 opts, flops.describe()["name"])


def _cost_params(comm: Any, rec: dict, hier_rpn: int | None,
                 flags: argparse.Namespace) -> ModelParams:
    """The α-β-γ parameters the reading quotes. Under the virtual clock with a modelled device,
    the cluster the clock charged (its links' α and β, the device's γ): this host's links and
    adds enter none of the run's times, and measuring them took a minute under load and put
    their α in the reading. Otherwise this job's links, measured (collective)."""
    from mpicomm.costmodel.profiles import cluster_of

    p = rec["ranks"]
    c = cluster_of(flags, p) if clock.virtual() is not None and flops.active() else None
    if c is None or not (isinstance(c.intra, Link) and isinstance(c.inter, Link)):
        return measure_model(comm, max_bytes=rec["grad_bytes"], ranks_per_node=hier_rpn)
    sizes = [8, max(rec["grad_bytes"], 16)]
    intra, inter = (LinkModel(x.alpha_s, sizes, [x.beta] * 2, x.beta, emulated=str(x))
                    for x in (c.intra, c.inter))
    local = min(c.ranks_per_node, p)  # the layout the clock charged
    return ModelParams(intra, inter, sizes, [flops.gamma()] * 2, -(-p // local), local)


def predicted_comm(name: str, rec: dict, model, opts: dict, flags) -> float | None:
    """The model's seconds of one step's reduction: under the virtual clock the cost model on
    the cluster the clock charged (``cluster_time``: channels, the tree and native included),
    γ the modelled device's (``flops.gamma``; with ``--accelerator host`` as measured here x
    ``--compute-scale``: the clock charges an add as CPU time), the gradient at the
    ``--precision``'s width; under
    the wall clock the α-β-γ formulas on this host's measured links (``formulas.predict``)."""
    p, n = rec["ranks"], rec["grad_bytes"]
    if clock.virtual() is None:
        return costmodel.predict(name, p, n, model, opts,
                                 rec.get("reducer", {}).get("crossover_bytes"))
    from mpicomm.costmodel.cluster_predict import cluster_time

    n = n // np.dtype(getattr(flags, "dtype", "float32")).itemsize * flops.width()  # --precision
    return cluster_time(name, p, n, charged_cluster(name, rec, model, opts, flags), opts)


def charged_cluster(name: str, rec: dict, model, opts: dict, flags):
    """The cluster the virtual clock charged a run on (``cluster_of`` its flags), with γ the
    modelled device's adds (``--accelerator host``: as measured here x ``--compute-scale``;
    native's inside MPI), the run's ranks per node, and mpicomm's own reducers' forms: not
    ``pipelined``, no per-call α (the clock charges none), each add a kernel launch: the
    one ``own_reducers_cluster``, which ``model --predict --model --reducers mpicomm`` calls."""
    from mpicomm.costmodel.profiles import cluster_of

    p, n = rec["ranks"], rec["grad_bytes"]
    cluster = cluster_of(flags, p)
    gamma = flops.gamma()  # the device model's adds (None: --accelerator host, measured here)
    if gamma is None:  # host time: a strategy's adds as measured here; native's inside MPI
        gamma = cluster.gamma_s_per_byte if name == "native" else \
            model.gamma_at(n / p) * clock.virtual().scale
    # mpicomm's own reducers ran, one exchange a step and each add a kernel (the device's
    # launch x --compute-scale), even on a profile whose own model is NCCL's (pipelined)
    return own_reducers_cluster(cluster, gamma, flops.launch(), opts["ranks_per_node"] or p)


def _run_layouts(args: argparse.Namespace) -> int:
    """``compare --layouts``: every layout in one job (``train.layouts``); rank 0 prints the
    table and writes --json. Refused in one line, exit 2: the flags it would ignore."""
    if is_given(args, "strategies", args.strategies != ",".join(DEFAULT_STRATEGIES)):
        if metrics.world().Get_rank() == 0:
            print("mpicomm compare: error: --strategies has no effect with --layouts (every "
                  "layout reduces with the ring; docs/parallelism.md); give one or the other",
                  flush=True)
        return 2
    if args.explain:  # the reading it explains is the strategies' table, not the layouts'
        if metrics.world().Get_rank() == 0:
            print("mpicomm compare: error: --explain has no effect with --layouts (it "
                  "explains the --strategies table)", flush=True)
        return 2
    comm = metrics.world()
    names = [s.strip() for s in args.layouts.split(",") if s.strip()]
    try:
        cfg, cfgs = _layout_configs(args, names, comm.Get_size())
    except T.ConfigError as exc:  # the same on every rank, before any message
        if comm.Get_rank() == 0:
            print(f"mpicomm compare: error: {exc}", flush=True)
        return 2
    if cfg.blas_threads:
        T.limit_blas_threads(cfg.blas_threads)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    try:
        for _ in range(args.repeats):  # layouts take turns: load hits them alike
            for name in names:
                runs[name].append(T.run_training(cfgs[name], comm, verbose=False))
    except T.SetupError:
        return 2
    records = []
    for name in names:  # the median round of each
        recs = sorted(runs[name], key=lambda r: r["samples_per_sec"])
        records.append({**layouts.with_memory(cfgs[name], recs[(len(recs) - 1) // 2]),
                        "layout": name})
    if comm.Get_rank() == 0:
        _print_layouts(args, cfg, names, records)
    return 0


def _layout_configs(args: argparse.Namespace, names: list[str],
                    size: int) -> tuple[T.TrainConfig, dict[str, T.TrainConfig]]:
    """The flags' config and each layout's, checked (``ConfigError``)."""
    if size < 2:
        raise T.ConfigError("a comparison needs several ranks (mpiexec -n N, N >= 2)")
    cfg = train_config(args, strategy="ring")
    if cfg.model is not None:  # the layouts split and size the MLP of --layers
        raise T.ConfigError(f"--layouts cannot take effect with --model {cfg.model}: the "
                            "layouts split the MLP of --layers; compare strategies on it with "
                            "--strategies")
    layouts.check_layout_flags(cfg, names, given=given(args))
    cfgs = {name: layouts.layout_config(cfg, name, size) for name in names}
    for run_cfg in cfgs.values():  # every layout's refusals before the first one runs
        check(run_cfg, size, single_run=False)
    if not names or args.repeats < 1:
        raise T.ConfigError("--layouts needs at least one layout and --repeats >= 1")
    return cfg, cfgs


def _print_layouts(args: argparse.Namespace, cfg: T.TrainConfig, names: list[str],
                   records: list[dict]) -> None:
    print(layouts.format_layouts(records))
    print("memory per rank; comm ms: exposed (waiting for other ranks); times measured "
          "with the clock '" + str(records[0].get("clock")) + "'")
    if args.json:
        slim = [{k: v for k, v in r.items() if k != "step_times_s"} for r in records]
        T.write_json(args.json, T.document("compare", cfg, slim, {}, layouts=names,
                                           repeats=args.repeats))
        print(f"wrote {args.json}")


def _rounds(args: argparse.Namespace, cfg: T.TrainConfig, run_cfgs: dict, comm: object,
            rpn: tuple[int | None, int | None]) -> tuple[dict[str, list[dict]], list[float]]:
    """Run ``--repeats`` rounds of every strategy (and the 1-worker baseline); return each
    strategy's records and the baselines. Rounds interleave the strategies, so a burst of
    load on a shared host hits them alike; each strategy reports its median-throughput
    round, the verdict uses all. ``rpn``: hierarchical's ranks per node, the others'."""
    names = list(run_cfgs)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    baselines = []
    solo = args.solo_baseline
    prog = Progress(args.repeats * (len(names) + solo), "compare",
                    enabled=comm.Get_rank() == 0)
    try:
        for rnd in range(args.repeats):
            if solo:
                prog.begin(f"round {rnd + 1}/{args.repeats}: 1-worker baseline")
                baselines.append(T.measure_baseline(cfg, comm))
                prog.done()
            for name in names:
                prog.begin(f"round {rnd + 1}/{args.repeats}: {name}")
                run_cfg = dataclasses.replace(run_cfgs[name], ranks_per_node=rpn[0] if
                                              name == "hierarchical" else rpn[1])
                runs[name].append(T.run_training(run_cfg, comm, verbose=rnd == 0))
                prog.done()
    finally:
        prog.close()
    return runs, baselines


def _clock_line(cfg) -> str:
    """One line naming the clock every time in the table is in."""
    if clock.virtual() is None:
        return "clock: wall — the times are this host's (docs/virtual_clock.md: --clock virtual)"
    nodes = f"nodes of {cfg.ranks_per_node} ranks" if cfg.ranks_per_node else "one node"
    dev = flops.describe()
    if dev is None:  # --accelerator host
        return (f"clock: virtual — a modelled cluster ({nodes}; the cluster line above): "
                "compute is THIS HOST's CPU time (--accelerator host), every message is "
                "charged by the link model: the compute moves with this host's load and speed "
                "(docs/virtual_clock.md)")
    what = "compute is charged" if cfg.single_rate is None else (
        f"each layer's compute is charged from --single-rate {cfg.single_rate:g} samples/s "
        "(the update inside it) and the reducers' adds")
    return (f"clock: virtual — a modelled cluster ({nodes}; the cluster line above): "
            f"{what} by the modelled {dev['name']} at {dev['precision']} "
            f"(roofline: {dev['flop_rate'] / 1e12:.1f} TFLOP/s, "
            f"{dev['memory_bytes_per_s'] / 1e9:,.0f} GB/s, {dev['launch_s'] * 1e6:.1f} us a "
            "kernel), every message by the link model, so the times are the modelled "
            "cluster's, the same on any machine, load and MPI "
            "(docs/virtual_clock.md)" + _fold_text())


def _fold_text() -> str:
    """--fold F (the record's ``fold``): what a folded run held and was charged."""
    f = clock.fold()
    return "" if f == 1 else (f"; folded {f} (--fold): each rank held 1/{f} of every "
                              "tensor, and every message and elementwise kernel was charged "
                              "its full size (docs/workloads.md)")


def _step_line(cfg, records: list[dict], names: list[str], profile: str | None) -> str:
    """--model: each strategy's virtual step beside the predictor's for the same flags (on a
    named profile, priced as mpicomm's reducers run: ``--reducers mpicomm``)."""
    pairs = [f"{name} {1e3 * r['step_time_median_s']:.2f}/"
             + (f"{1e3 * r['predicted_step_s']:.2f}" if r.get("predicted_step_s") else "-")
             for name, r in zip(names, records, strict=True)]
    forms = " --reducers mpicomm" if profile else ""
    return (f"{cfg.model}: step ms, this run/predicted (model --predict --model {cfg.model}"
            f"{forms}, the same flags): {', '.join(pairs)}")


def _modelled_flat_link(flags, ranks: int) -> tuple[float, float] | None:
    """Under the virtual clock, (α, β) of the modelled link a flat ring crosses (the inter-node
    class when the cluster has several nodes): what the reading quotes, as its model column
    uses it. None under the wall clock (the reading quotes this host's measured links)."""
    if clock.virtual() is None:
        return None
    from mpicomm.costmodel.profiles import cluster_of

    cluster = cluster_of(flags, ranks)
    return cluster.link("inter" if ranks > cluster.ranks_per_node else "intra")


def _print_results(args, cfg, records, runs, model, topology, baseline, names, sharing) -> None:
    """Rank 0: the table, the verdict and reading, the legend, and --json."""
    lines = report.reading(records, model, runs, repeats=args.repeats, seed=cfg.seed,
                           link=_modelled_flat_link(args, records[0]["ranks"]))
    if sharing:  # the scheduler decided these timings: no "beats", one line says why
        lines = [ln for ln in lines if not ln.startswith(("verdict:", "noise floor:"))]
        lines.insert(0, sharing)
    print()
    width = None if args.wide else WIDTH
    print(T.format_table(records, width=width))
    print()
    print(_clock_line(cfg))  # the reading's times are in this clock (records hold "clock")
    if cfg.model is not None:
        print(_step_line(cfg, records, names, getattr(args, "profile", None)))
    for line in lines:
        print(line)
    print()
    if args.legend or args.explain:
        for line in report.legend(shown_columns(records, width)[0], explain=args.explain):
            print(line)
    else:
        print("(--legend: what each column means)")
    if args.json:
        vs, floor = report.verdicts(records, runs, cfg.seed)
        slim = [{k: v for k, v in r.items() if k != "step_times_s"} for r in records]
        T.write_json(args.json, T.document(
            "compare", cfg, slim, topology, strategies=names, repeats=args.repeats,
            baseline_samples_per_sec=baseline, cost_model=dataclasses.asdict(model),
            reading=lines, noise_floor=floor,
            verdicts=[{"a": v.a, "b": v.b, "ratio": v.ratio.value, "low": v.ratio.low,
                       "high": v.ratio.high, "winner": v.winner,
                       "same_algorithm": v.same_algorithm} for v in vs],
        ))
        print(f"wrote {args.json}")
