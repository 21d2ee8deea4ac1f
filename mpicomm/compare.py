"""``python -m mpicomm compare``: the same training run under every strategy, side by side.

    mpiexec -n 4 python -m mpicomm compare [--strategies native,ps,ring,hierarchical] [--json F]

In ONE mpiexec job, for each strategy in turn: the same seed, data, model and
flags go through ``train.run_training`` (the one loop). Then rank 0 prints one
table (throughput, step time, compute/comm share, bytes per step, final loss)
and a reading of who won and why in α-β cost-model terms, using α and β
measured by a ping-pong between ranks 0 and 1.

hierarchical gets simulated nodes of 2 ranks (``ranks_per_node=2``) unless
``--ranks-per-node`` (or ``MPICOMM_RANKS_PER_NODE``) says otherwise, so a single
host still exercises its intra-/inter-node split. A 1-worker baseline (rank 0
alone, same per-worker batch) gives each strategy's scaling efficiency.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from mpicomm import metrics
from mpicomm import train as T
from mpicomm.reducers import strategies
from mpicomm.topology import resolve_ranks_per_node

__all__ = ["add_arguments", "run", "reading", "DEFAULT_STRATEGIES"]

DEFAULT_STRATEGIES = ("native", "ps", "ring", "hierarchical")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add --strategies, --no-baseline and the training flags."""
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help="comma-separated strategies to run, in order (default %(default)s)")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   help="skip the 1-worker baseline (no scaling efficiency)")
    T.add_arguments(p, single_run=False)


def _fmt_bytes(n: float) -> str:
    for unit, k in (("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n:.0f} B"


def reading(records: list[dict], alpha: float, beta: float) -> list[str]:
    """Return a one-line verdict (who won, why, in cost-model terms) and one line of numbers.

    Args:
        records: ``run_training`` records of one job (same model and ranks).
        alpha, beta: measured link latency (s) and inverse bandwidth (s/byte).
    """
    ok = [r for r in records if r["samples_per_sec"] == r["samples_per_sec"]]  # drop NaN
    if not ok:
        return ["no strategy completed a timed step"]
    ranked = sorted(ok, key=lambda r: -r["samples_per_sec"])
    win = ranked[0]
    by = {r["strategy"]: r for r in ok}
    p, n = win["ranks"], win["grad_bytes"]
    chunk = n / p
    crossover = alpha / beta if beta > 0 else math.inf  # bytes at which α = n·β
    verdict = f"{win['strategy']} won ({win['samples_per_sec']:,.0f} samples/s"
    if len(ranked) > 1:
        verdict += f", {win['samples_per_sec'] / ranked[1]['samples_per_sec']:.2f}x " \
                   f"{ranked[1]['strategy']}"
    verdict += "). "
    if win["comm_share"] < 0.2:
        verdict += (f"Compute-bound: comm is only {100 * win['comm_share']:.0f}% of its step, "
                    "so the strategies differ by little. ")
    if chunk < crossover:
        verdict += (f"Latency-bound: a ring chunk n/p = {_fmt_bytes(chunk)} is below "
                    f"α/β = {_fmt_bytes(crossover)}, so the count of message rounds "
                    "(2(p-1) for ring, lg p for recursive doubling) decides.")
    else:
        verdict += (f"Bandwidth-bound: a ring chunk n/p = {_fmt_bytes(chunk)} exceeds "
                    f"α/β = {_fmt_bytes(crossover)}, so bytes on the busiest link decide: "
                    f"ring/hierarchical ranks each send and receive 2(p-1)/p·n = "
                    f"{_fmt_bytes(2 * (p - 1) * n / p)}, while one ps server receives and sends "
                    f"(p-1)·n each way, 2(p-1)·n = {_fmt_bytes(2 * (p - 1) * n)} through one link.")
    if "ps" in by and win["strategy"] != "ps":
        verdict += (f" ps lost on its server link ({_fmt_bytes(by['ps']['bytes_per_step'])} "
                    f"sent/step by its busiest rank).")
    sent = ", ".join(f"{r['strategy']} {_fmt_bytes(r['bytes_per_step'])}" for r in records)
    model = (f"n = {_fmt_bytes(n)} of gradients, p = {p}; measured α = {alpha * 1e6:.1f} µs, "
             f"1/β = {1e-9 / beta if beta > 0 else math.inf:.2f} GB/s; "
             f"busiest rank sent per step: {sent}.")
    return [verdict, model]


def run(args: argparse.Namespace) -> int:
    """Run every strategy in one job; rank 0 prints the table and reading, writes --json."""
    from mpicomm.topology import Topology

    comm = metrics.world()
    rank0 = comm.Get_rank() == 0
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in names if s not in strategies()]
    try:
        if not names or bad:
            raise T.ConfigError(
                f"--strategies: unknown {', '.join(map(repr, bad)) or '(empty list)'}; "
                f"valid strategies: {', '.join(strategies())}"
            )
        cfg = T.TrainConfig.from_args(argparse.Namespace(**vars(args), strategy=names[0]))
        user_rpn = resolve_ranks_per_node(cfg.ranks_per_node)
    except (T.ConfigError, ValueError, TypeError) as exc:  # same on every rank
        if rank0:
            print(f"mpicomm compare: error: {exc}", flush=True)
        return 2
    if cfg.blas_threads:
        T.limit_blas_threads(cfg.blas_threads)
    topo = Topology(comm, ranks_per_node=cfg.ranks_per_node)
    topology = topo.describe()
    topo.free()

    records = []
    try:
        baseline = T.measure_baseline(cfg, comm) if args.baseline and comm.Get_size() > 1 else None
        for name in names:
            rpn = user_rpn if (user_rpn is not None or name != "hierarchical") else 2
            run_cfg = dataclasses.replace(cfg, strategy=name, ranks_per_node=rpn)
            records.append(T.run_training(run_cfg, comm, baseline_sps=baseline))
    except T.SetupError:
        return 2
    alpha, beta = metrics.probe_link(comm)
    if rank0:
        lines = reading(records, alpha, beta)
        print()
        print(T.format_table(records))
        print()
        for line in lines:
            print(line)
        if args.json:
            T.write_json(args.json, T.document(
                "compare", cfg, records, topology, strategies=names,
                baseline_samples_per_sec=baseline, link={"alpha_s": alpha, "beta_s_per_byte": beta},
                reading=lines,
            ))
            print(f"wrote {args.json}")
    return 0
