"""``python -m mpicomm model --predict``: allreduce time of each strategy at thousands of ranks.

    python -m mpicomm model --predict --profile dgx-h100-ib400 --ranks 8,64,1024 -b 1M -e 256M -f 16
    python -m mpicomm model --predict --ranks 8,64,1024 --inter-link 5us,25GB/s \\
        --intra-link 2us,300GB/s --ranks-per-node 8 -b 64M -e 64M --compute-ms 120 --json out.json

No MPI traffic: the α-β-γ formulas of ``mpicomm.costmodel.formulas`` evaluated for
a cluster that is not here. Per rank count p, gradient size n and strategy:

1. links: a named profile (``mpicomm.bench.profiles``), explicit ``--inter-link`` /
   ``--intra-link`` ("α,bandwidth", e.g. "5us,25GB/s"), or ``this-machine`` (measured);
2. layout: L = min(ranks per node, p) ranks per node, m = ⌈p/L⌉ nodes; a flat
   algorithm's steps cross the inter-node link when m > 1 (the slowest link paces it);
3. NIC sharing: when L ranks share fewer NICs and all of them cross at once
   (hierarchical reduce-scatter, recursive doubling, ps with S > 1), each gets
   nics/L of a NIC: β_inter × L/nics. A flat ring crosses each node boundary with
   one flow, the leader variant with one leader, a single server through its own NIC;
4. t = ``formulas.predict``; the latency part is the same formula with β = γ = 0;
5. busbw = n/t × 2(p-1)/p; step = compute + t (no overlap), ``overlap`` bound max(compute, t);
   weak-scaling efficiency = compute / step.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from mpicomm.bench.profiles import MEASURED, Level, Profile, calibrate, measured_params, profile
from mpicomm.core.errors import ConfigError
from mpicomm.core.links import parse_link
from mpicomm.costmodel.formulas import LinkModel, ModelParams, predict

__all__ = ["add_arguments", "run_predict", "predict_rows", "default_variants", "Variant",
           "format_rows", "busbw_factor"]

_SPAN = 1 << 40  # β and γ of a fixed profile hold at every size


def _parse_link(text: str) -> Level:
    """Parse "latency,bandwidth" — e.g. "20us,1GB/s", "1.5us,400Gb/s" — into a ``Level``.

    The grammar of emulated links (``mpicomm.core.links.parse_link``), so one
    string describes a link to both.
    """
    spec = parse_link(text, "link")
    if spec is None:
        raise ConfigError("link '': expected 'latency,bandwidth' such as '20us,1GB/s'")
    return Level(spec.latency, spec.bandwidth)


def _level(value) -> Level | None:
    """A link flag's value as a ``Level``: a string, or a parsed object with α and bandwidth."""
    if value is None or isinstance(value, Level):
        return value
    if isinstance(value, str):
        return _parse_link(value)
    alpha = getattr(value, "alpha_s", getattr(value, "alpha", None))
    rate = getattr(value, "bytes_per_s", getattr(value, "bandwidth", None))
    if alpha is None or rate is None:
        raise ConfigError(f"link {value!r}: cannot read latency and bandwidth from it")
    return Level(float(alpha), float(rate))


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
    shares_nics: bool  # do all L ranks of a node cross the inter link at once?

    def options_at(self, p: int) -> dict:
        o = dict(self.options)
        if o.get("servers") == "p":
            o["servers"] = p
        return o


def default_variants() -> list[Variant]:
    """Every strategy, ps with one server and with S = p, hierarchical both variants."""
    return [
        Variant("native", "native", {}, True),
        Variant("ring", "ring", {}, False),
        Variant("recursive_doubling", "recursive_doubling", {}, True),
        Variant("auto", "auto", {}, True),
        Variant("hierarchical", "hierarchical", {"variant": "reduce_scatter"}, True),
        Variant("hierarchical(leader)", "hierarchical", {"variant": "leader"}, False),
        Variant("ps(S=1)", "ps", {"servers": 1}, False),
        Variant("ps(S=p)", "ps", {"servers": "p"}, True),
    ]


def _chosen_variants(args: argparse.Namespace) -> list[Variant]:
    if not getattr(args, "strategies", None):
        return default_variants()
    from mpicomm.reducers import strategies

    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in names if s not in strategies()]
    if bad or not names:
        raise ConfigError(f"unknown strategy {', '.join(map(repr, bad)) or '(none)'}; valid "
                          f"strategies: {', '.join(strategies())}")
    opts = {"servers": args.servers, "dedicated": args.dedicated, "variant": args.variant}
    return [Variant(n, n, opts, not (n == "ring" or (n == "ps" and args.servers == 1)
                                     or (n == "hierarchical" and args.variant == "leader")))
            for n in names]


# ---------------------------------------------------------------- params
def _fixed_link(level: Level, share: float = 1.0, bytes_too: bool = True) -> LinkModel:
    b = level.beta * share if bytes_too else 0.0
    return LinkModel(level.alpha_s, [1, _SPAN], [b, b], b, None, [b, b], level.alpha_s, b)


def _profile_params(prof: Profile, p: int, share: bool, bytes_too: bool = True) -> ModelParams:
    local = max(1, min(prof.ranks_per_node, p))
    factor = max(1.0, local / prof.nics_per_node) if share and p > local else 1.0
    g = prof.gamma_s_per_byte if bytes_too else 0.0
    return ModelParams(_fixed_link(prof.intra, 1.0, bytes_too),
                       _fixed_link(prof.inter, factor, bytes_too),
                       [1, _SPAN], [g, g], -(-p // local), local)


def _zero_bytes(link: LinkModel) -> LinkModel:
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


def predict_rows(source: Profile | ModelParams, ranks: list[int], sizes: list[int],
                 variants: list[Variant] | None = None, compute_s: float = 0.0,
                 ranks_per_node: int | None = None) -> list[dict]:
    """Predicted rows for every rank count, size and strategy variant; pure (no MPI).

    Args:
        source: a ``Profile`` (fixed α, bandwidth, γ) or measured ``ModelParams``.
        ranks, sizes: rank counts p and gradient sizes n in bytes.
        compute_s: compute time of one step (for step time and efficiency).
        ranks_per_node: measured params only: L (default: the file's layout).
    """
    rows = []
    for p in ranks:
        for n in sizes:
            for v in variants or default_variants():
                opts = v.options_at(p)
                if isinstance(source, Profile):
                    full, lat = (_profile_params(source, p, v.shares_nics, b)
                                 for b in (True, False))
                else:
                    rpn = ranks_per_node or source.local_size
                    full, lat = (_measured_at(source, p, rpn, b) for b in (True, False))
                opts.setdefault("ranks_per_node", full.local_size)
                t = predict(v.strategy, p, n, full, opts)
                t_lat = predict(v.strategy, p, n, lat, opts)
                if t is None:
                    continue
                rows.append(_row(v.label, p, n, full, t, t_lat or 0.0, compute_s))
    return rows


def _row(label: str, p: int, n: int, params: ModelParams, t: float, t_lat: float,
         compute_s: float) -> dict:
    algbw = n / t / 1e9 if t > 0 else None
    step = compute_s + t
    return {"strategy": label, "ranks": p, "nodes": params.num_nodes,
            "ranks_per_node": params.local_size, "bytes": n,
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
    g.add_argument("--profile", default=None,
                   help="cluster profile: dgx-h100-ib400, dgx-h100-ib200, ethernet-25g, "
                        "this-machine (default dgx-h100-ib400 unless --inter-link is given)")
    known = p._option_string_actions  # the emulated-link flags may come with the bench flags
    for flag, what in (("--inter-link", "inter-node"), ("--intra-link", "intra-node")):
        if flag not in known:
            g.add_argument(flag, default=None, metavar="ALPHA,BW",
                           help=f"{what} link, e.g. 5us,25GB/s (overrides the profile's)")
    g.add_argument("--nics-per-node", type=int, default=None,
                   help="NICs a node's ranks share (default: the profile's; explicit links: 1)")
    g.add_argument("--gamma-rate", default="1000GB/s",
                   help="explicit links: add rate, bytes/s of γ = 1/rate (default: GPU HBM)")
    g.add_argument("--compute-ms", type=float, default=0.0,
                   help="compute time per step (ms): step time and scaling efficiency")
    g.add_argument("--params", default=None, metavar="FILE",
                   help="this-machine: a `model --json` file with measured params")
    g.add_argument("--calibrate", action="store_true",
                   help="this-machine: measure afresh (2 ranks under mpiexec) before predicting")


def _source(args: argparse.Namespace) -> tuple[Profile | ModelParams, str]:
    """The profile or measured parameters the flags describe, and a line saying which."""
    inter, intra = _level(getattr(args, "inter_link", None)), _level(getattr(args, "intra_link",
                                                                             None))
    name = args.profile or (None if inter else "dgx-h100-ib400")
    if name == MEASURED:
        path = calibrate() if args.calibrate else args.params
        params, used = measured_params(path)
        return params, f"this-machine: parameters measured by `mpicomm model`, from {used}"
    if name is not None:
        prof = profile(name)
    else:
        rate = _parse_link(f"0s,{args.gamma_rate}").bytes_per_s
        prof = Profile("explicit", args.ranks_per_node or (8 if intra else 1), intra or inter,
                       inter, 1.0 / rate, 1, "links from the command line")
    changes = {k: v for k, v in (("inter", inter), ("intra", intra),
                                 ("ranks_per_node", args.ranks_per_node),
                                 ("nics_per_node", args.nics_per_node)) if v is not None}
    if any(v < 1 for k, v in changes.items() if k.endswith("per_node")):
        raise ConfigError("--ranks-per-node and --nics-per-node must be >= 1")
    prof = dataclasses.replace(prof, **changes)
    return prof, f"profile {prof.name}: {prof.source}"


def run_predict(args: argparse.Namespace) -> int:
    """Print (and with --json write) the predicted table; one process, no MPI messages."""
    from mpicomm.bench.harness import size_list, write_records

    if args.compute_ms < 0:
        raise ConfigError(f"--compute-ms must be >= 0, got {args.compute_ms}")
    try:
        sizes = size_list(args.minbytes, args.maxbytes, args.stepfactor)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    source, described = _source(args)
    variants = _chosen_variants(args)
    rows = predict_rows(source, args.ranks, sizes, variants, args.compute_ms / 1e3,
                        args.ranks_per_node)
    print(f"# mpicomm model --predict: {described}")
    if isinstance(source, Profile):
        print(f"# intra {_fmt_level(source.intra)}, inter {_fmt_level(source.inter)} "
              f"({source.nics_per_node} NIC(s)/node), {source.ranks_per_node} ranks/node, "
              f"1/gamma {1e-9 / source.gamma_s_per_byte:.0f} GB/s")
    print(format_rows(rows))
    meta = {"command": "predict", "argv": sys.argv, "described": described,
            "profile": (dataclasses.asdict(source) if isinstance(source, Profile)
                        else {"name": MEASURED, "params": dataclasses.asdict(source)}),
            "ranks": args.ranks, "sizes": sizes, "compute_ms": args.compute_ms,
            "strategies": [v.label for v in variants]}
    if args.json:
        write_records(rows, meta, args.json, getattr(args, "csv", None))
    return 0


def _fmt_level(level: Level) -> str:
    return f"alpha {level.alpha_s * 1e6:g} us, {level.bytes_per_s / 1e9:g} GB/s"


def _fmt_time(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else \
        f"{us:.3g} us"


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
                     f"{_fmt_time(r['predicted_us']):>10} {100 * share:>6.0f}% {bus:>9} "
                     f"{r['step_time_ms']:>10.3f} {eff:>5}")
    return "\n".join(lines)
