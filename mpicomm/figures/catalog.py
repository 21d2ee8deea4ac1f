"""The figures of ``python -m mpicomm experiments``: one registered function each.

Each function runs its sweeps through ``ctx.mpicomm`` (quick or full sizes from
``ctx.pick``), draws its PNGs, and writes a conclusion computed from the numbers it
just measured, naming the cost formula they test. Figures 4-7 (emulated links,
fusion/overlap, compression, async PS) are registered the same way when their
features land: ``@figure("4", "...")`` on a function ``(ctx, sec) -> None``.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from mpicomm.bench.profiles import PROFILES
from mpicomm.figures import plot
from mpicomm.figures.registry import Context, Section, figure

__all__ = ["busbw_against_size", "time_against_ranks", "training_scaling",
           "predicted_scaling"]

ALL = "native,ring,recursive_doubling,auto,hierarchical,ps"
MiB = 1 << 20


def _rel(ctx: Context, png: str) -> str:
    return str(Path(png).relative_to(ctx.root))


def _x(a: float, b: float) -> str:
    """a/b as "1.23×" (or "n/a" when b is not positive)."""
    if not b or b <= 0:
        return "n/a"
    return f"{a / b:.2f}×" if a / b < 100 else f"{a / b:,.0f}×"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


# ------------------------------------------------------------------ figure 1
def model_accuracy(doc: dict, min_bytes: int = MiB) -> tuple[int, int, float]:
    """(points within ±25%, points with a prediction, median measured/predicted) at ≥ min_bytes."""
    ratios = [r["measured_over_predicted"] for r in doc["results"]
              if r["bytes"] >= min_bytes and r.get("measured_over_predicted")]
    within = sum(0.75 <= x <= 1.25 for x in ratios)
    return within, len(ratios), statistics.median(ratios) if ratios else float("nan")


def _fig1_sentence(doc: dict) -> str:
    p = doc["world_ranks"]
    n = max(r["bytes"] for r in doc["results"])
    at = {r["strategy"]: r for r in doc["results"] if r["bytes"] == n}
    best = max(at.values(), key=lambda r: r["busbw_gbps"])
    ring, native = at.get("ring"), at.get("native")
    k, m, med = model_accuracy(doc)
    text = f"At {p} ranks and {plot.human_bytes(n)}, "
    if ring and native:
        text += (f"ring reaches {ring['busbw_gbps']:.2f} GB/s busbw, "
                 f"{_x(ring['busbw_gbps'], native['busbw_gbps'])} native's "
                 f"{native['busbw_gbps']:.2f} GB/s; ")
    text += f"the fastest is {best['strategy']} ({best['busbw_gbps']:.2f} GB/s). "
    text += (f"{k} of {m} measured points at ≥ 1 MiB lie within ±25% of the model "
             f"(median measured/predicted {med:.2f})")
    cores = os.cpu_count() or 1
    text += (f"; {p} ranks share {cores} cores here, which α-β-γ does not model."
             if p > cores else ".")
    if m and k < m / 2:
        text += (" Fewer than half are within: α, β(m), γ(m) are measured moments before the "
                 "sweep, and a busy host (see the load noted below) changes them in between; "
                 "on a quiet host 13 of 20 such points were (docs/experiments.md).")
    return text


@figure("1", "busbw against message size, every strategy, 2 and 4 ranks, with the model's lines")
def busbw_against_size(ctx: Context, sec: Section) -> None:
    docs = []
    for p in (2, 4):
        args = ["model", "--strategies", ALL, "-b", "4K", "-e", ctx.pick("16M", "64M"),
                "-f", ctx.pick("4", "2"), "-n", ctx.pick("5", "20"), "-w", "2",
                "--rounds", ctx.pick("1", "3")]
        if p > 2:  # 2 simulated nodes of 2, so hierarchical has two levels
            args += ["--ranks-per-node", "2"]
        doc = ctx.mpicomm(p, args, f"fig1_model_{p}ranks.json")
        if doc:
            docs.append(doc)
    if not docs:
        return
    png = plot.model_figure(docs, ctx.png("fig1_busbw_vs_size.png"),
                            "allreduce busbw against size: measured (points), α-β-γ model (lines)")
    sec.figures.append(_rel(ctx, png))
    sec.conclusion = (" ".join(_fig1_sentence(d) for d in docs) +
                      " Each line is its strategy's formula (ring: 2(p−1)α + 2(p−1)/p·nβ + "
                      "(p−1)/p·nγ; one server: 2(p−1)α + 2(p−1)·nβ + (p−1)·nγ) with α, β(m), "
                      "γ(m) measured by the same job; busbw = n/t·2(p−1)/p, so a ring limited "
                      "by β alone would draw a flat line at 1/(β + γ/2).")


# ------------------------------------------------------------------ figure 2
FIG2_LINK = "100us,0.1GB/s"


def _fig2_rows(docs: dict[tuple[int, str], dict]) -> list[dict]:
    """Every run's rows, ps relabelled by its server count, each with its rank count."""
    rows = []
    for (p, which), doc in docs.items():
        for r in doc["results"]:
            label = r["strategy"] if r["strategy"] != "ps" else f"ps(S={which})"
            rows.append({**r, "strategy": label, "ranks": p})
    return rows


def _fig2_virtual(docs: dict[tuple[int, str], dict]) -> bool:
    """Whether figure 2's runs were in virtual time (``--ranks-per-node`` and a link: the
    default; a JSON from before the clock was recorded says nothing, and was wall time)."""
    return any(doc.get("clock") == "virtual" for doc in docs.values())


def _fig2_link(link: str, virtual: bool) -> str:
    return f"a modelled {link} link (virtual clock)" if virtual else f"an emulated {link} link"


def _draw_fig2(rows: list[dict], png: str, n: int, link: str, virtual: bool = True) -> str:
    fig, (ax,) = plot.new_figure(1, width=7.0, height=4.6)
    plot.measured_and_model(ax, rows, "ranks")
    ax.set_xlabel(f"ranks p (2 per simulated node; nodes joined by {_fig2_link(link, virtual)})")
    ax.set_ylabel(f"time per allreduce of {plot.human_bytes(n)} (ms)")
    ax.set_xticks(sorted({r["ranks"] for r in rows}))
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.suptitle(f"allreduce time against ranks behind {_fig2_link(link, virtual)}:\n"
                 f"{'virtual time' if virtual else 'measured'} (points), α-β-γ model with the "
                 "link's α, β (lines)", fontsize=10)
    return plot.save(fig, png)


def _growth(rows: list[dict], name: str, key: str = "time_us",
            first: int = 0) -> tuple[int, float, int, float] | None:
    """(p0, value at p0, p1, value at p1) of ``name`` from the first count ≥ ``first`` on."""
    s = sorted((r["ranks"], r[key]) for r in rows
               if r["strategy"] == name and r["ranks"] >= first and r.get(key))
    return (s[0][0], s[0][1], s[-1][0], s[-1][1]) if len(s) > 1 else None


@figure("2", "allreduce time against ranks (2…8) behind an emulated inter-node link: "
             "ps S=1, ps S=p, ring, hierarchical")
def time_against_ranks(ctx: Context, sec: Section) -> None:
    size = ctx.pick("1M", "4M")
    n = _bytes(size)
    ranks = ctx.pick([2, 4, 6, 8], [2, 3, 4, 5, 6, 7, 8])
    common = ["model", "-b", size, "-e", size, "-n", ctx.pick("5", "10"), "-w", "2",
              "--rounds", ctx.pick("1", "3"), "--ranks-per-node", "2", "--inter-link", FIG2_LINK]
    docs = {}
    for p in ranks:
        for which, extra in (("1", ["--strategies", "ring,hierarchical,ps", "--servers", "1"]),
                             ("p", ["--strategies", "ps", "--servers", str(p)])):
            doc = ctx.mpicomm(p, common + extra, f"fig2_p{p}_s{which}.json")
            if doc:
                docs[(p, which)] = doc
    rows = _fig2_rows(docs)
    if not rows:
        return
    virtual = _fig2_virtual(docs)
    sec.figures.append(_rel(ctx, _draw_fig2(rows, ctx.png("fig2_time_vs_ranks.png"), n,
                                            FIG2_LINK, virtual)))
    sec.conclusion = _fig2_text(rows, n, FIG2_LINK, virtual)


def _fig2_text(rows: list[dict], n: int, link: str, virtual: bool = True) -> str:
    """Growth of each strategy's time over the multi-node counts, measured and predicted."""
    first = 4  # with 2 ranks per node, 2 ranks are one node: no emulated link crossed
    parts, growth = [], {}
    for name in ("ps(S=1)", "ps(S=p)", "ring", "hierarchical"):
        g, m = _growth(rows, name, first=first), _growth(rows, name, "predicted_us", first)
        if g:
            growth[name] = g[3] / g[1]
            parts.append(f"{name} {g[1] / 1e3:.2f} → {g[3] / 1e3:.2f} ms ({_x(g[3], g[1])}"
                         + (f"; model {_x(m[3], m[1])}" if m else "") + ")")
    if not parts:
        return "Too few multi-node rank counts ran to measure a growth (see notes)."
    p0 = min(r["ranks"] for r in rows if r["ranks"] >= first)
    p1 = max(r["ranks"] for r in rows)
    text = (f"Behind {_fig2_link(link, virtual)} between nodes, from {p0} to {p1} ranks at "
            f"{plot.human_bytes(n)}: " + "; ".join(parts) + ". "
            f"One server sends its answer to each of the p−1 other ranks through its one "
            f"interface, (p−1)·(α + nβ) for the pull alone, so its time grows as p−1, "
            f"{_x(p1 - 1, p0 - 1)}; the ring's bytes term 2(p−1)/p·nβ grows by only "
            f"{_x((p1 - 1) / p1, (p0 - 1) / p0)} and its latency term 2(p−1)α is small at this "
            f"size; S = p servers move the ring's bytes, 2(p−1)·(n/p)β per interface. ")
    ps, ring = growth.get("ps(S=1)"), growth.get("ring")
    if ps and ring:
        text += (f"Measured, the one server's time grew {ps / ring:.1f}× as much as the ring's"
                 + (", the formulas' shape. " if ps > ring else
                    ", against the formulas. "))
    top = {r["strategy"]: r for r in rows if r["ranks"] == p1 and r.get("measured_over_predicted")}
    if top:
        fit = ", ".join(f"{k} {v['measured_over_predicted']:.2f}" for k, v in sorted(top.items()))
        worst = max(top.values(), key=lambda r: r["measured_over_predicted"])
        text += (f"Measured/predicted at {p1} ranks: {fit}. ")
        if virtual:  # no sleeps, no waiting for a core: every message charged by the model
            text += ("In virtual time every message is charged by the link model and waiting "
                     "in MPI costs nothing, so ranks beyond this host's cores wait for no core; "
                     "what is left between point and line is where the clock's detail differs "
                     "from the closed formula (e.g. the additions, charged as CPU time, "
                     "against the formula's measured γ). ")
        elif worst["measured_over_predicted"] > 1.5:
            text += (f"{worst['strategy']} strays furthest: the link's sleeps do not use a core, "
                     f"but each of its dependent ring steps waits until every one of "
                     f"{p1} processes has had one of the {os.cpu_count()} cores, which α-β-γ "
                     "does not model; the server's few long transfers hide that. ")
    ratios = [r["measured_over_predicted"] for r in rows
              if r["ranks"] >= first and r.get("measured_over_predicted")]
    if ratios:
        k = sum(0.75 <= x <= 1.25 for x in ratios)
        text += (f"{k} of {len(ratios)} multi-node points lie within ±25% of the model "
                 f"(median measured/predicted {statistics.median(ratios):.2f}). ")
    return text + ("At 2 ranks both share one simulated node and cross no link between nodes, "
                   "so that point is the intra-node link's.")


def _bytes(text: str) -> int:
    from mpicomm.bench.harness import parse_bytes

    return parse_bytes(text)


# ------------------------------------------------------------------ figure 3
@figure("3", "training throughput and scaling efficiency against workers; step-time breakdown")
def training_scaling(ctx: Context, sec: Section) -> None:
    docs = []
    for p in ctx.pick([2, 4], [2, 3, 4]):
        doc = ctx.mpicomm(p, ["compare", "--strategies", "native,ps,ring,hierarchical",
                              "--steps", ctx.pick("150", "400"), "--repeats", ctx.pick("1", "3"),
                              "--log-every", "0"], f"fig3_compare_{p}ranks.json")
        if doc:
            docs.append(doc)
    if not docs:
        return
    sec.figures.append(_rel(ctx, plot.scaling_figure(docs, ctx.png("fig3_scaling.png"),
                                                      "training throughput against workers "
                                                      "(1 worker = rank 0 alone)")))
    for doc in docs:
        w = doc["results"][0]["workers"]
        sec.figures.append(_rel(ctx, plot.compare_figure(
            doc, ctx.png(f"fig3_breakdown_{w}workers.png"),
            f"{w} workers: throughput and where a step's time goes")))
    sec.conclusion = " ".join(_fig3_sentence(d) for d in docs) + (
        " Exposed comm is the time inside allreduce (this loop does not overlap). A one-server "
        "ps pushes and pulls (W−1)·n through one rank's link per step where each ring rank "
        "sends 2(W−1)/W·n: W/2 times the bytes, which the busiest rank's bytes confirm; its "
        "time follows only where bytes, not waiting for a core, decide. With more ranks than "
        f"this host's {os.cpu_count()} CPUs, efficiency falls for the CPU, not the network.")


def _fig3_sentence(doc: dict) -> str:
    recs = [r for r in doc["results"] if r.get("samples_per_sec")]
    w = recs[0]["workers"]
    best = max(recs, key=lambda r: r["samples_per_sec"])
    by = {r["strategy"]: r for r in recs}
    text = (f"With {w} workers {best['strategy']} is fastest, {best['samples_per_sec']:,.0f} "
            f"samples/s")
    if best.get("scaling_efficiency"):
        text += f" (scaling efficiency {best['scaling_efficiency']:.2f})"
    if "ps" in by and "ring" in by:
        ps, ring = by["ps"], by["ring"]
        text += (f"; ps spends {ps['comm_s'] * 1e3:.1f} ms per step in comm "
                 f"({100 * ps['comm_share']:.0f}%) against the ring's "
                 f"{ring['comm_s'] * 1e3:.1f} ms "
                 f"({100 * ring['comm_share']:.0f}%), and its busiest rank sends "
                 f"{_x(ps['bytes_per_step'], ring['bytes_per_step'])} the ring's bytes per step "
                 f"(formula: W/2 = {w / 2:g}×)")
    return text + "."


# ------------------------------------------------------------------ figure 8
PREDICT_PROFILES = ("dgx-h100-ib400", "dgx-h100-ib200", "ethernet-25g")
PREDICT_RANKS = "8,16,32,64,128,256,512,1024"
PREDICT_BYTES, COMPUTE_MS = "256M", 100.0


def _draw_fig8(docs: dict[str, dict], png: str) -> str:
    fig, axes = plot.new_figure(2, len(docs), width=6.0, height=3.8)
    for i, (name, doc) in enumerate(docs.items()):
        tm, eff = axes[2 * i], axes[2 * i + 1]
        for label, series in plot._series(doc["results"]).items():
            series = sorted(series, key=lambda r: r["ranks"])
            x = [r["ranks"] for r in series]
            kw = {"color": plot.color(label), "ls": plot.style(label),
                  "marker": plot.marker(label), "ms": 4}
            tm.plot(x, [r["predicted_us"] / 1e3 for r in series], label=label, **kw)
            eff.plot(x, [r["efficiency"] for r in series], **kw)
        for ax in (tm, eff):
            plot.ranks_axis(ax)
            ax.set_xlabel("ranks p (8 per node)")
            ax.grid(True, alpha=0.3)
        tm.set_yscale("log")
        tm.set_ylabel("predicted allreduce (ms)")
        tm.set_title(f"{name}: allreduce of {plot.human_bytes(_bytes(PREDICT_BYTES))}",
                     fontsize=10)
        eff.set_ylabel(f"compute / step ({COMPUTE_MS:g} ms compute)")
        eff.set_ylim(0, 1.05)
        eff.set_title(f"{name}: weak-scaling efficiency", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()  # one legend under every panel
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8,
               frameon=False)
    rows = 1 + (len(labels) - 1) // 6
    fig.tight_layout(rect=(0, (0.15 + 0.2 * rows) / fig.get_figheight(), 1, 1))  # inches
    return plot.save(fig, png, layout=False)


def _fig8_sentence(name: str, doc: dict) -> str:
    top = max(r["ranks"] for r in doc["results"])
    low = min(r["ranks"] for r in doc["results"] if r["nodes"] > 1)  # first multi-node count
    at = {r["strategy"]: r for r in doc["results"] if r["ranks"] == top}
    at_low = {r["strategy"]: r for r in doc["results"] if r["ranks"] == low}
    best = min(at.values(), key=lambda r: r["predicted_us"])
    ring, hier, ps1 = at["ring"], at["hierarchical"], at["ps(S=1)"]
    return (f"{name}, {top} ranks: fastest {best['strategy']} {_ms(best['predicted_us'] / 1e6)} "
            f"(efficiency {best['efficiency']:.2f}); ring {_ms(ring['predicted_us'] / 1e6)}, "
            f"{100 * ring['latency_us'] / ring['predicted_us']:.0f}% of it latency "
            f"(its bytes term {_ms(ring['bandwidth_us'] / 1e6)} against "
            f"{_ms(at_low['ring']['bandwidth_us'] / 1e6)} at {low} ranks); hierarchical "
            f"{_x(ring['predicted_us'], hier['predicted_us'])} faster than the flat ring; one "
            f"server {_x(ps1['predicted_us'], ring['predicted_us'])} slower than the ring "
            f"(efficiency {ps1['efficiency']:.2g}).")


@figure("8", "predicted scaling to 1,024 ranks for the cluster profiles")
def predicted_scaling(ctx: Context, sec: Section) -> None:
    docs = {}
    for name in PREDICT_PROFILES:
        assert name in PROFILES
        doc = ctx.mpicomm(None, ["model", "--predict", "--profile", name, "--ranks", PREDICT_RANKS,
                                 "-b", PREDICT_BYTES, "-e", PREDICT_BYTES,
                                 "--compute-ms", f"{COMPUTE_MS:g}"], f"fig8_predict_{name}.json",
                          timeout_s=60)
        if doc:
            docs[name] = doc
    if not docs:
        return
    sec.figures.append(_rel(ctx, _draw_fig8(docs, ctx.png("fig8_predicted_scaling.png"))))
    sec.conclusion = (
        f"A {plot.human_bytes(_bytes(PREDICT_BYTES))} gradient with {COMPUTE_MS:g} ms of "
        "compute per step (no overlap). "
        + " ".join(_fig8_sentence(k, d) for k, d in docs.items()) +
        " The ring's bytes term 2(p−1)/p·nβ is flat in p once it crosses nodes, while its "
        f"latency term grows with p (intra-node steps at the intra α, node crossings at the "
        f"inter α), to {_latency_shares(docs)} of its time at "
        f"{PREDICT_RANKS.rsplit(',', 1)[-1]} ranks; hierarchical and tree pay latency in "
        "steps per node or lg p instead; one server's bytes grow with every rank. Profiles "
        "cite their sources and are checked against published measurements "
        "(docs/validation.md); contention and stragglers are not modelled.")


def _latency_shares(docs: dict[str, dict]) -> str:
    shares = []
    for doc in docs.values():
        top = max(r["ranks"] for r in doc["results"])
        ring = next(r for r in doc["results"] if r["ranks"] == top and r["strategy"] == "ring")
        shares.append(100 * ring["latency_us"] / ring["predicted_us"])
    return f"{min(shares):.0f}–{max(shares):.0f}%" if len(shares) > 1 else f"{shares[0]:.0f}%"
