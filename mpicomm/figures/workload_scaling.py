"""Figure 10 of ``python -m mpicomm experiments``: the figure the users came for — PS, ring
and hierarchical scaling efficiency for ResNet-50 and BERT-large from 8 to 1,024 GPUs, on a
25 GbE cluster of V100s and on DGX H100 over InfiniBand: predicted lines, virtual-run points.

    python -m mpicomm model --predict --model resnet50 --profile dgx-h100-ib400 \\
        --batch-size 64 --ranks 64 --strategies ps,ring,hierarchical --servers 8
    mpiexec -n 16 python -m mpicomm compare --model resnet50 --profile dgx-h100-ib400 \\
        --batch-size 64 --strategies ps,ring,hierarchical --servers 2 --steps 3 ...

1. for each cluster and workload, one ``model --predict --model M`` per rank count
   (8 … 1,024): the step of each strategy, its samples/s and its scaling efficiency
   (samples/s ÷ (p × one device's samples/s), weak scaling: B samples per rank). The
   parameter server has one server per node (S = nodes, key ranges over the servers,
   colocated with the workers, as TensorFlow and BytePS place them), not one for all;
2. at a few rank counts, the same job runs under the virtual clock (``compare --model M``,
   the same flags, with its 1-worker baseline, folded as ``--fold auto`` chooses so that it
   fits this host's memory): the one SGD loop and the real strategies
   over the model's tensors, compute charged by the device model. Its scaling efficiency
   is drawn as a point on the predicted line (the predictor and the clock read one model:
   the points test that the predictor describes what the engine does);
3. one panel per (cluster, workload): efficiency against ranks, a line per strategy, the
   virtual points as markers; the conclusion names, from the numbers just computed, the
   best strategy at 1,024 ranks, where one server per node falls below the ring, and
   the largest gap between a virtual point and its line.

Why the lines bend (the formulas of docs/model.md): the ring's bytes term 2(p−1)/p·nβ is
flat in p, so its efficiency is lost to the latency term 2(p−1)α once n/p gets small, and
to the bytes across one shared NIC per node (25 GbE: 8 ranks behind one 25 Gb/s NIC);
hierarchical sends only n/L across the nodes per rank; a parameter server's busiest
server carries (W/S)·n/S each way, so with S = nodes it stays level only if a node's
NIC carries its share as fast as a ring does.
"""

from __future__ import annotations

from mpicomm.figures import plot
from mpicomm.figures.catalog import _rel
from mpicomm.figures.registry import Context, Section, figure

__all__ = ["workload_scaling", "FIG10_CLUSTERS", "FIG10_MODELS", "predict_args",
           "virtual_args"]

FIG10_STRATEGIES = ("ps", "ring", "hierarchical")
# (profile, its label, --accelerator for a profile that brings no device of its own)
FIG10_CLUSTERS = (("ethernet-25g", "25 GbE, 8 V100 a node", "v100"),
                  ("dgx-h100-ib400", "DGX H100, 8x NDR 400", None))
FIG10_MODELS = (("resnet50", 64), ("bert-large", 32))  # (workload, samples per rank)
FIG10_RANKS = (8, 16, 32, 64, 128, 256, 512, 1024)
RANKS_PER_NODE = 8  # both profiles
# The virtual runs: (workload, ranks). Each folds as ``--fold auto`` chooses (a rank holds
# 1/F of every tensor, every message and kernel charged in full: docs/workloads.md), so
# BERT-large's 1.3 GB gradient fits this host's memory at 8 ranks.
FIG10_VIRTUAL_QUICK = (("resnet50", 8), ("resnet50", 16), ("bert-large", 8))
FIG10_VIRTUAL_FULL = (("resnet50", 8), ("resnet50", 16), ("resnet50", 32), ("resnet50", 64),
                      ("bert-large", 8), ("bert-large", 16))


def _cluster_flags(profile: str, accelerator: str | None, model: str, batch: int) -> list[str]:
    flags = ["--model", model, "--profile", profile, "--batch-size", str(batch)]
    return flags + (["--accelerator", accelerator] if accelerator else [])


def _servers(ranks: int) -> str:
    return str(max(1, ranks // RANKS_PER_NODE))  # one server per node


def predict_args(profile: str, accelerator: str | None, model: str, batch: int,
                 ranks: int) -> list[str]:
    """The ``model --predict`` arguments of one predicted point (every strategy)."""
    return ["model", "--predict", *_cluster_flags(profile, accelerator, model, batch),
            "--ranks", str(ranks), "--strategies", ",".join(FIG10_STRATEGIES),
            "--servers", _servers(ranks)]


def virtual_args(profile: str, accelerator: str | None, model: str, batch: int,
                 ranks: int) -> list[str]:
    """The ``compare`` arguments of one virtual-run point (run under ``mpiexec -n ranks``)."""
    return ["compare", *_cluster_flags(profile, accelerator, model, batch),
            "--strategies", ",".join(FIG10_STRATEGIES), "--servers", _servers(ranks),
            "--steps", "3", "--repeats", "1", "--log-every", "0", "--clock", "virtual"]


Panel = dict[str, dict[str, dict[int, float]]]  # {"predicted"|"virtual": {strategy: {p: eff}}}


@figure("10", "scaling efficiency of PS, ring and hierarchical for ResNet-50 and BERT-large, "
              "8 to 1,024 GPUs, 25 GbE and DGX H100: predicted lines, virtual-run points")
def workload_scaling(ctx: Context, sec: Section) -> None:
    panels: dict[tuple[str, str], Panel] = {}
    runs = ctx.pick(FIG10_VIRTUAL_QUICK, FIG10_VIRTUAL_FULL)
    for profile, label, accelerator in FIG10_CLUSTERS:
        for model, batch in FIG10_MODELS:
            panel: Panel = {"predicted": {}, "virtual": {}}
            for p in FIG10_RANKS:
                doc = ctx.mpicomm(None, predict_args(profile, accelerator, model, batch, p),
                                  f"fig10_predict_{profile}_{model}_{p}.json", timeout_s=60)
                _add(panel["predicted"], doc, p)
            for run_model, p in runs:
                if run_model == model:
                    doc = ctx.mpicomm(p, virtual_args(profile, accelerator, model, batch, p),
                                      f"fig10_virtual_{profile}_{model}_{p}.json")
                    _add(panel["virtual"], doc, p)
            if panel["predicted"]:
                panels[(label, model)] = panel
    if not panels:
        return
    sec.figures.append(_rel(ctx, draw(panels, ctx.png("fig10_workload_scaling.png"))))
    sec.conclusion = conclusion(panels)


def _add(into: dict[str, dict[int, float]], doc: dict | None, ranks: int) -> None:
    """The scaling efficiency of each strategy's row at ``ranks`` in a predict/compare doc."""
    for row in (doc or {}).get("results", []):
        if row.get("ranks") == ranks and row.get("scaling_efficiency") is not None:
            into.setdefault(row["strategy"], {})[ranks] = float(row["scaling_efficiency"])


def draw(panels: dict[tuple[str, str], Panel], png: str) -> str:
    """A panel per (cluster, workload): predicted efficiency lines, virtual-run markers."""
    keys = list(panels)
    ncols = 2
    fig, axes = plot.new_figure(ncols, (len(keys) + ncols - 1) // ncols, width=4.4, height=3.6)
    axes = list(getattr(axes, "flat", axes))
    for ax, key in zip(axes, keys, strict=False):
        for name, pts in panels[key]["predicted"].items():
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], "-", color=plot.color(name), label=name)
        for name, pts in panels[key]["virtual"].items():
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], linestyle="none", marker=plot.marker(name),
                    color=plot.color(name), mfc="none", ms=7, label=f"{name}, virtual run")
        ax.set_xscale("log", base=2)
        ax.set_xticks(FIG10_RANKS, [str(x) for x in FIG10_RANKS])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{key[1]}: {key[0]}", fontsize=9)
        ax.set_xlabel("GPUs (ranks)")
        ax.grid(True, alpha=0.3)
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    axes[0].set_ylabel("scaling efficiency")
    axes[0].legend(fontsize=7)
    fig.suptitle("weak scaling: lines model --predict, markers compare --clock virtual",
                 fontsize=10)
    return plot.save(fig, png)


def conclusion(panels: dict[tuple[str, str], Panel]) -> str:
    """The best strategy at the largest rank count per panel, where ps falls below the
    ring, and the largest gap between a virtual point and its predicted line."""
    parts = []
    for (label, model), panel in panels.items():
        pred = panel["predicted"]
        top = max(max(pts) for pts in pred.values())
        at_top = {s: pts[top] for s, pts in pred.items() if top in pts}
        best = max(at_top, key=at_top.get)
        text = (f"{model} on {label}: at {top} GPUs {best} {at_top[best]:.2f} ("
                + ", ".join(f"{s} {e:.2f}" for s, e in at_top.items() if s != best) + ")")
        below = _first_below(pred.get("ps", {}), pred.get("ring", {}))
        if below:
            text += f"; ps under the ring from {below} GPUs"
        parts.append(text)
    gaps = [(abs(v / panel["predicted"][s][p] - 1), s, p, model)
            for (_, model), panel in panels.items() for s, pts in panel["virtual"].items()
            for p, v in pts.items() if panel["predicted"].get(s, {}).get(p)]
    text = "Scaling efficiency, predicted: " + "; ".join(parts) + "."
    if gaps:
        gap, s, p, model = max(gaps)
        text += (f" The {len(gaps)} virtual-run points lie within {100 * gap:.1f}% of their "
                 f"lines (largest: {s}, {model} at {p} ranks).")
    return text + (" One server per node must take every worker's share of the gradient "
                   "through its node's NIC, so the servers' NICs decide; the ring loses "
                   "efficiency to its 2(p−1)α latency term as p grows, hierarchical keeps "
                   "most of it by crossing the nodes with n/L per rank.")


def _first_below(ps: dict[int, float], ring: dict[int, float], by: float = 0.05) -> int | None:
    """The first rank count at which ps's efficiency is more than ``by`` under the ring's."""
    return next((p for p in sorted(ps) if p in ring and ps[p] < ring[p] - by), None)
