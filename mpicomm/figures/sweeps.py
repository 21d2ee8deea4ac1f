"""Figures 4 and 5 of ``python -m mpicomm experiments``: link and engine sweeps.

4. hierarchical (reduce_scatter, leader) against the flat ring as the emulated
   inter-node bandwidth falls (``model`` runs: measured points, predicted lines);
5. fusion: step time against ``--bucket-mb`` on the many-layer model; overlap:
   exposed against total communication with ``--overlap`` / ``--no-overlap``
   (``train`` runs; the lines are the ring formula per bucket).

Registered like the others (``mpicomm.figures.catalog``); each conclusion is
computed from the runs it just made.
"""

from __future__ import annotations

import os

from mpicomm.core.links import parse_link
from mpicomm.costmodel.formulas import ring_time
from mpicomm.figures import plot
from mpicomm.figures.catalog import _bytes, _rel, _x
from mpicomm.figures.registry import Context, Section, figure

__all__ = ["hierarchy_against_bandwidth", "fusion_and_overlap", "fusion_model_s",
           "hierarchy_bytes"]

# ------------------------------------------------------------------ figure 4
FIG4_GBPS = (10.0, 2.0, 1.0, 0.5, 0.2)  # the full sweep; --quick: the first, middle, last
FIG4_QUICK_GBPS = (10.0, 1.0, 0.2)
FIG4_LATENCY = "20us"
FIG4_RANKS, FIG4_RPN = 4, 2


def hierarchy_bytes(p: int, local: int, n: float) -> dict[str, float]:
    """Bytes each rank sends over the inter-node link per allreduce of n, by formula.

    flat ring: 2(p−1)/p·n (every step of a ring laid across nodes crosses one);
    hierarchical reduce_scatter: ring(m, n/L) among nodes, 2(m−1)/m·n/L;
    leader: ring(m, n) among the leaders, 2(m−1)/m·n.
    """
    m = max(p // local, 1)
    return {"ring": 2 * (p - 1) / p * n, "hierarchical": 2 * (m - 1) / m * n / local,
            "hierarchical(leader)": 2 * (m - 1) / m * n}


def _fig4_rows(docs: dict[tuple[float, str], dict]) -> list[dict]:
    rows = []
    for (gbps, variant), doc in docs.items():
        for r in doc["results"]:
            name = r["strategy"] if variant == "reduce_scatter" or r["strategy"] != \
                "hierarchical" else "hierarchical(leader)"
            rows.append({**r, "strategy": name, "inter_gbps": gbps})
    return rows


def _fig4_model(ctx: Context, rows: list[dict], n: int) -> None:
    """Redraw each row's prediction from ONE run's measured α, β(m), γ(m) (the fastest link's),
    the emulated link of its own bandwidth on top: one parameter set, so the lines show the
    formulas' shape instead of each run's own measurement noise. Rows keep ``run_predicted_us``."""
    from mpicomm.bench.profiles import measured_params
    from mpicomm.core.errors import ConfigError
    from mpicomm.costmodel.formulas import predict, with_emulated_links

    fastest = max(r["inter_gbps"] for r in rows)
    try:
        params, _ = measured_params(str(ctx.results / f"fig4_{fastest:g}gbps_reduce_scatter.json"))
    except ConfigError:
        return
    for r in rows:
        link = parse_link(f"{FIG4_LATENCY},{r['inter_gbps']:g}GB/s", "inter_link")
        variant = "leader" if r["strategy"] == "hierarchical(leader)" else "reduce_scatter"
        t = predict(r["strategy"].split("(")[0], FIG4_RANKS, n, with_emulated_links(params, link),
                    {"ranks_per_node": FIG4_RPN, "variant": variant})
        if t:
            r["run_predicted_us"], r["predicted_us"] = r.get("predicted_us"), t * 1e6
            r["measured_over_predicted"] = r["time_us"] / r["predicted_us"]


def _draw_fig4(rows: list[dict], png: str, n: int) -> str:
    fig, (ax,) = plot.new_figure(1, width=7.0, height=4.6)
    plot.measured_and_model(ax, rows, "inter_gbps")
    ax.set_xscale("log")
    ax.set_yscale("log")
    gbps = sorted({r["inter_gbps"] for r in rows})
    ax.set_xticks(gbps, [f"{g:g}" for g in gbps])
    ax.minorticks_off()
    ax.invert_xaxis()  # the link gets slower to the right
    ax.set_xlabel(f"emulated inter-node bandwidth (GB/s, latency {FIG4_LATENCY}; slower →)")
    ax.set_ylabel(f"time per allreduce of {plot.human_bytes(n)} (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")  # the slow, high right corner stays clear
    fig.suptitle(f"{FIG4_RANKS} ranks, {FIG4_RPN} per simulated node: hierarchy against the "
                 "flat ring as the inter-node link slows\nmeasured (points), α-β-γ model "
                 "(lines: the 10 GB/s run's measured α, β, γ + each emulated link)", fontsize=10)
    return plot.save(fig, png)


@figure("4", "hierarchical (reduce_scatter), leader and flat ring as the inter-node "
             "bandwidth falls")
def hierarchy_against_bandwidth(ctx: Context, sec: Section) -> None:
    size = "16M"
    docs = {}
    for gbps in ctx.pick(FIG4_QUICK_GBPS, FIG4_GBPS):
        common = ["model", "-b", size, "-e", size, "-n", ctx.pick("3", "10"),
                  "-w", ctx.pick("1", "2"), "--rounds", ctx.pick("1", "3"),
                  "--ranks-per-node", str(FIG4_RPN),
                  "--inter-link", f"{FIG4_LATENCY},{gbps:g}GB/s"]
        for variant, strategies in (("reduce_scatter", "ring,hierarchical"),
                                    ("leader", "hierarchical")):
            doc = ctx.mpicomm(FIG4_RANKS, common + ["--strategies", strategies,
                                                    "--variant", variant],
                              f"fig4_{gbps:g}gbps_{variant}.json")
            if doc:
                docs[(gbps, variant)] = doc
    rows = _fig4_rows(docs)
    if not rows:
        return
    n = _bytes(size)
    _fig4_model(ctx, rows, n)
    sec.figures.append(_rel(ctx, _draw_fig4(rows, ctx.png("fig4_hierarchy_vs_bandwidth.png"),
                                            n)))
    sec.conclusion = _fig4_text(rows, n)


def _fig4_text(rows: list[dict], n: int) -> str:
    """Speed-ups over the ring at the fastest and slowest link, against the bytes formula."""
    by = {(r["strategy"], r["inter_gbps"]): r for r in rows}
    hi, lo = max(r["inter_gbps"] for r in rows), min(r["inter_gbps"] for r in rows)
    sent = hierarchy_bytes(FIG4_RANKS, FIG4_RPN, n)
    parts = []
    for gbps in (hi, lo):
        ring = by.get(("ring", gbps))
        if not ring:
            continue
        cells = [f"ring {ring['time_us'] / 1e3:.1f} ms"]
        for name in ("hierarchical", "hierarchical(leader)"):
            r = by.get((name, gbps))
            if r:
                cells.append(f"{name} {r['time_us'] / 1e3:.1f} ms "
                             f"(speed-up over the ring {_x(ring['time_us'], r['time_us'])}"
                             + (f"; model {_x(ring['predicted_us'], r['predicted_us'])}"
                                if r.get("predicted_us") and ring.get("predicted_us") else "")
                             + ")")
        parts.append(f"at {gbps:g} GB/s " + ", ".join(cells))
    if not parts:
        return "No ring run finished (see notes)."
    ratios = [r["measured_over_predicted"] for r in rows if r.get("measured_over_predicted")]
    k = sum(0.75 <= x <= 1.25 for x in ratios)
    return (f"{FIG4_RANKS} ranks on {FIG4_RANKS // FIG4_RPN} simulated nodes, "
            f"{plot.human_bytes(n)}: " + "; ".join(parts) + ". "
            f"Per rank the inter-node link carries 2(p−1)/p·n = "
            f"{plot.human_bytes(sent['ring'])} for the flat ring, 2(m−1)/m·n/L = "
            f"{plot.human_bytes(sent['hierarchical'])} for reduce_scatter (the ring among "
            f"nodes moves only a 1/L slice) and 2(m−1)/m·n = "
            f"{plot.human_bytes(sent['hierarchical(leader)'])} for the leader variant, so once "
            f"the link's β dominates the speed-ups tend to "
            f"{_x(sent['ring'], sent['hierarchical'])} and "
            f"{_x(sent['ring'], sent['hierarchical(leader)'])}; on a fast link the intra-node "
            f"phases (shared memory, here slower than the emulated link at 10 GB/s) decide and "
            f"the gap closes. {k} of {len(ratios)} points lie within ±25% of the model; the "
            "leader variant's reduce and broadcast inside a node (MPI's own, over shared memory "
            "on an oversubscribed host) cost more than its formula at every bandwidth.")


# ------------------------------------------------------------------ figure 5
FIG5_BUCKETS = ("0", "0.01", "0.1", "1", "25")
FIG5_FUSION = ["--strategy", "ring", "--layers", "64,64x48,10", "--batch-size", "16",
               "--log-every", "0"]
FIG5_LINK = "50us,0.5GB/s"
FIG5_OVERLAP = ["--strategy", "ring", "--layers", "256,512x8,10", "--bucket-mb", "1",
                "--ranks-per-node", "1", "--inter-link", FIG5_LINK, "--log-every", "0"]


def fusion_model_s(p: int, grad_bytes: float, buckets: int, alpha: float, beta: float,
                   gamma: float = 0.0) -> float:
    """Ring time of one step's gradient in ``buckets`` equal buckets:
    B·2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ — fusion removes α's, never bytes."""
    b = max(int(buckets), 1)
    return b * ring_time(p, grad_bytes / b, alpha, beta, gamma)


def _train_rec(doc: dict | None) -> dict | None:
    recs = [r for r in (doc or {}).get("results", []) if r.get("step_time_mean_s")]
    return recs[0] if recs else None


def _fusion_params(ctx: Context) -> tuple[float, float, float] | None:
    """(α, β, γ) of this machine's exchange at 2 ranks, from figure 1's ``model`` run."""
    from mpicomm.bench.profiles import measured_params
    from mpicomm.core.errors import ConfigError

    try:
        params, _ = measured_params(str(ctx.results / "fig1_model_2ranks.json"))
    except ConfigError:
        return None
    link = params.intra
    big = 1 << 20
    return link.exchange_alpha(), link.beta_x_at(big), params.gamma_at(big)


@figure("5", "fusion: step time against bucket size; overlap: exposed against total "
             "communication")
def fusion_and_overlap(ctx: Context, sec: Section) -> None:
    steps = ctx.pick("50", "200")
    fusion = {}
    for mb in FIG5_BUCKETS:
        rec = _train_rec(ctx.mpicomm(2, ["train", *FIG5_FUSION, "--bucket-mb", mb,
                                         "--steps", steps], f"fig5_fusion_{mb}mb.json"))
        if rec:
            fusion[float(mb)] = rec
    overlap = {}
    for flag in ("--overlap", "--no-overlap"):
        rec = _train_rec(ctx.mpicomm(2, ["train", *FIG5_OVERLAP, flag, "--steps", steps],
                                     f"fig5_{flag.strip('-').replace('-', '_')}.json"))
        if rec:
            overlap[flag.strip("-")] = rec
    if not fusion and not overlap:
        return
    params = _fusion_params(ctx)
    link = parse_link(FIG5_LINK, "inter_link")
    png = _draw_fig5(fusion, overlap, params, (link.latency, 1 / link.bandwidth),
                     ctx.png("fig5_fusion_overlap.png"))
    sec.figures.append(_rel(ctx, png))
    sec.conclusion = _fig5_text(fusion, overlap, params, (link.latency, 1 / link.bandwidth))


def _bucket_x(mb: float) -> float:
    return mb if mb > 0 else 1e-3  # --bucket-mb 0 (no fusion) drawn left of 0.01


def _draw_fig5(fusion: dict, overlap: dict, params, link, png: str) -> str:
    fig, (fu, ov) = plot.new_figure(2, width=6.0, height=4.4)
    if fusion:
        mbs = sorted(fusion)
        x = [_bucket_x(m) for m in mbs]
        fu.plot(x, [fusion[m]["step_time_mean_s"] * 1e3 for m in mbs], "o-", color="C0",
                label="step time, measured")
        fu.plot(x, [fusion[m]["comm_total_s"] * 1e3 for m in mbs], "s-", color="C1",
                label="comm total, measured")
        fu.plot(x, [fusion[m]["comm_exposed_s"] * 1e3 for m in mbs], "^-", color="C2",
                label="comm exposed, measured")
        if params:
            fu.plot(x, [fusion_model_s(2, fusion[m]["grad_bytes"], fusion[m]["buckets"],
                                       *params) * 1e3 for m in mbs], ":", color="C1",
                    label="comm model: B·2(p−1)α + 2(p−1)/p·nβ + …")
        for m in mbs:
            fu.annotate(f"{fusion[m]['buckets']}", (_bucket_x(m),
                                                     fusion[m]["step_time_mean_s"] * 1e3),
                        textcoords="offset points", xytext=(0, 6), fontsize=7, ha="center")
        fu.set_xscale("log")
        fu.set_yscale("log")
        fu.set_xticks(x, ["0 (none)" if m == 0 else f"{m:g}" for m in mbs])
        fu.set_xlabel("--bucket-mb (number above a point: buckets per step)")
        fu.set_ylabel("ms per step")
        fu.set_title("fusion: 2 ranks, 64,64x48,10 layers, batch 16", fontsize=10)
        fu.grid(True, which="both", alpha=0.3)
        fu.legend(fontsize=7)
    if overlap:
        names = [k for k in ("overlap", "no-overlap") if k in overlap]
        xs = range(len(names))
        w = 0.27
        for i, (key, label) in enumerate((("compute_s", "compute"),
                                          ("comm_total_s", "comm total"),
                                          ("comm_exposed_s", "comm exposed"))):
            ov.bar([x + (i - 1) * w for x in xs], [overlap[k][key] * 1e3 for k in names], w,
                   label=label, color=f"C{i + 3}")
        rec = overlap[names[0]]
        model = fusion_model_s(2, rec["grad_bytes"], rec["buckets"], *link) * 1e3
        ov.axhline(model, ls=":", color="k",
                   label=f"comm model on the link: {model:.0f} ms")
        ov.set_xticks(list(xs), [f"--{k}\nstep {overlap[k]['step_time_mean_s'] * 1e3:.0f} ms"
                                 for k in names])
        ov.set_ylabel("ms per step")
        ov.set_title(f"overlap: 256,512x8,10, 1 MB buckets, emulated {FIG5_LINK}", fontsize=10)
        top = max(overlap[k][c] for k in names for c in ("compute_s", "comm_total_s"))
        ov.set_ylim(0, max(top * 1e3, model) * 1.4)  # room for the legend above the bars
        ov.grid(True, axis="y", alpha=0.3)
        ov.legend(fontsize=7, ncol=2, loc="upper center")
    return plot.save(fig, png)


def _fig5_text(fusion: dict, overlap: dict, params, link) -> str:
    text = ""
    if fusion:
        lo, hi = min(fusion), max(fusion)
        a, b = fusion[lo], fusion[hi]
        text += (f"Fusion: from --bucket-mb {lo:g} ({a['buckets']} buckets per step) to "
                 f"{hi:g} ({b['buckets']}), the step falls from "
                 f"{a['step_time_mean_s'] * 1e3:.1f} to {b['step_time_mean_s'] * 1e3:.1f} ms "
                 f"({_x(a['step_time_mean_s'], b['step_time_mean_s'])}) and total comm from "
                 f"{a['comm_total_s'] * 1e3:.1f} to {b['comm_total_s'] * 1e3:.1f} ms "
                 f"({_x(a['comm_total_s'], b['comm_total_s'])}) while the bytes stay "
                 f"{plot.human_bytes(a['grad_bytes'])}: each bucket pays the ring's 2(p−1)α, "
                 f"so B buckets cost B·2(p−1)α + 2(p−1)/p·nβ")
        if params:
            ma = fusion_model_s(2, a["grad_bytes"], a["buckets"], *params)
            mb = fusion_model_s(2, b["grad_bytes"], b["buckets"], *params)
            text += (f", which with this machine's α = {params[0] * 1e6:.0f} µs (figure 1's "
                     f"2-rank run) predicts {ma * 1e3:.1f} → {mb * 1e3:.1f} ms "
                     f"({_x(ma, mb)})")
        if a["buckets"] > b["buckets"]:
            per = (a["comm_total_s"] - b["comm_total_s"]) / (a["buckets"] - b["buckets"])
            text += (f". Measured, each extra bucket costs {per * 1e3:.2f} ms"
                     + (f" against the wire's 2(p−1)α = {2 * params[0] * 1e6:.0f} µs: the "
                        "per-call cost here is the engine's and the reducer's Python work and "
                        "the thread hand-off, which fusion removes with the α's"
                        if params and per > 4 * params[0] else ""))
        text += ". "
    if "overlap" in overlap and "no-overlap" in overlap:
        on, off = overlap["overlap"], overlap["no-overlap"]
        model = fusion_model_s(2, on["grad_bytes"], on["buckets"], *link)
        text += (f"Overlap, behind an emulated {FIG5_LINK} link ({on['buckets']} buckets of "
                 f"1 MB): with --overlap {on['comm_exposed_s'] * 1e3:.0f} of "
                 f"{on['comm_total_s'] * 1e3:.0f} ms of comm is exposed "
                 f"({100 * on['overlap_fraction']:.0f}% hidden), step "
                 f"{on['step_time_mean_s'] * 1e3:.0f} ms; with --no-overlap all "
                 f"{off['comm_exposed_s'] * 1e3:.0f} ms is, step "
                 f"{off['step_time_mean_s'] * 1e3:.0f} ms "
                 f"({_x(off['step_time_mean_s'], on['step_time_mean_s'])} the overlapped "
                 f"step). The link's formula gives {model * 1e3:.0f} ms of comm per step; "
                 f"overlap can hide at most the backward pass, so the exposed part is at least "
                 f"total − compute = {max(on['comm_total_s'] - on['compute_s'], 0) * 1e3:.0f} ms. ")
        if on["step_time_mean_s"] < off["step_time_mean_s"]:
            text += (f"Overlap saved {(off['step_time_mean_s'] - on['step_time_mean_s']) * 1e3:.0f}"
                     " ms a step.")
        else:
            text += (f"Here overlap did not pay: with the communication thread running beside "
                     f"backward, total comm grew from {off['comm_total_s'] * 1e3:.0f} to "
                     f"{on['comm_total_s'] * 1e3:.0f} ms — its copies and additions compete with "
                     f"the compute for this host's {os.cpu_count()} loaded cores (the emulated "
                     "link's waits do not), which the formula does not model.")
    return text.strip()


# ------------------------------------------- figures 6 and 7: registered once their flags exist
def has_compression() -> bool:
    """Whether ``--compress`` exists (branch codecs merged): a ``ReducerOptions`` field."""
    import dataclasses

    from mpicomm.core.options import ReducerOptions

    return any(f.name == "compress" for f in dataclasses.fields(ReducerOptions))


def has_real_ps() -> bool:
    """Whether ``--ps-mode`` exists (branch realps merged): the ``mpicomm.ps.server`` module."""
    import importlib.util

    return importlib.util.find_spec("mpicomm.ps.server") is not None


FIG6_CODECS = ("none", "fp16", "int8", "topk:0.1", "topk:0.01")
FIG6_TRAIN = ["--strategy", "ring", "--ranks-per-node", "1", "--inter-link", FIG5_LINK,
              "--log-every", "0"]


def compression_figure(ctx: Context, sec: Section) -> None:
    """Figure 6: bytes per step against held-out accuracy, and the loss per codec."""
    recs = {}
    for codec in FIG6_CODECS:
        rec = _train_rec(ctx.mpicomm(2, ["train", *FIG6_TRAIN, "--compress", codec, "--steps",
                                         ctx.pick("150", "400")],
                                     f"fig6_{codec.replace(':', '_')}.json"))
        if rec:
            recs[codec] = rec
    if len(recs) < 2:  # nothing to compare: the notes say which runs failed
        return
    sec.figures.append(_rel(ctx, _draw_fig6(recs, ctx.png("fig6_compression.png"))))
    sec.conclusion = _fig6_text(recs)


def _draw_fig6(recs: dict[str, dict], png: str) -> str:
    fig, (acc, loss) = plot.new_figure(2, width=6.0, height=4.4)
    names = list(recs)
    for i, c in enumerate(names):
        r = recs[c]
        acc.plot(r["bytes_per_step"] / 1e3, 100 * r["test_accuracy"], "o", color=f"C{i}",
                 label=c)
    acc.set_xscale("log")
    acc.set_xlabel("bytes sent per step by the busiest rank (KB, log)")
    acc.set_ylabel("held-out accuracy (%)")
    acc.set_title("compression: bytes against accuracy (2 ranks, ring)", fontsize=10)
    acc.grid(True, which="both", alpha=0.3)
    acc.legend(fontsize=7)
    if all(recs[c].get("loss_history") for c in names):
        for i, c in enumerate(names):
            r = recs[c]
            loss.plot(r["loss_history_step"], r["loss_history"], color=f"C{i}", lw=1, label=c)
        loss.set_xlabel("step")
        loss.set_yscale("log")
        loss.set_ylabel("training loss (cross-entropy, mean over workers, log)")
        loss.set_title("loss curves per codec", fontsize=10)
    else:  # records from before the loss history existed
        xs = range(len(names))
        loss.bar([x - 0.2 for x in xs], [recs[c]["train_loss_first"] for c in names], 0.4,
                 label="first logged train loss", color="C7")
        loss.bar([x + 0.2 for x in xs], [recs[c]["train_loss_last"] for c in names], 0.4,
                 label="last train loss", color="C0")
        loss.set_xticks(list(xs), names)
        loss.set_ylabel("training loss (cross-entropy)")
        loss.set_title("loss at the first and last step per codec", fontsize=10)
    loss.legend(fontsize=7)
    return plot.save(fig, png)


def _fig6_text(recs: dict[str, dict]) -> str:
    base = recs.get("none") or next(iter(recs.values()))
    parts = []
    for c, r in recs.items():
        parts.append(f"{c} {r['bytes_per_step'] / 1e3:,.0f} KB/step "
                     f"({_x(r['bytes_per_step'], base['bytes_per_step'])} none's), accuracy "
                     f"{100 * r['test_accuracy']:.1f}%, loss {r['train_loss_last']:.3f}")
    return ("Per codec (2 ranks, ring, emulated " + FIG5_LINK + " link): " + "; ".join(parts) +
            ". The ring's bytes term 2(p−1)/p·nβ scales with the bytes per element: fp16 "
            "halves it, int8 quarters it (plus a scale per block), top-k at ratio r sends "
            "about 2r·n (values and indices); the loss and accuracy say what that costs.")


FIG7_STRAGGLER = "1:20"


def straggler_figure(ctx: Context, sec: Section) -> None:
    """Figure 7: sync and async PS (3 workers + 1 dedicated server) against the ring."""
    steps = ctx.pick("100", "300")
    ps = ["--strategy", "ps", "--dedicated", "--ps-mode"]
    runs = {"ring": ["--strategy", "ring"],
            "ps sync": [*ps, "sync"],
            "ps ssp S=2": [*ps, "ssp", "--staleness", "2"],
            "ps async": [*ps, "async"],
            "async, shared momentum": [*ps, "async", "--ps-momentum", "shared"]}
    recs = {}
    for name, args in runs.items():
        rec = _train_rec(ctx.mpicomm(4, ["train", *args, "--straggler", FIG7_STRAGGLER,
                                         "--steps", steps, "--log-every", "0"],
                                     f"fig7_{_slug(name)}.json"))
        if rec:
            recs[name] = rec
    if not recs:
        return
    sec.figures.append(_rel(ctx, _draw_fig7(recs, ctx.png("fig7_straggler.png"))))
    sec.conclusion = _fig7_text(recs)


def _slug(name: str) -> str:
    """'async, shared momentum' -> 'async_shared_momentum' (a results file name)."""
    return "_".join(name.replace(",", " ").replace("=", "").split())


def _draw_fig7(recs: dict[str, dict], png: str) -> str:
    fig, (thr, acc) = plot.new_figure(2, width=6.5, height=4.6)
    names = list(recs)
    xs = list(range(len(names)))
    thr.bar(xs, [recs[n]["samples_per_sec"] for n in names], color="C0")
    thr.set_xticks(xs, [n.replace(", ", ",\n") for n in names], fontsize=7)
    thr.set_ylabel("samples/s (all workers)")
    thr.set_title(f"throughput, rank {FIG7_STRAGGLER.split(':')[0]} sleeps "
                  f"{FIG7_STRAGGLER.split(':')[1]} ms a step", fontsize=10)
    if all(recs[n].get("loss_history") for n in names):
        for i, n in enumerate(names):
            r = recs[n]
            acc.plot(r["wall_s_history"], r["loss_history"], color=f"C{i}", lw=1,
                     label=f"{n}: {100 * r['test_accuracy']:.1f}% held out")
        acc.set_xlabel("wall-clock seconds since the first step")
        acc.set_yscale("log")
        acc.set_ylabel("training loss (mean over workers, log)")
        acc.set_title("loss against wall-clock time", fontsize=10)
        acc.legend(fontsize=7)
    else:  # records from before the loss history existed
        acc.bar(xs, [100 * recs[n]["test_accuracy"] for n in names], color="C2")
        acc.set_xticks(xs, names)
        acc.set_ylabel("held-out accuracy (%)")
        acc.set_title("accuracy after the same steps", fontsize=10)
    return plot.save(fig, png)


def _fig7_text(recs: dict[str, dict]) -> str:
    parts = [f"{n} ({r.get('workers', '?')} workers) {r['samples_per_sec']:,.0f} samples/s, "
             f"accuracy {100 * r['test_accuracy']:.1f}%" for n, r in recs.items()]
    text = f"4 ranks, rank {FIG7_STRAGGLER.split(':')[0]} a straggler: " + "; ".join(parts) + ". "
    sync, asy = recs.get("ps sync"), recs.get("ps async")
    if sync and asy:
        gap = 100 * (asy["test_accuracy"] - sync["test_accuracy"])
        text += (f"Async runs {_x(asy['samples_per_sec'], sync['samples_per_sec'])} the sync "
                 f"server's samples/s and ends {abs(gap):.1f} points of accuracy "
                 f"{'behind' if gap < 0 else 'ahead of'} it after the same pushes in all. ")
    shared = recs.get("async, shared momentum")
    if asy and shared:
        text += (f"With one shared momentum instead of the look-ahead rule, async ends at "
                 f"{100 * shared['test_accuracy']:.1f}%: heavy-ball momentum on gradients "
                 "~W − 1 pushes old oscillates (docs/ps.md). ")
    return text + ("Sync PS and the ring make every worker wait for the slowest each step, "
                   "W/(t + d) samples per step time t with delay d; async lets the others go on, "
                   "(W−1)/t + 1/(t + d), at the price of stale gradients; SSP lets a worker lead "
                   "by S steps only, so against a straggler that never catches up it keeps the "
                   "sync pace.")


if has_compression():
    figure("6", "compression: bytes per step against held-out accuracy, loss per codec")(
        compression_figure)
if has_real_ps():
    figure("7", "async and sync PS against the ring with a straggler")(straggler_figure)
