"""``python -m mpicomm model --predict``: the flags, the cluster they describe, the run.

No MPI traffic: the formulas (``bench.predict``) for a cluster that is not here; with
``--model`` whole training steps (``cli/predict_step.py``, ``bench.step_predict``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from mpicomm.bench.predict import (
    Variant,
    default_variants,
    format_rows,
    format_summary,
    parse_link_flag,
    parse_link_text,
    predict_rows,
    summary,
)
from mpicomm.bench.profiles import MEASURED, calibrate, measured_params
from mpicomm.cli import predict_step
from mpicomm.cli.flags import add_cluster_flags
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import is_given
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.formulas import ModelParams
from mpicomm.costmodel.profiles import build_cluster

__all__ = ["add_arguments", "run_predict", "cluster_source"]


def _parse_ranks(text: str) -> list[int]:
    try:
        ranks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        ranks = []
    if not ranks or min(ranks) < 1:
        raise argparse.ArgumentTypeError(f"--ranks {text!r}: expected rank counts >= 1 such as "
                                         "8,64,1024")
    return sorted(set(ranks))


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
    g.add_argument("--gamma-rate", default=predict_step.GAMMA_RATE_DEFAULT,
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
    predict_step.add_arguments(p)  # --model M: whole steps (cli/predict_step.py)


def cluster_source(args: argparse.Namespace) -> tuple[Cluster | ModelParams, str]:
    """The cluster or measured parameters the flags describe, and a line saying which: the
    one ``build_cluster`` every command uses (so the same flags model the same cluster)."""
    inter = parse_link_flag(getattr(args, "inter_link", None))
    intra = parse_link_flag(getattr(args, "intra_link", None))
    name = args.profile or (None if inter else "dgx-h100-ib400")
    if name == MEASURED:
        path = calibrate() if args.calibrate else args.params
        params, used = measured_params(path)
        return params, f"this-machine: parameters measured by `mpicomm model`, from {used}"
    gamma = None
    if name is None:
        try:
            gamma = 1.0 / parse_link_text(f"0s,{args.gamma_rate}").bytes_per_s
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
    source, described = cluster_source(args)
    variants = _chosen_variants(args)
    if getattr(args, "model", None):
        return predict_step.run_step_predict(args, source, described, variants)
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


