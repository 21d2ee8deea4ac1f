"""``python -m mpicomm model --predict``: allreduce time of each strategy at thousands of ranks.

    python -m mpicomm model --predict --profile dgx-h100-ib400 --ranks 8,64,1024 -b 1M -e 256M -f 16
    python -m mpicomm model --predict --ranks 8,64,1024 --inter-link 5us,25GB/s \\
        --intra-link 2us,300GB/s --ranks-per-node 8 -b 64M -e 64M --compute-ms 120 --json out.json

No MPI traffic: formulas evaluated for a cluster that is not here. Per rank count p,
gradient size n and strategy:

1. cluster: a named profile (``mpicomm.costmodel.profiles``: links with efficiencies,
   per-call α, NICs per node, a reducing switch), explicit ``--inter-link`` /
   ``--intra-link`` ("α,bandwidth", e.g. "5us,25GB/s", at line rate), or ``this-machine``
   (α, β(m), γ(m) measured here);
2. layout: L = min(ranks per node, p) ranks per node, m = ⌈p/L⌉ nodes;
3. t = ``costmodel.cluster_predict.cluster_time`` for a cluster (pipelined formulas, NIC
   sharing per strategy, see there), ``costmodel.formulas.predict`` for measured params
   (step-by-step, as this host runs them); the latency part is the same formula at n = 0
   (cluster) or with β = γ = 0 (measured);
4. busbw = n/t × 2(p-1)/p; step = compute + t (no overlap), ``overlap`` bound max(compute, t);
   weak-scaling efficiency = compute / step;
5. ``summary``: the fastest strategy per (p, n), printed under the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from mpicomm.bench import step_predict
from mpicomm.bench.profiles import MEASURED, calibrate, measured_params
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import add_cluster_flags, is_given
from mpicomm.core.links import Link, parse_link
from mpicomm.core.units import fmt_us
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_predict import cluster_time, layout
from mpicomm.costmodel.formulas import ModelParams, predict
from mpicomm.costmodel.profiles import build_cluster

__all__ = ["add_arguments", "run_predict", "predict_rows", "default_variants", "Variant",
           "format_rows", "busbw_factor", "summary", "format_summary"]


def _parse_link(text: str) -> Link:
    """Parse "latency,bandwidth" — e.g. "20us,1GB/s", "1.5us,400Gb/s" — into a ``Link``
    (the grammar of ``--inter-link``: ``mpicomm.core.links.parse_link``)."""
    spec = parse_link(text, "link")
    if spec is None:
        raise ConfigError("link '': expected 'latency,bandwidth' such as '20us,1GB/s'")
    return spec


def _level(value) -> Link | None:
    """A link flag's value as a ``Link``: a string, or a parsed ``Link``."""
    if value is None or isinstance(value, Link):
        return value
    if isinstance(value, str):
        return _parse_link(value)
    raise ConfigError(f"link {value!r}: expected 'latency,bandwidth' such as '20us,1GB/s'")


def _parse_ranks(text: str) -> list[int]:
    try:
        ranks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        ranks = []
    if not ranks or min(ranks) < 1:
        raise argparse.ArgumentTypeError(f"--ranks {text!r}: expected rank counts >= 1 such as "
                                         "8,64,1024")
    return sorted(set(ranks))


# ------------------------------------------------------------ strategies
@dataclasses.dataclass(frozen=True)
class Variant:
    """A strategy as predicted: a label, the registry name, options (``servers="p"``: S = p)."""

    label: str
    strategy: str
    options: dict
    shares_nics: bool = False  # informational: the cluster model decides NIC sharing itself
    multichannel_only: bool = False  # shown only where the default ring has several channels

    def options_at(self, p: int) -> dict:
        o = dict(self.options)
        if o.get("servers") == "p":
            o["servers"] = p
        return o


def default_variants() -> list[Variant]:
    """Every strategy: the ring (the cluster's default channels: one per NIC on a profile)
    and, where that is several, the single-channel ring, the tree, hierarchical
    (both variants, and over a reducing switch where the cluster has one), ps with one server
    and with S = p. A variant without a formula for a source is left out of its rows."""
    return [
        Variant("native", "native", {}, True),
        Variant("ring", "ring", {}, False),  # the cluster's default: one channel per NIC
        Variant("ring(channels=1)", "ring", {"channels": 1}, False, multichannel_only=True),
        Variant("tree", "tree", {}, False),
        Variant("recursive_doubling", "recursive_doubling", {}, True),
        Variant("auto", "auto", {}, True),
        Variant("hierarchical", "hierarchical", {"variant": "reduce_scatter"}, True),
        Variant("hierarchical(leader)", "hierarchical", {"variant": "leader"}, False),
        Variant("hierarchical(nvls)", "hierarchical", {"variant": "reduce_scatter",
                                                       "in_network": True}, False),
        Variant("ps(S=1)", "ps", {"servers": 1}, False),
        Variant("ps(S=p)", "ps", {"servers": "p"}, True),
    ]


def _given_channels(args: argparse.Namespace) -> int | None:
    """``--channels`` when the command line gives it; None: the cluster's default ring (one
    channel per NIC on a profile, one on link flags)."""
    value = getattr(args, "channels", None)
    return value if is_given(args, "channels", value not in (None, 1)) else None


def _chosen_variants(args: argparse.Namespace) -> list[Variant]:
    if not getattr(args, "strategies", None):
        return default_variants()
    from mpicomm.reducers import strategies

    names = list(dict.fromkeys(s.strip() for s in args.strategies.split(",") if s.strip()))
    bad = [s for s in names if s not in strategies()]
    if bad or not names:
        raise ConfigError(f"unknown strategy {', '.join(map(repr, bad)) or '(none)'}; valid "
                          f"strategies: {', '.join(strategies())}")
    opts = {"servers": args.servers, "dedicated": args.dedicated, "variant": args.variant,
            "channels": _given_channels(args)}
    return [Variant(n, n, opts, not (n == "ring" or (n == "ps" and args.servers == 1)
                                     or (n == "hierarchical" and args.variant == "leader")))
            for n in names]


# ---------------------------------------------------------------- params
def _zero_bytes(link):
    z = [0.0] * len(link.sizes)
    return dataclasses.replace(link, beta=z, beta_x=z, beta_fit=0.0, beta_x_fit=0.0)


def _measured_at(params: ModelParams, p: int, rpn: int, bytes_too: bool) -> ModelParams:
    local = max(1, min(rpn, p))
    out = dataclasses.replace(params, num_nodes=-(-p // local), local_size=local)
    if not bytes_too:
        out = dataclasses.replace(out, intra=_zero_bytes(out.intra), inter=_zero_bytes(out.inter),
                                  gamma=[0.0] * len(out.gamma))
    return out


def busbw_factor(p: int) -> float:
    """busbw = algbw × 2(p-1)/p for allreduce (1 at p = 1: nothing moves, the factor is moot)."""
    return 2 * (p - 1) / p if p > 1 else 1.0


def predict_rows(source: Cluster | ModelParams, ranks: list[int], sizes: list[int],
                 variants: list[Variant] | None = None, compute_s: float = 0.0,
                 ranks_per_node: int | None = None) -> list[dict]:
    """Predicted rows for every rank count, size and strategy variant; pure (no MPI).

    Args:
        source: a ``Cluster`` (a named profile or explicit links) or measured ``ModelParams``.
        ranks, sizes: rank counts p and gradient sizes n in bytes.
        compute_s: compute time of one step (for step time and efficiency).
        ranks_per_node: measured params only: L (default: the file's layout).
    """
    rows = []
    for p in ranks:
        for n in sizes:
            for v in variants or default_variants():
                opts = v.options_at(p)
                if v.multichannel_only and _channel_count(source) == 1:
                    continue
                if isinstance(source, Cluster):
                    local, nodes = layout(p, source, opts)
                    t = cluster_time(v.strategy, p, n, source, opts)
                    t_lat = cluster_time(v.strategy, p, 0, source, opts)
                else:
                    rpn = ranks_per_node or source.local_size
                    full, lat = (_measured_at(source, p, rpn, b) for b in (True, False))
                    local, nodes = full.local_size, full.num_nodes
                    opts.setdefault("ranks_per_node", local)
                    t = predict(v.strategy, p, n, full, opts)
                    t_lat = predict(v.strategy, p, n, lat, opts)
                if t is None:
                    continue
                rows.append(_row(v.label, p, n, nodes, local, t, t_lat or 0.0, compute_s))
    return rows


def _channel_count(source: Cluster | ModelParams) -> int:
    return source.channel_count if isinstance(source, Cluster) else 1


def summary(rows: list[dict]) -> list[dict]:
    """The fastest strategy per (ranks, bytes): its row, and the runner-up's label and ratio."""
    groups: dict[tuple[int, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["ranks"], r["bytes"]), []).append(r)
    out = []
    for (p, n), group in sorted(groups.items()):
        ranked = sorted(group, key=lambda r: r["predicted_us"])
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        out.append({"ranks": p, "bytes": n, "strategy": best["strategy"],
                    "predicted_us": best["predicted_us"], "busbw_gbps": best["busbw_gbps"],
                    "runner_up": second["strategy"] if second else None,
                    "runner_up_ratio": (second["predicted_us"] / best["predicted_us"]
                                        if second and best["predicted_us"] > 0 else None)})
    return out


def format_summary(best: list[dict]) -> str:
    """One line per (ranks, bytes): the fastest strategy, its time, and by how much it wins."""
    lines = ["# fastest predicted strategy per (ranks, size):"]
    for b in best:
        runner = ("" if not b["runner_up"] else
                  f"; a tie with {b['runner_up']} (nothing moves)"  # 0 s each: one rank
                  if b["runner_up_ratio"] is None else
                  f"; next {b['runner_up']} {b['runner_up_ratio']:.2f}x slower")
        lines.append(f"#   {b['ranks']:>6} ranks {b['bytes']:>11} B: {b['strategy']} "
                     f"{fmt_us(b['predicted_us'])}{runner}")
    return "\n".join(lines)


def _row(label: str, p: int, n: int, nodes: int, local: int, t: float, t_lat: float,
         compute_s: float) -> dict:
    algbw = n / t / 1e9 if t > 0 else None
    step = compute_s + t
    return {"strategy": label, "ranks": p, "nodes": nodes,
            "ranks_per_node": local, "bytes": n,
            "predicted_us": t * 1e6, "latency_us": t_lat * 1e6,
            "bandwidth_us": max(t - t_lat, 0.0) * 1e6,
            "algbw_gbps": algbw, "busbw_gbps": None if algbw is None else algbw * busbw_factor(p),
            "compute_ms": compute_s * 1e3, "step_time_ms": step * 1e3,
            "step_time_overlap_ms": max(compute_s, t) * 1e3,
            "efficiency": compute_s / step if compute_s > 0 else None}


# --------------------------------------------------------------- command
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The --predict flags (beside ``model``'s bench flags: -b -e -f --strategies --json ...)."""
    g = p.add_argument_group("prediction (--predict: formulas only, no MPI traffic)")
    g.add_argument("--predict", action="store_true",
                   help="predict for a cluster that is not here instead of measuring")
    g.add_argument("--ranks", type=_parse_ranks, default=[8, 64, 1024],
                   help="rank counts to predict, e.g. 8,64,1024 (default)")
    add_cluster_flags(p)  # --profile (the one cluster-flag group): default dgx-h100-ib400
    known = p._option_string_actions  # the emulated-link flags may come with the bench flags
    for flag, what in (("--inter-link", "inter-node"), ("--intra-link", "intra-node")):
        if flag not in known:
            g.add_argument(flag, default=None, metavar="ALPHA,BW",
                           help=f"{what} link, e.g. 5us,25GB/s (overrides the profile's)")
    if "--nics-per-node" not in known:  # the reducer options' flag, when model has them
        g.add_argument("--nics-per-node", type=int, default=None,
                       help="NICs a node's ranks share (default: the profile's; explicit "
                            "links: one per rank)")
    g.add_argument("--gamma-rate", default="1000GB/s",
                   help="explicit links: add rate, bytes/s of γ = 1/rate (default: GPU HBM)")
    g.add_argument("--table", action="store_true",
                   help="print every (ranks, size, strategy) row and the per-size winners "
                        "(default: one summary line per rank count)")
    g.add_argument("--compute-ms", type=float, default=0.0,
                   help="compute time per step (ms): step time and scaling efficiency")
    g.add_argument("--params", default=None, metavar="FILE",
                   help="this-machine: a `model --json` file with measured params")
    g.add_argument("--calibrate", action="store_true",
                   help="this-machine: measure afresh (2 ranks under mpiexec) before predicting")
    step_predict.add_arguments(p)  # --model M: whole steps (mpicomm.bench.step_predict)


def _source(args: argparse.Namespace) -> tuple[Cluster | ModelParams, str]:
    """The cluster or measured parameters the flags describe, and a line saying which: the
    one ``build_cluster`` every command uses (so the same flags model the same cluster)."""
    inter, intra = _level(getattr(args, "inter_link", None)), _level(getattr(args, "intra_link",
                                                                             None))
    name = args.profile or (None if inter else "dgx-h100-ib400")
    if name == MEASURED:
        path = calibrate() if args.calibrate else args.params
        params, used = measured_params(path)
        return params, f"this-machine: parameters measured by `mpicomm model`, from {used}"
    gamma = None
    if name is None:
        try:
            gamma = 1.0 / _parse_link(f"0s,{args.gamma_rate}").bytes_per_s
        except ConfigError:  # the link's message would name a link the user never wrote
            raise ConfigError(f"--gamma-rate {args.gamma_rate!r}: expected an add rate > 0 "
                              "such as 1000GB/s or 50GB/s") from None
    rpn = args.ranks_per_node or (None if name else (8 if intra else 1))
    channels = _given_channels(args) if getattr(args, "strategies", None) else None
    prof = build_cluster(name, ranks_per_node=rpn, inter=inter, intra=intra,
                         nics_per_node=args.nics_per_node, gamma_s_per_byte=gamma,
                         channels=None if channels in (None, 1) else channels)
    return prof, f"profile {prof.name}: {prof.source}"


def run_predict(args: argparse.Namespace) -> int:
    """Print (and with --json write) the predicted table; one process, no MPI messages."""
    from mpicomm.analysis.prediction import best_lines
    from mpicomm.bench.harness import size_list, write_records

    if not 0 <= args.compute_ms < math.inf:  # nan and inf: every step and efficiency nan
        raise ConfigError(f"--compute-ms must be a number >= 0, got {args.compute_ms}")
    try:
        sizes = size_list(args.minbytes, args.maxbytes, args.stepfactor)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    source, described = _source(args)
    variants = _chosen_variants(args)
    if getattr(args, "model", None):
        return step_predict.run_step_predict(args, source, described, variants)
    rows = predict_rows(source, args.ranks, sizes, variants, args.compute_ms / 1e3,
                        args.ranks_per_node)
    if isinstance(source, Cluster):
        print(f"# {source.line()}")  # the line every command prints for this cluster
    print(f"# mpicomm model --predict: {described}")
    if isinstance(source, Cluster):
        print(f"# 1/gamma {1e-9 / source.gamma_s_per_byte:.0f} GB/s"
              + ("" if source.channel_count == 1 else
                 f"; ring: {source.channel_count} channels (one per NIC), ring(channels=1): "
                 "the single-channel ring"))
    best = summary(rows)
    if getattr(args, "table", False):
        print(format_rows(rows))
        print(format_summary(best))
    else:  # hundreds of rows answer one question: which strategy where
        print("# fastest predicted strategy (--table: every row; --json: the full table):")
        for line in best_lines(rows):
            print(f"#   {line}")
    meta = {"command": "predict", "argv": sys.argv, "described": described,
            "cluster": source.as_dict() if isinstance(source, Cluster) else None,
            "profile": (dataclasses.asdict(source) if isinstance(source, Cluster)
                        else {"name": MEASURED, "params": dataclasses.asdict(source)}),
            "ranks": args.ranks, "sizes": sizes, "compute_ms": args.compute_ms,
            "strategies": [v.label for v in variants], "summary": best}
    if args.json or getattr(args, "csv", None):
        write_records(rows, meta, args.json, getattr(args, "csv", None))
    return 0


def format_rows(rows: list[dict]) -> str:
    """The predicted table: one line per rank count, size and strategy."""
    lines = [f"#{'ranks':>6} {'nodes':>5} {'size (B)':>11} {'strategy':>21} {'time':>10} "
             f"{'latency':>7} {'busbw':>9} {'step':>10} {'eff':>5}",
             f"#{'':>6} {'':>5} {'':>11} {'':>21} {'':>10} {'share':>7} {'(GB/s)':>9} "
             f"{'(ms)':>10} {'':>5}"]
    for r in rows:
        share = r["latency_us"] / r["predicted_us"] if r["predicted_us"] else 0.0
        bus = "-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:.2f}"
        eff = "-" if r["efficiency"] is None else f"{r['efficiency']:.2f}"
        lines.append(f"{r['ranks']:>7} {r['nodes']:>5} {r['bytes']:>11} {r['strategy']:>21} "
                     f"{fmt_us(r['predicted_us']):>10} {100 * share:>6.0f}% {bus:>9} "
                     f"{r['step_time_ms']:>10.3f} {eff:>5}")
    return "\n".join(lines)
