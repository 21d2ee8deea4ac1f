"""Virtual-clock runs against the cluster predictor, on the same cluster description.

For p ranks on 2 nodes (p/2 ranks per node, ``--inter-link 20us,1GB/s`` between nodes, the
virtual clock's default intra-node link inside) at 16 MiB, each strategy runs under
``bench --clock virtual --compute-scale 1e-9`` (compute charged as ~nothing, so the time is
the link model's alone) and is set beside ``costmodel.cluster_predict.cluster_time`` on
``costmodel.profiles.build_cluster`` of the same flags — the cluster the virtual clock
charges (γ = 0).

    PYTHONPATH=$PWD python experiments/virtual_vs_formula.py [--ranks 8,16] [--bytes 16M]
    PYTHONPATH=$PWD python experiments/virtual_vs_formula.py --nics-per-node 1  # shared NIC

Prints: strategy, ranks, virtual ms, predicted ms, ratio; exit 1 when a ratio leaves
[1 - tol, 1 + tol] (``--tol``, default 0.10).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from mpicomm.core.units import parse_bytes
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.profiles import build_cluster

INTER = "20us,1GB/s"
PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")


def cases(p: int) -> list[tuple[str, str, dict]]:
    """(label, strategy, options) of every strategy checked at p ranks on 2 nodes."""
    local = p // 2
    return [("ring", "ring", {}), (f"ring channels={local}", "ring", {"channels": local}),
            ("tree", "tree", {}), ("hierarchical", "hierarchical", {}),
            ("ps S=1", "ps", {"servers": 1}), (f"ps S={p}", "ps", {"servers": p})]


def bench_argv(p: int, strategy: str, opts: dict, nbytes: int, out: str,
               nics: int | None = None) -> list[str]:
    """Arguments after ``python`` of the virtual-clock bench of one case (JSON to ``out``)."""
    return ["-m", "mpicomm", "bench", "--clock", "virtual", "--compute-scale", "1e-9",
            "--ranks-per-node", str(p // 2), "--inter-link", INTER, "-b", str(nbytes),
            "-e", str(nbytes), "-n", "2", "-w", "1", "-c", "1", "--rounds", "1",
            "--strategies", strategy, *[f"--{k}={v}" for k, v in opts.items()], "--json", out,
            *([] if nics is None else ["--nics-per-node", str(nics)])]


def seconds(out: str, strategy: str, nbytes: int) -> float:
    """Seconds of one call from a bench JSON; raises when its sums were wrong."""
    rows = json.load(open(out))["results"]
    row = next(r for r in rows if r["strategy"] == strategy and r["bytes"] == nbytes)
    if row["wrong"]:
        raise RuntimeError(f"{strategy}: wrong sums")
    return row["time_us"] * 1e-6


def run_virtual(p: int, strategy: str, opts: dict, nbytes: int, timeout: int = 600,
                nics: int | None = None) -> float:
    """Seconds of one allreduce of ``nbytes`` under the virtual clock (bench, median call)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "b.json")
        cmd = ["timeout", str(timeout), MPIEXEC, "-n", str(p), PY,
               *bench_argv(p, strategy, opts, nbytes, out, nics)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: rc {res.returncode}\n{res.stderr[-2000:]}")
        return seconds(out, strategy, nbytes)


def predicted(p: int, strategy: str, opts: dict, nbytes: int, nics: int | None = None) -> float:
    """The predictor's seconds on the virtual clock's own cluster description."""
    cluster = build_cluster(ranks_per_node=p // 2, inter=INTER, nics_per_node=nics,
                            gamma_s_per_byte=0.0)
    return cluster_time(strategy, p, nbytes, cluster, opts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,16")
    ap.add_argument("--bytes", default="16M")
    ap.add_argument("--tol", type=float, default=0.10)
    ap.add_argument("--nics-per-node", type=int, default=None,
                    help="interfaces per node (default: one per rank)")
    ap.add_argument("--only", default="", help="comma-separated labels to run (default: all)")
    args = ap.parse_args(argv)
    n = parse_bytes(args.bytes)
    only = {s for s in args.only.split(",") if s}
    bad = 0
    print(f"{'strategy':<20} {'ranks':>5} {'virtual ms':>11} {'predicted ms':>13} {'ratio':>7}")
    for p in (int(x) for x in args.ranks.split(",")):
        for label, strategy, opts in cases(p):
            if only and label not in only:
                continue
            t = run_virtual(p, strategy, opts, n, nics=args.nics_per_node)
            f = predicted(p, strategy, opts, n, args.nics_per_node)
            ratio = t / f
            bad += not (1 - args.tol <= ratio <= 1 + args.tol)
            print(f"{label:<20} {p:>5} {t * 1e3:>11.3f} {f * 1e3:>13.3f} {ratio:>7.3f}",
                  flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
