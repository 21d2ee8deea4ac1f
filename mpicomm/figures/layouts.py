"""Figure 9 of ``python -m mpicomm experiments``: which parallelism layout wins as the model
widens and the inter-node link slows, timed with the virtual clock.

    mpiexec -n 4 python -m mpicomm compare --layouts dp,zero,pp2,pp4,tp2,tp4 \\
        --layers W,W,W,W,10 --ranks-per-node 2 --inter-link 20us,1GB/s --clock virtual ...

1. for each inter-node link (α fixed, bandwidth falling) and each width W, one
   ``compare --layouts`` job at 4 ranks on 2 modelled nodes of 2: every layout
   trains the same global batch (B rows per rank) with the same losses;
2. the virtual clock charges compute as CPU time and every message by the link
   model (intra-node 1us,10GB/s; inter-node the swept link), so the step times
   are those of the modelled cluster, not of this shared host;
3. draw samples/s against W, one panel per link, one line per layout; the
   conclusion names each case's winner from the numbers just measured.

Bytes per step per rank (n = Σ W·W' parameters, b bytes per element; rank r is
part r % K of replica r // K, so a part's group sits inside a node when K = 2):

- dp, zero: the ring all-reduce of n, 2(p−1)/p·n, with ring hops across the
  nodes: grows as W², so the slow link hurts them first;
- pp2 (2 replicas × 2 stages in a node): 2·B·W·b per boundary inside the node,
  plus the replicas' all-reduce of n/2 across the nodes; pp4: one boundary
  crosses the nodes, 2·B·W·b, no all-reduce; it pays the bubble (P−1)/(M+P−1);
- tp2 (2 replicas × 2 shards in a node): 2(T−1)/T·2B·Σ(o+i)·b inside the node on
  the critical path, plus the replicas' all-reduce of n/2 across; tp4: all its
  all-reduces cross the nodes, none of parameters.
"""

from __future__ import annotations

from mpicomm.figures import plot
from mpicomm.figures.catalog import _rel, _x
from mpicomm.figures.registry import Context, Section, figure

__all__ = ["layouts_against_width_and_link", "FIG9_LAYOUTS"]

FIG9_LAYOUTS = "dp,zero,pp2,pp4,tp2,tp4"
FIG9_LINKS = ("20us,10GB/s", "20us,1GB/s", "20us,0.1GB/s")
FIG9_QUICK_WIDTHS = (128, 512, 1024)
FIG9_WIDTHS = (128, 256, 512, 1024, 2048)
FIG9_BATCH, FIG9_MICRO = 16, 4  # rows per rank per step; micro-batches of the pipelines


def fig9_args(width: int, link: str, steps: str) -> list[str]:
    """The ``compare`` arguments of one point of figure 9."""
    return ["compare", "--layouts", FIG9_LAYOUTS, "--layers", ",".join([str(width)] * 4 + ["10"]),
            "--batch-size", str(FIG9_BATCH), "--micro-batches", str(FIG9_MICRO),
            "--steps", steps, "--repeats", "1", "--no-baseline", "--log-every", "0",
            "--ranks-per-node", "2", "--inter-link", link, "--clock", "virtual"]


@figure("9", "which parallelism layout wins as the model widens and the inter-node link slows "
             "(virtual time, 4 ranks on 2 nodes)")
def layouts_against_width_and_link(ctx: Context, sec: Section) -> None:
    steps = ctx.pick("5", "10")
    grid: dict[str, dict[int, dict[str, dict]]] = {}
    for link in FIG9_LINKS:
        for w in ctx.pick(FIG9_QUICK_WIDTHS, FIG9_WIDTHS):
            doc = ctx.mpicomm(4, fig9_args(w, link, steps),
                              f"fig9_w{w}_{link.split(',')[1].replace('/', '')}.json")
            if doc:
                grid.setdefault(link, {})[w] = {r["layout"]: r for r in doc["results"]}
    if not grid:
        return
    sec.figures.append(_rel(ctx, _draw_fig9(grid, ctx.png("fig9_layouts.png"))))
    sec.conclusion = _fig9_text(grid)


def _draw_fig9(grid: dict[str, dict[int, dict[str, dict]]], png: str) -> str:
    links = list(grid)
    fig, axes = plot.new_figure(len(links), width=4.2, height=4.2)
    top = max(r["samples_per_sec"] for by_w in grid.values() for by_l in by_w.values()
              for r in by_l.values())
    low = min(r["samples_per_sec"] for by_w in grid.values() for by_l in by_w.values()
              for r in by_l.values())
    for ax, link in zip(axes, links, strict=True):
        widths = sorted(grid[link])
        for i, name in enumerate(FIG9_LAYOUTS.split(",")):
            pts = [(w, grid[link][w][name]["samples_per_sec"]) for w in widths
                   if name in grid[link][w]]
            if pts:
                ax.plot(*zip(*pts, strict=True), "o-", color=f"C{i}", ms=4, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(low / 1.5, top * 1.5)
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.set_xlabel("width W (layers W,W,W,W,10)")
        ax.set_title(f"inter-node link {link}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("samples/s, virtual time (all ranks)")
    axes[0].legend(fontsize=7)
    fig.suptitle("which layout wins: 4 ranks on 2 modelled nodes of 2, "
                 f"{FIG9_BATCH} rows per rank, virtual clock", fontsize=10)
    return plot.save(fig, png)


def _fig9_text(grid: dict[str, dict[int, dict[str, dict]]]) -> str:
    parts = []
    for link, by_w in grid.items():
        cases = []
        for w in sorted(by_w):
            recs = by_w[w]
            best = max(recs, key=lambda k: recs[k]["samples_per_sec"])
            text = f"W={w} {best} {recs[best]['samples_per_sec']:,.0f} samples/s"
            if "dp" in recs and best != "dp":
                text += f" ({_x(recs[best]['samples_per_sec'], recs['dp']['samples_per_sec'])} dp)"
            cases.append(text)
        parts.append(f"inter-node {link}: " + ", ".join(cases))
    return ("Fastest layout per width, in virtual time: " + "; ".join(parts) + ". "
            "dp and zero all-reduce every parameter, 2(p−1)/p·n bytes per rank with n growing "
            "as W², over ring hops that cross the inter-node link; pp2 and tp2 keep their pair "
            "inside a node but all-reduce half the parameters, n/2 per rank, across it; pp4 "
            "and tp4 all-reduce no parameters and send only activations, B·W per boundary or "
            "per layer pair, over the link where their group crosses the nodes. So the wider "
            "the model and the slower the link, the further the layouts without a parameter "
            "all-reduce pull ahead; with narrow layers over a fast link compute decides. pp4 "
            f"pays the bubble (P−1)/(M+P−1) = {3 / (FIG9_MICRO + 3):.2f} at M = {FIG9_MICRO}; "
            "tp divides each layer's compute by T and puts two all-reduces of activations per "
            "layer pair on the critical path, cheap while B ≪ W.")
