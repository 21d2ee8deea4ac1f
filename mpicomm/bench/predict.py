"""``python -m mpicomm model --predict``: allreduce time of each strategy at thousands of ranks
(the formulas and the table; the flags and the run: ``cli/predict.py``).

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

import dataclasses

from mpicomm.core.errors import ConfigError
from mpicomm.core.links import Link, parse_link
from mpicomm.core.units import fmt_us
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_predict import cluster_time, layout
from mpicomm.costmodel.formulas import ModelParams, predict

__all__ = ["predict_rows", "default_variants", "Variant", "format_rows", "busbw_factor",
           "summary", "format_summary", "parse_link_flag", "parse_link_text"]


def parse_link_text(text: str) -> Link:
    """Parse "latency,bandwidth" — e.g. "20us,1GB/s", "1.5us,400Gb/s" — into a ``Link``
    (the grammar of ``--inter-link``: ``mpicomm.core.links.parse_link``)."""
    spec = parse_link(text, "link")
    if spec is None:
        raise ConfigError("link '': expected 'latency,bandwidth' such as '20us,1GB/s'")
    return spec


def parse_link_flag(value) -> Link | None:
    """A link flag's value as a ``Link``: a string, or a parsed ``Link``."""
    if value is None or isinstance(value, Link):
        return value
    if isinstance(value, str):
        return parse_link_text(value)
    raise ConfigError(f"link {value!r}: expected 'latency,bandwidth' such as '20us,1GB/s'")


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
