"""Figure 10 of ``python -m mpicomm experiments``: the figure the users came for — PS, ring
and hierarchical scaling efficiency for ResNet-50 and BERT-large from 8 to 1,024 GPUs, on a
25 GbE cluster of V100s and on DGX H100 over InfiniBand: predicted lines, virtual-run points.

    python -m mpicomm model --predict --model resnet50 --profile dgx-h100-ib400 \\
        --batch-size 64 --ranks 64 --strategies ps,ring,hierarchical --servers 8 \\
        --reducers mpicomm
    mpiexec -n 16 python -m mpicomm compare --model resnet50 --profile dgx-h100-ib400 \\
        --batch-size 64 --strategies ps,ring,hierarchical --servers 2 --steps 3 ...

1. for each cluster and workload, ``model --predict --model M`` per rank count (8 … 1,024),
   twice: ``--reducers mpicomm``, the cluster running mpicomm's own reducers (one blocking
   exchange a step, each add a kernel launch, no per-call α: the cluster ``compare``
   predicts a virtual run on, ``bench.step_predict.own_reducers_cluster``), the solid lines;
   and ``--reducers nccl``, the profile's own forms (the real cluster running NCCL:
   pipelined, its per-call α, adds fused), thin dashed lines. Each gives the step of each
   strategy, its samples/s and its scaling efficiency (samples/s ÷ (p × one device's
   samples/s), weak scaling: B samples per rank). The parameter server has one server per
   node (S = nodes, key ranges over the servers, colocated with the workers, as TensorFlow
   and BytePS place them), not one for all;
2. at a few (cluster, workload, ranks), the same job runs under the virtual clock
   (``compare --model M``, the same flags, with its 1-worker baseline, folded as ``--fold
   auto`` chooses so that it fits this host's memory): the one SGD loop and the real
   strategies over the model's tensors, compute charged by the device model. Its scaling
   efficiency is drawn as a point; it ran mpicomm's reducers, so it belongs on the solid
   line (the predictor and the clock read one model: the points test that the predictor
   describes what the engine does). ``FIG10_VIRTUAL_COMMITTED`` points (ResNet-50 above 64
   ranks, BERT-large above 16) are read from the committed results, never run by a sweep;
3. one panel per (cluster, workload): efficiency against ranks, a line per strategy and
   form, the virtual points as markers; the conclusion names, from the numbers just
   computed, each strategy at 1,024 ranks in both forms, where one server per node falls
   below the ring, and the largest gap between a virtual point and its solid line.

Why the lines bend (the formulas of docs/model.md): the ring's bytes term 2(p−1)/p·nβ is
flat in p, so its efficiency is lost to the latency term 2(p−1)α once n/p gets small, and
to the bytes across one shared NIC per node (25 GbE: 8 ranks behind one 25 Gb/s NIC);
hierarchical sends only n/L across the nodes per rank; a parameter server's busiest
server carries (W/S)·n/S each way, so with S = nodes it stays level only if a node's
NIC carries its share as fast as a ring does.
"""

from __future__ import annotations

import dataclasses

from mpicomm.figures import plot
from mpicomm.figures.catalog import _rel
from mpicomm.figures.registry import Context, Section, figure

__all__ = ["workload_scaling", "FIG10_CLUSTERS", "FIG10_MODELS", "FIG10_FORMS",
           "predict_args", "virtual_args", "virtual_points", "draw", "conclusion"]

FIG10_STRATEGIES = ("ps", "ring", "hierarchical")
# (profile, its label, --accelerator for a profile that brings no device of its own)
FIG10_CLUSTERS = (("ethernet-25g", "25 GbE, 8 V100 a node", "v100"),
                  ("dgx-h100-ib400", "DGX H100, 8x NDR 400", None))
FIG10_MODELS = (("resnet50", 64), ("bert-large", 32))  # (workload, samples per rank)
FIG10_RANKS = (8, 16, 32, 64, 128, 256, 512, 1024)
RANKS_PER_NODE = 8  # both profiles
# The lines: ``model --predict --reducers F``. "mpicomm": the cluster running mpicomm's own
# reducers, what the virtual runs execute (solid; the points are checked against it);
# "nccl": the profile's own forms, the real cluster running NCCL (dashed)
FIG10_FORMS = ("mpicomm", "nccl")
# The virtual runs: (profile, workload, ranks). Each folds as ``--fold auto`` chooses (a rank
# holds 1/F of every tensor, every message and kernel charged in full: docs/workloads.md), so
# BERT-large's 1.3 GB gradient fits this host's memory at 8 ranks.
_BOTH = tuple(prof for prof, _, _ in FIG10_CLUSTERS)
FIG10_VIRTUAL_QUICK = tuple((prof, m, p) for prof in _BOTH
                            for m, p in (("resnet50", 8), ("resnet50", 16), ("bert-large", 8)))
FIG10_VIRTUAL_FULL = tuple((prof, m, p) for prof in _BOTH
                           for m, p in (("resnet50", 8), ("resnet50", 16), ("resnet50", 32),
                                        ("resnet50", 64), ("bert-large", 8), ("bert-large", 16)))
# Points no sweep runs (minutes to tens of minutes each on 2 cores, stated beside each): read from
# this run's results if there, else from the committed experiments/results/ (rerun by hand:
# the command the README lists for it)
FIG10_VIRTUAL_COMMITTED = {  # (profile, workload, ranks): its wall time as run (2 cores shared
    # with other jobs; the DGX profile's ring has 8 channels)
    ("ethernet-25g", "resnet50", 128): "166 s",
    ("dgx-h100-ib400", "resnet50", 128): "1,079 s",
    ("ethernet-25g", "resnet50", 256): "551 s",
    ("ethernet-25g", "bert-large", 32): "142 s",
    ("dgx-h100-ib400", "bert-large", 32): "504 s",
    ("ethernet-25g", "bert-large", 64): "422 s",
    ("dgx-h100-ib400", "bert-large", 64): "2,117 s",
    ("ethernet-25g", "bert-large", 128): "1,068 s",
    ("dgx-h100-ib400", "resnet50", 256): "682 s",
    ("dgx-h100-ib400", "bert-large", 128): "1,037 s",
    ("ethernet-25g", "bert-large", 256): "1,597 s",
    ("dgx-h100-ib400", "bert-large", 256): "4,509 s"}
COMMITTED_ROOT = "experiments"  # cli.experiments' committed folder, beside this run's root


def _cluster_flags(profile: str, accelerator: str | None, model: str, batch: int) -> list[str]:
    flags = ["--model", model, "--profile", profile, "--batch-size", str(batch)]
    return flags + (["--accelerator", accelerator] if accelerator else [])


def _servers(ranks: int) -> str:
    return str(max(1, ranks // RANKS_PER_NODE))  # one server per node


def predict_args(profile: str, accelerator: str | None, model: str, batch: int,
                 ranks: int, reducers: str = "mpicomm") -> list[str]:
    """The ``model --predict`` arguments of one predicted point (every strategy), in
    ``reducers``' forms (``FIG10_FORMS``)."""
    return ["model", "--predict", *_cluster_flags(profile, accelerator, model, batch),
            "--ranks", str(ranks), "--strategies", ",".join(FIG10_STRATEGIES),
            "--servers", _servers(ranks), "--reducers", reducers]


def virtual_args(profile: str, accelerator: str | None, model: str, batch: int,
                 ranks: int) -> list[str]:
    """The ``compare`` arguments of one virtual-run point (run under ``mpiexec -n ranks``)."""
    return ["compare", *_cluster_flags(profile, accelerator, model, batch),
            "--strategies", ",".join(FIG10_STRATEGIES), "--servers", _servers(ranks),
            "--steps", "3", "--repeats", "1", "--log-every", "0", "--clock", "virtual"]


def virtual_points(profile: str, model: str, quick: bool) -> list[tuple[int, bool]]:
    """The virtual runs of one panel: (ranks, read from the committed results only)."""
    runs = [(p, False) for prof, m, p in (FIG10_VIRTUAL_QUICK if quick else FIG10_VIRTUAL_FULL)
            if (prof, m) == (profile, model)]
    return runs + [(p, True) for prof, m, p in FIG10_VIRTUAL_COMMITTED
                   if (prof, m) == (profile, model) and (p, False) not in runs]


# {"predicted" (mpicomm's reducers) | "nccl" | "virtual": {strategy: {p: eff}}}
Panel = dict[str, dict[str, dict[int, float]]]


@figure("10", "scaling efficiency of PS, ring and hierarchical for ResNet-50 and BERT-large, "
              "8 to 1,024 GPUs, 25 GbE and DGX H100: predicted lines (solid: mpicomm's "
              "reducers, which the virtual-run points ran; dashed: NCCL's forms)")
def workload_scaling(ctx: Context, sec: Section) -> None:
    panels: dict[tuple[str, str], Panel] = {}
    for profile, label, accelerator in FIG10_CLUSTERS:
        for model, batch in FIG10_MODELS:
            panel: Panel = {"predicted": {}, "nccl": {}, "virtual": {}}
            for p in FIG10_RANKS:
                for forms, into in zip(FIG10_FORMS, ("predicted", "nccl"), strict=True):
                    args = predict_args(profile, accelerator, model, batch, p, forms)
                    doc = ctx.mpicomm(None, args, f"fig10_predict_{forms}_{profile}_{model}_{p}"
                                      ".json", timeout_s=60)
                    _add(panel[into], doc, p)
            for p, committed in virtual_points(profile, model, ctx.quick):
                args = virtual_args(profile, accelerator, model, batch, p)
                name = f"fig10_virtual_{profile}_{model}_{p}.json"
                doc = (_read_committed(ctx, p, args, name,
                                       FIG10_VIRTUAL_COMMITTED[(profile, model, p)])
                       if committed else ctx.mpicomm(p, args, name))
                _add(panel["virtual"], doc, p)
            if panel["predicted"]:
                panels[(label, model)] = panel
    if not panels:
        return
    sec.figures.append(_rel(ctx, draw(panels, ctx.png("fig10_workload_scaling.png"))))
    sec.conclusion = conclusion(panels)


def _read_committed(ctx: Context, ranks: int, args: list[str], name: str,
                    wall: str = "minutes") -> dict | None:
    """A point no sweep runs (``FIG10_VIRTUAL_COMMITTED``): its JSON from this run's results
    if there, else from the committed ones; noted as read, not run (``wall``: how long it
    took by hand)."""
    root = ctx.root if (ctx.results / name).exists() else ctx.root.parent / COMMITTED_ROOT
    doc = dataclasses.replace(ctx, root=root, replot=True).mpicomm(ranks, args, name)
    if doc is not None:
        ctx.notes.append(f"{name}: run by hand with the command listed above, never by a "
                         f"sweep ({ranks} ranks: {wall} wall on 2 cores); read from the "
                         "saved results")
    return doc


def _add(into: dict[str, dict[int, float]], doc: dict | None, ranks: int) -> None:
    """The scaling efficiency of each strategy's row at ``ranks`` in a predict/compare doc."""
    for row in (doc or {}).get("results", []):
        if row.get("ranks") == ranks and row.get("scaling_efficiency") is not None:
            into.setdefault(row["strategy"], {})[ranks] = float(row["scaling_efficiency"])


def draw(panels: dict[tuple[str, str], Panel], png: str) -> str:
    """A panel per (cluster, workload): solid lines mpicomm's reducers predicted, thin dashed
    lines NCCL's forms on the same cluster, markers the virtual runs."""
    keys = list(panels)
    ncols = 2
    fig, axes = plot.new_figure(ncols, (len(keys) + ncols - 1) // ncols, width=4.4, height=3.6)
    axes = list(getattr(axes, "flat", axes))
    styles = (("predicted", dict(linestyle="-"), "{}"),
              ("nccl", dict(linestyle="--", linewidth=0.8, alpha=0.8), "{}, NCCL's forms"),
              ("virtual", dict(linestyle="none", mfc="none", ms=7), "{}, virtual run"))
    for ax, key in zip(axes, keys, strict=False):
        for kind, style, label in styles:
            for name, pts in panels[key].get(kind, {}).items():
                xs = sorted(pts)
                marker = {"marker": plot.marker(name)} if kind == "virtual" else {}
                ax.plot(xs, [pts[x] for x in xs], color=plot.color(name),
                        label=label.format(name), **style, **marker)
        ax.set_xscale("log", base=2)
        ax.set_xticks(FIG10_RANKS, [str(x) for x in FIG10_RANKS])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{key[1]}: {key[0]}", fontsize=9)
        ax.set_xlabel("GPUs (ranks)")
        ax.grid(True, alpha=0.3)
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    axes[0].set_ylabel("scaling efficiency")
    axes[0].legend(fontsize=6)
    fig.suptitle("weak scaling: solid model --predict --reducers mpicomm (what the markers, "
                 "compare --clock virtual, run); dashed --reducers nccl", fontsize=8)
    return plot.save(fig, png)


def conclusion(panels: dict[tuple[str, str], Panel]) -> str:
    """The best strategy at the largest rank count per panel (mpicomm's reducers, NCCL's in
    brackets), where ps falls below the ring, and the largest gap between a virtual point
    and its line (mpicomm's reducers: what the point ran)."""
    parts = [_panel_text(label, model, panel) for (label, model), panel in panels.items()]
    gaps = [(abs(v / panel["predicted"][s][p] - 1), s, p, model, label)
            for (label, model), panel in panels.items() for s, pts in panel["virtual"].items()
            for p, v in pts.items() if panel["predicted"].get(s, {}).get(p)]
    text = ("Scaling efficiency predicted for mpicomm's own reducers on each cluster [in "
            "brackets: NCCL's forms on it]: " + "; ".join(parts) + ".")
    if gaps:
        gap, s, p, model, label = max(gaps)
        text += (f" The {len(gaps)} virtual-run points lie within {100 * gap:.1f}% of the "
                 f"lines of the reducers they ran (largest: {s}, {model} on {label} at {p} "
                 "ranks).")
    return text + (" One server per node must take every worker's share of the gradient "
                   "through its node's NIC, so the servers' NICs decide; the ring loses "
                   "efficiency to the latency of its 2(p−1) steps as p grows (mpicomm's: "
                   "each step a blocking exchange and an add kernel's launch; NCCL's: its "
                   "protocol's latency a hop and a per-call α, its adds fused), hierarchical "
                   "keeps most of it by crossing the nodes with n/L per rank.")


def _panel_text(label: str, model: str, panel: Panel) -> str:
    """One panel's sentence: each strategy at the largest rank count, NCCL's in brackets."""
    pred, nccl = panel["predicted"], panel.get("nccl", {})
    top = max(max(pts) for pts in pred.values())
    at_top = {s: pts[top] for s, pts in pred.items() if top in pts}
    best = max(at_top, key=at_top.get)
    shown = {s: f"{s} {e:.2f}" + ("" if nccl.get(s, {}).get(top) is None
                                  else f" [{nccl[s][top]:.2f}]") for s, e in at_top.items()}
    text = (f"{model} on {label}: at {top} GPUs {shown[best]} ("
            + ", ".join(t for s, t in shown.items() if s != best) + ")")
    below = _first_below(pred.get("ps", {}), pred.get("ring", {}))
    return text + (f"; ps under the ring from {below} GPUs" if below else "")


def _first_below(ps: dict[int, float], ring: dict[int, float], by: float = 0.05) -> int | None:
    """The first rank count at which ps's efficiency is more than ``by`` under the ring's."""
    return next((p for p in sorted(ps) if p in ring and ps[p] < ring[p] - by), None)
