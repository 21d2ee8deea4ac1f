"""``python -m mpicomm compare``: the same training run under every strategy, side by side.

    mpiexec -n 4 python -m mpicomm compare [--strategies native,ps,ring,hierarchical] [--json F]

In ONE mpiexec job, for each strategy in turn: the same seed, data, model and
flags go through ``train.run_training`` (the one loop). Then rank 0 prints one
table (throughput, step time, compute/comm share, bytes per step, final loss)
and a reading of who won and why in α-β-γ terms: ``bench.measure`` times
this job's links (ping-pong, ``np.add``) and ``costmodel.predict`` gives each
strategy's expected comm time, printed beside the measured one.

hierarchical uses ``--ranks-per-node`` (or ``MPICOMM_RANKS_PER_NODE``) when
given; otherwise the real nodes when the job spans several hosts, and simulated
nodes of 2 ranks when it runs on one host, so a laptop still exercises the
intra-/inter-node split. A 1-worker baseline (rank 0
alone, same per-worker batch) gives each strategy's scaling efficiency.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

from mpicomm import costmodel
from mpicomm.bench.measure import measure as measure_model
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.reducers import strategies
from mpicomm.train import loop as T
from mpicomm.train import metrics

__all__ = ["add_arguments", "run", "reading", "DEFAULT_STRATEGIES"]

DEFAULT_STRATEGIES = ("native", "ps", "ring", "hierarchical")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add --strategies, --no-baseline and the training flags."""
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help="comma-separated strategies to run, in order")
    p.add_argument("--no-baseline", dest="solo_baseline", action="store_false",
                   help="skip the 1-worker baseline (no scaling efficiency)")
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds over all strategies; each reports its median round")
    T.add_arguments(p, single_run=False)


def _fmt_bytes(n: float) -> str:
    for unit, k in (("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n:.0f} B"


def reading(records: list[dict], params: Any) -> list[str]:
    """Return a one-line verdict (who won and why, in α-β-γ terms) and a model-vs-measured line.

    Args:
        records: ``run_training`` records of one job (same model and ranks), each
            with ``predicted_comm_s`` from ``costmodel.predict``.
        params: the ``costmodel.ModelParams`` measured in this job.
    """
    ok = [r for r in records if r["samples_per_sec"] == r["samples_per_sec"]]  # drop NaN
    if not ok:
        return ["no strategy completed a timed step"]
    ranked = sorted(ok, key=lambda r: -r["samples_per_sec"])
    win = ranked[0]
    p, n = win["ranks"], win["grad_bytes"]
    link = params.flat_link()
    latency = 2 * (p - 1) * link.alpha  # the ring's two terms, at its message size n/p
    bandwidth = 2 * (p - 1) / p * n * link.beta_at(n / p)
    text = f"{win['strategy']} won ({win['samples_per_sec']:,.0f} samples/s"
    if len(ranked) > 1:
        margin = win["samples_per_sec"] / ranked[1]["samples_per_sec"]
        spread = win["step_time_p90_s"] / win["step_time_median_s"]
        text += f", {margin:.2f}x {ranked[1]['strategy']}"
        if margin < spread:  # the lead is smaller than the winner's own step-time spread
            text += f"; a tie within the step-time spread, p90/median = {spread:.2f}"
    text += "). "
    if win["comm_share"] < 0.2:
        text += (f"Compute-bound: comm is {100 * win['comm_share']:.0f}% of its step, so the "
                 "strategies differ by little. ")
    if bandwidth >= latency:
        text += (f"Comm is bandwidth-bound at n = {_fmt_bytes(n)}: the ring's bytes term "
                 f"2(p-1)/p·nβ = {bandwidth * 1e6:.0f} µs outweighs its latency term "
                 f"2(p-1)α = {latency * 1e6:.0f} µs, so bytes through the busiest link decide: "
                 f"a ring/hierarchical rank sends 2(p-1)/p·n = {_fmt_bytes(2 * (p - 1) * n / p)}"
                 " per step")
        ps = next((r for r in records if r["strategy"] == "ps"), None)
        if ps is not None:
            S, W = len(ps["reducer"].get("servers") or [0]), ps["workers"]
            busiest = (W - (0 if ps["reducer"].get("dedicated") else 1)) * n / S
            text += (f", a ps server (S = {S}) sends {'(W-1)' if busiest < W * n / S else 'W'}"
                     f"·n/S = {_fmt_bytes(busiest)} and receives as much through one link")
        text += "."
    else:
        text += (f"Comm is latency-bound at n = {_fmt_bytes(n)}: the ring's latency term "
                 f"2(p-1)α = {latency * 1e6:.0f} µs outweighs its bytes term "
                 f"2(p-1)/p·nβ = {bandwidth * 1e6:.0f} µs, so the number of message rounds "
                 "decides (2(p-1) for ring, lg p for recursive doubling).")
    pairs = [(r["strategy"], r["comm_s"], r.get("predicted_comm_s")) for r in records]
    shown = ", ".join(f"{s} {m * 1e3:.2f}/{x * 1e3:.2f}" for s, m, x in pairs if x)
    line2 = (f"comm ms per step, measured/model: {shown} (α = {link.alpha * 1e6:.1f} µs, "
             f"1/β(n/p) = {1e-9 / max(link.beta_at(n / p), 1e-300):.2f} GB/s).")
    ratios = sorted(m / x for _, m, x in pairs if x)
    if ratios and ratios[len(ratios) // 2] > 2:
        line2 += (f" Measured runs {ratios[0]:.1f}-{ratios[-1]:.1f}x the model: time in "
                  "allreduce also holds waiting for the slowest rank's compute and, with more "
                  "ranks than cores, for a core; α-β sees neither.")
    return [text, line2]


def _split_name(name: str) -> tuple[str, str | None]:
    """``ps:async`` -> ("ps", "async") (the real parameter server); ``ring`` -> ("ring", None)."""
    base, _, mode = name.partition(":")
    return base, mode or None


def _run_config(cfg: Any, name: str, bound: int) -> Any:
    """The run's config for a --strategies entry (``ps:ssp`` takes --staleness); checked."""
    base, mode = _split_name(name)
    return dataclasses.replace(cfg, strategy=base, ps_mode=mode,
                               staleness=bound if mode == "ssp" else 0)


def _median_run(recs: list[dict], baseline: float | None) -> dict:
    """Return the record of the median-throughput run, with every run's samples/s and spread."""
    sps = [r["samples_per_sec"] for r in recs]
    order = sorted(range(len(recs)), key=lambda i: sps[i])
    rec = dict(recs[order[(len(recs) - 1) // 2]])
    rec["repeats"] = len(recs)
    rec["samples_per_sec_runs"] = sps
    rec["samples_per_sec_spread"] = (max(sps) - min(sps)) / rec["samples_per_sec"]
    rec["baseline_samples_per_sec"] = baseline
    rec["scaling_efficiency"] = (rec["samples_per_sec"] / (rec["workers"] * baseline)
                                 if baseline else None)
    if len({r["param_crc32"] for r in recs}) > 1:  # same seed, same data: same result
        rec["params_in_sync"] = False
    return rec


def run(args: argparse.Namespace) -> int:
    """Run every strategy in one job; rank 0 prints the table and reading, writes --json."""
    from mpicomm.core.topology import Topology

    comm = metrics.world()
    rank0 = comm.Get_rank() == 0
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in names if _split_name(s)[0] not in strategies()
           or (_split_name(s)[1] is not None and _split_name(s)[0] != "ps")]
    try:
        if args.repeats < 1:
            raise T.ConfigError(f"--repeats must be >= 1, got {args.repeats}")
        if not names or bad:
            raise T.ConfigError(
                f"--strategies: unknown {', '.join(map(repr, bad)) or '(empty list)'}; "
                f"valid strategies: {', '.join(strategies())}"
            )
        flags = {**vars(args), "staleness": 0, "ps_mode": None}  # per name: ps:MODE
        cfg = T.TrainConfig.from_args(argparse.Namespace(**flags,
                                                         strategy=_split_name(names[0])[0]))
        run_cfgs = {name: _run_config(cfg, name, getattr(args, "staleness", 0)) for name in names}
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
    if user_rpn is not None:
        hier_rpn = user_rpn
    else:
        hier_rpn = None if topo.num_nodes > 1 else 2
    topo.free()

    # Rounds interleave the strategies, so a burst of load on a shared host hits them
    # alike; each strategy reports its median-throughput round and the spread.
    runs: dict[str, list[dict]] = {name: [] for name in names}
    baselines = []
    try:
        for rnd in range(args.repeats):
            if args.solo_baseline and comm.Get_size() > 1:
                baselines.append(T.measure_baseline(cfg, comm))
            for name in names:
                rpn = hier_rpn if name == "hierarchical" else user_rpn
                run_cfg = dataclasses.replace(run_cfgs[name], ranks_per_node=rpn)
                runs[name].append(T.run_training(run_cfg, comm, verbose=rnd == 0))
    except T.SetupError:
        return 2
    baseline = float(np.median(baselines)) if baselines else None
    records = [_median_run(runs[name], baseline) for name in names]
    # the α-β-γ parameters of this job's links, and each strategy's predicted comm time
    model = measure_model(comm, max_bytes=records[0]["grad_bytes"], ranks_per_node=hier_rpn)
    for name, rec in zip(names, records, strict=True):
        opts = {**cfg.reducer_options(), "ranks_per_node": hier_rpn}
        rec["predicted_comm_s"] = (None if ":" in name else costmodel.predict(
            name, rec["ranks"], rec["grad_bytes"], model, opts))
    if rank0:
        lines = reading(records, model)
        print()
        print(T.format_table(records))
        print()
        for line in lines:
            print(line)
        if args.json:
            T.write_json(args.json, T.document(
                "compare", cfg, records, topology, strategies=names, repeats=args.repeats,
                baseline_samples_per_sec=baseline, cost_model=dataclasses.asdict(model),
                reading=lines,
            ))
            print(f"wrote {args.json}")
    return 0
