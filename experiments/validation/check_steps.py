"""Hold whole-step predictions against published data-parallel training results (steps.json).

    python experiments/validation/check_steps.py                    # the table and the score
    python experiments/validation/check_steps.py --json out.json --figure docs/f.png --markdown t.md

Each point is one published training throughput (images/s at a GPU count) or scaling
efficiency, with its source, the quoted line, the setup and the cluster it ran on
(``clusters`` in steps.json: links at line rate with a cited efficiency, α, γ, layout; each
figure's source stated there). Nothing is fitted per point. Per point:

1. the workload (``mpicomm.workloads``) at the source's batch size a GPU;
2. compute: the source's own one-GPU rate (``--single-rate``);
3. the strategy as the source ran it: an NCCL all-reduce is ``ring``; a TensorFlow
   parameter server is ``ps`` with whole tensors on the servers (``tensors``), colocated
   with the workers or, for variables on the host CPU, behind the PCIe uplinks
   (``separate``), with tf_cnn_benchmarks' ``distributed_replicated`` reducing in the node
   first (``node_reduce``);
4. overlap as the source's system ran it (steps.json ``overlap``: TensorFlow 1.x's
   tf_cnn_benchmarks modes take none, Horovod overlaps; this rule was added after the first
   scoring, which took the engine's overlap everywhere: ``--overlap-everywhere``);
5. a parameter server's RPC transport as the source's system ran it (steps.json ``rpc``,
   one of ``transports``: TensorFlow's gRPC before its August 2017 upgrade moved a message
   above 128 MiB at no more than 100 MB/s, with its source; ``bench.step_predict.RpcRate``);
   added after the second scoring, for the worst point (``--no-rpc`` reproduces that);
6. ``bench.step_predict.step_rows``: the same code as ``model --predict --model``.

Score: a throughput point is within when measured/predicted is within 1.25x; an efficiency
point when |predicted − measured| <= 0.10 (against the source's base GPU count,
``efficiency_base_gpus``, where it states one; its measured images/s shown is the predicted
scaled by measured/predicted efficiency); the fold is max(r, 1/r) of the throughputs (of
the efficiencies for an efficiency point). Where one source measured a parameter server and
an all-reduce on the same hardware, model and GPU count (``compare``), every (ps, all-reduce)
pair's predicted order must be the measured one. Targets: >= 80% within, worst <= 2x, every
order right. The score is printed whatever it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's mpicomm first

from mpicomm.bench.predict import Variant
from mpicomm.bench.step_predict import DEFAULT_BUCKET_MB, RpcRate, StepOptions, step_rows
from mpicomm.costmodel.cluster import Cluster, Link
from mpicomm.workloads import workload

POINTS = Path(__file__).with_name("steps.json")
WITHIN, EFF_WITHIN, TARGET_SHARE, TARGET_FOLD = 1.25, 0.10, 0.80, 2.0


def load(path: Path = POINTS) -> dict:
    return json.loads(Path(path).read_text())


def point_cluster(doc: dict, pt: dict) -> Cluster:
    """The cluster of steps.json's ``clusters`` the point ran on (one node: all its GPUs)."""
    c = doc["clusters"][pt["cluster"]]
    local = pt["gpus"] if pt.get("one_node") else c["ranks_per_node"]
    return Cluster(pt["cluster"], local, Link(**c["intra"]), Link(**c["inter"]),
                   c["gamma_s_per_byte"], c["nics_per_node"], c["source"])


def overlapped(doc: dict, pt: dict) -> bool:
    """Whether the source's system overlaps communication with backward (steps.json:
    ``overlap`` of the source, or ``overlap_by_setup``; default yes, as mpicomm's engine)."""
    src = doc["sources"][pt["source"]]
    return src.get("overlap_by_setup", {}).get(pt["setup"], src.get("overlap", True))


def transport(doc: dict, pt: dict) -> RpcRate | None:
    """The parameter server's RPC transport the source's system ran (steps.json ``rpc`` of
    the source, or ``rpc_by_setup``, naming one of ``transports``); None: the links alone."""
    src = doc["sources"][pt["source"]]
    name = src.get("rpc_by_setup", {}).get(pt["setup"], src.get("rpc"))
    if name is None or pt["strategy"] != "ps":
        return None
    t = doc["transports"][name]
    return RpcRate(t["above_bytes"], t["bytes_per_s"])


def predict(doc: dict, pt: dict, overlap_everywhere: bool = False,
            no_rpc: bool = False) -> dict:
    """The predicted row (``step_rows``) of the point's setup."""
    ps = pt.get("ps") or {}
    overlap = overlap_everywhere or overlapped(doc, pt)
    opts = StepOptions(
        model=pt["model"], batch_size=pt["batch"], single_rate=pt["single_rate"],
        bucket_mb=DEFAULT_BUCKET_MB, overlap=overlap, precision="fp32",
        ps_placement=ps.get("placement", "even"), ps_servers_on=ps.get("on", "workers"),
        ps_node_reduce=bool(ps.get("node_reduce")), rpc=None if no_rpc else transport(doc, pt))
    options = {"servers": ps["servers"]} if pt["strategy"] == "ps" else {}
    variant = Variant(pt["strategy"], pt["strategy"], options)
    base = pt.get("efficiency_base_gpus")
    ranks = [base, pt["gpus"]] if base else [pt["gpus"]]
    rows = step_rows(workload(pt["model"]), point_cluster(doc, pt), ranks, [variant], opts)
    row = dict(rows[-1])
    if base:  # efficiency against the base GPU count's step, as the source states it
        row["scaling_efficiency"] /= rows[0]["scaling_efficiency"]
    return row


def score_point(pt: dict, row: dict) -> dict:
    """The point beside its prediction: ratio, fold, within."""
    out = {"id": pt["id"], "source": pt["source"], "model": pt["model"], "gpus": pt["gpus"],
           "strategy": pt["strategy"], "setup": pt["setup"],
           "predicted_samples_per_s": row["samples_per_sec"],
           "predicted_efficiency": row["scaling_efficiency"]}
    if "measured_samples_per_s" in pt:
        m = pt["measured_samples_per_s"]
        r = m / row["samples_per_sec"]
        out.update(measured_samples_per_s=m, ratio=r, fold=max(r, 1 / r),
                   within=max(r, 1 / r) <= WITHIN,
                   measured_efficiency=m / (pt["gpus"] * pt["single_rate"]))
    else:
        m = pt["measured_efficiency"]
        e = row["scaling_efficiency"]
        out.update(measured_efficiency=m, ratio=m / e, fold=max(m / e, e / m),
                   within=abs(e - m) <= EFF_WITHIN,
                   measured_samples_per_s=row["samples_per_sec"] * m / e)
    return out


def orders(doc: dict, scored: list[dict]) -> list[dict]:
    """Every (ps, all-reduce) pair of one ``compare`` group: measured and predicted order."""
    by_id = {s["id"]: s for s in scored}
    groups: dict[str, list[dict]] = {}
    for pt in doc["points"]:
        if pt.get("compare"):
            groups.setdefault(pt["compare"], []).append(by_id[pt["id"]])
    out = []
    for group, members in sorted(groups.items()):
        for a in (s for s in members if s["strategy"] == "ps"):
            for b in (s for s in members if s["strategy"] != "ps"):
                measured = a["measured_samples_per_s"] < b["measured_samples_per_s"]
                predicted = a["predicted_samples_per_s"] < b["predicted_samples_per_s"]
                out.append({"group": group, "ps": a["id"], "allreduce": b["id"],
                            "measured_ps_slower": measured, "predicted_ps_slower": predicted,
                            "right": measured == predicted})
    return out


def run(doc: dict, overlap_everywhere: bool = False,
        no_rpc: bool = False) -> tuple[list[dict], list[dict], dict]:
    scored = [score_point(pt, predict(doc, pt, overlap_everywhere, no_rpc))
              for pt in doc["points"]]
    pairs = orders(doc, scored)
    n = len(scored)
    summary = {"points": n, "within": sum(s["within"] for s in scored),
               "share_within": sum(s["within"] for s in scored) / n,
               "worst_fold": max(s["fold"] for s in scored),
               "worst_id": max(scored, key=lambda s: s["fold"])["id"],
               "orders": len(pairs), "orders_right": sum(p["right"] for p in pairs)}
    summary["targets_met"] = (summary["share_within"] >= TARGET_SHARE
                              and summary["worst_fold"] <= TARGET_FOLD
                              and summary["orders_right"] == summary["orders"])
    return scored, pairs, summary


def table(scored: list[dict]) -> str:
    lines = [f"{'point':<34} {'gpus':>5} {'strategy':>8} {'measured':>10} {'predicted':>10} "
             f"{'meas eff':>8} {'pred eff':>8} {'fold':>6} within"]
    for s in scored:
        lines.append(f"{s['id']:<34} {s['gpus']:>5} {s['strategy']:>8} "
                     f"{s['measured_samples_per_s']:>10.1f} {s['predicted_samples_per_s']:>10.1f} "
                     f"{s['measured_efficiency']:>8.2f} {s['predicted_efficiency']:>8.2f} "
                     f"{s['fold']:>6.2f} {'yes' if s['within'] else 'NO'}")
    return "\n".join(lines)


def markdown(scored: list[dict], doc: dict) -> str:
    lines = ["| point | source | model | GPUs | setup | measured img/s | predicted img/s | "
             "measured eff | predicted eff | fold | within |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for s in scored:
        lines.append(f"| {s['id']} | {s['source']} | {s['model']} | {s['gpus']} | {s['setup']} | "
                     f"{s['measured_samples_per_s']:,.1f} | {s['predicted_samples_per_s']:,.1f} | "
                     f"{s['measured_efficiency']:.2f} | {s['predicted_efficiency']:.2f} | "
                     f"{s['fold']:.2f}x | {'yes' if s['within'] else '**no**'} |")
    return "\n".join(lines)


def figure(scored: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    for ps, marker in ((False, "o"), (True, "s")):
        pts = [s for s in scored if (s["strategy"] == "ps") == ps]
        ax.scatter([s["predicted_samples_per_s"] for s in pts],
                   [s["measured_samples_per_s"] for s in pts], marker=marker,
                   label="parameter server" if ps else "all-reduce (ring, hierarchical)")
    lo = min(min(s["measured_samples_per_s"], s["predicted_samples_per_s"]) for s in scored)
    hi = max(max(s["measured_samples_per_s"], s["predicted_samples_per_s"]) for s in scored)
    xs = [lo / 1.5, hi * 1.5]
    ax.plot(xs, xs, "k-", lw=0.8)
    for f in (WITHIN, 1 / WITHIN):
        ax.plot(xs, [x * f for x in xs], "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted images/s (model --predict --model)")
    ax.set_ylabel("published images/s")
    ax.set_title("Whole training steps: published vs predicted (dotted: 1.25x)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--figure", default=None)
    p.add_argument("--markdown", default=None)
    p.add_argument("--overlap-everywhere", action="store_true",
                   help="the first scoring: the engine's overlap for every source's system")
    p.add_argument("--no-rpc", action="store_true",
                   help="the second scoring: the links alone, no parameter-server RPC rate")
    args = p.parse_args(argv)
    doc = load()
    scored, pairs, summary = run(doc, args.overlap_everywhere, args.no_rpc)
    print(table(scored))
    wrong = [f"{o['ps']} vs {o['allreduce']}" for o in pairs if not o["right"]]
    print(f"# {summary['within']}/{summary['points']} within ({100 * summary['share_within']:.0f}%,"
          f" target {100 * TARGET_SHARE:.0f}%); worst {summary['worst_fold']:.2f}x at "
          f"{summary['worst_id']} (target <= {TARGET_FOLD:g}x); PS vs all-reduce order right "
          f"{summary['orders_right']}/{summary['orders']}"
          + (f" (wrong: {', '.join(wrong)})" if wrong else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "points": scored,
                                               "orders": pairs}, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(scored, doc) + "\n")
    if args.figure:
        figure(scored, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
