"""experiments: a tiny registered figure end to end (runs, JSON, PNG, README section), timeouts."""

import json
import sys

import pytest

from mpicomm.figures import plot
from mpicomm.figures import registry as R
from mpicomm.figures import runner as E


@pytest.fixture
def ctx(tmp_path):
    root = tmp_path / "experiments"
    root.mkdir()
    return R.Context(root, quick=True, timeout_s=120)


@pytest.fixture
def tiny():
    """Register figure "t": one prediction (no MPI) and one 2-rank bench, then unregister."""
    def tiny_figure(ctx, sec):
        pred = ctx.mpicomm(None, ["model", "--predict", "--profile", "dgx-h100-ib400",
                                  "--ranks", "8,64", "-b", "1M", "-e", "1M"], "t_predict.json")
        bench = ctx.mpicomm(2, ["bench", "--strategies", "ring,native", "-b", "1K", "-e", "4K",
                                "-f", "4", "-n", "2", "-w", "1"], "t_bench.json")
        sec.figures.append(str(plot.predict_figure(pred, ctx.png("t_predict.png")))
                           .removeprefix(str(ctx.root) + "/"))
        ring = [r for r in bench["results"] if r["strategy"] == "ring"]
        sec.conclusion = f"ring ran {len(ring)} sizes, largest {ring[-1]['bytes']} B"

    def broken(ctx, sec):
        ctx.mpicomm(None, ["model", "--predict", "--profile", "nope"], "t_broken.json")
        raise RuntimeError("no data")

    R.figure("t", "tiny figure")(tiny_figure)
    R.figure("tb", "broken figure")(broken)
    yield
    del E.FIGURES["t"], E.FIGURES["tb"]


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_tiny_figure_end_to_end(ctx, tiny):
    sections = E.run_figures(ctx, ["t"])
    assert [s.key for s in sections] == ["t"]
    assert [n.split(" at the start")[0].rsplit(" ", 1)[0] for n in sections[0].notes] == \
        ["host load average"]  # the one note: the host's load, no failure
    pred = json.loads((ctx.results / "t_predict.json").read_text())
    assert pred["command"] == "predict" and len(pred["results"]) > 0
    bench = json.loads((ctx.results / "t_bench.json").read_text())
    assert bench["world_ranks"] == 2 and all(r["wrong"] == 0 for r in bench["results"])
    png = ctx.figures / "t_predict.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    readme = (ctx.root / "README.md").read_text()
    assert "## Figure t: tiny figure" in readme
    assert "![figure t](figures/t_predict.png)" in readme
    assert "ring ran 2 sizes, largest 4096 B" in readme
    assert "mpiexec -n 2 python -m mpicomm bench --strategies ring,native" in readme
    assert "python -m mpicomm model --predict --profile dgx-h100-ib400" in readme
    saved = json.loads((ctx.results / "sections" / "t.json").read_text())
    assert saved["conclusion"] == "ring ran 2 sizes, largest 4096 B" and saved["quick"]


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_failures_become_notes_and_other_sections_are_kept(ctx, tiny):
    E.run_figures(ctx, ["t"])
    sections = E.run_figures(ctx, ["tb"])  # a second, partial run
    notes = sections[0].notes
    assert any("exited 2" in n and "t_broken" in n for n in notes), notes
    assert any("RuntimeError: no data" in n for n in notes), notes
    log = (ctx.results / "logs" / "t_broken.txt").read_text()
    assert "unknown profile 'nope'" in log
    readme = (ctx.root / "README.md").read_text()
    assert "## Figure t: tiny figure" in readme and "## Figure tb: broken figure" in readme
    assert readme.index("Figure t:") < readme.index("Figure tb:")  # registry order
    assert "_No conclusion: the runs failed" in readme


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_replot_runs_nothing(ctx, tiny):
    E.run_figures(ctx, ["t"])
    (ctx.results / "logs" / "t_bench.txt").unlink()
    ctx.replot = True
    E.run_figures(ctx, ["t"])
    assert not (ctx.results / "logs" / "t_bench.txt").exists()
    assert "ring ran 2 sizes" in (ctx.root / "README.md").read_text()


def test_timeout_kills_the_job(tmp_path):
    rc = R._run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, 1.0,
                tmp_path / "log.txt")
    assert rc is None


def test_unknown_figure_key(ctx):
    with pytest.raises(E.ConfigError, match="unknown figure 99"):
        E.run_figures(ctx, ["99"])


def test_registry_has_the_figures_of_this_branch():
    assert {"1", "2", "3", "4", "5", "8", "9", "10"} <= set(E.FIGURES)


@pytest.mark.slow
def test_command_figure_8_end_to_end(tmp_path):
    """`experiments --only 8` on the command line: predictions, PNG, a conclusion from them."""
    pytest.importorskip("matplotlib")
    import subprocess

    from mpi_harness import ROOT

    root = tmp_path / "experiments"
    root.mkdir()
    done = subprocess.run([sys.executable, "-m", "mpicomm", "experiments", "--quick", "--only",
                           "8", "--root", str(root)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((root / "results" / "fig8_predict_dgx-h100-ib400.json").read_text())
    ring = {r["ranks"]: r for r in doc["results"] if r["strategy"] == "ring"}
    readme = (root / "README.md").read_text()
    assert "![figure 8](figures/fig8_predicted_scaling.png)" in readme
    assert (root / "figures" / "fig8_predicted_scaling.png").read_bytes()[:4] == b"\x89PNG"
    # the conclusion quotes the numbers of this run's JSON
    assert f"ring {ring[1024]['predicted_us'] / 1e3:.3g} ms" in readme
    done = subprocess.run([sys.executable, "-m", "mpicomm", "experiments", "--root",
                           str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "no such folder" in done.stderr


# ------------------------------------------------ figures 2, 4, 5 on synthetic records
def _model_row(strategy, t_us, pred_us, **extra):
    return {"strategy": strategy, "bytes": 1 << 20, "time_us": t_us, "predicted_us": pred_us,
            "measured_over_predicted": t_us / pred_us, **extra}


@pytest.mark.slow
def test_figure2_text_and_plot_from_records(tmp_path):
    pytest.importorskip("matplotlib")
    from mpicomm.figures import catalog as F

    docs = {}
    for p in (2, 4, 8):  # one server grows as p−1, the ring nearly flat
        docs[(p, "1")] = {"results": [_model_row("ring", 1000 * (1 + p / 8), 1000 * (1 + p / 8)),
                                      _model_row("ps", 3000 * (p - 1), 2900 * (p - 1))]}
    rows = F._fig2_rows(docs)
    assert {r["strategy"] for r in rows} == {"ring", "ps(S=1)"}
    text = F._fig2_text(rows, 1 << 20, "100us,0.1GB/s")
    # from 4 (the first multi-node count) to 8 ranks: 9 → 21 ms, 7/3 = 2.33×
    assert "ps(S=1) 9.00 → 21.00 ms (2.33×; model 2.33×)" in text
    assert "ring 1.50 → 2.00 ms (1.33×" in text
    assert "the one server's time grew 1.8× as much as the ring's, the formulas' shape" in text
    assert "Measured/predicted at 8 ranks: ps(S=1) 1.03, ring 1.00." in text
    assert "4 of 4 multi-node points lie within ±25%" in text
    png = F._draw_fig2(rows, str(tmp_path / "f2.png"), 1 << 20, "100us,0.1GB/s")
    assert open(png, "rb").read(4) == b"\x89PNG"


def test_figure2_caption_says_which_clock():
    """Figure 2 runs in virtual time (its runs give --ranks-per-node and a link), but its
    caption blamed the link's sleeps and waiting for a core: wall-clock behaviour (issue 35)."""
    from mpicomm.figures import catalog as F

    docs = {(p, "1"): {"clock": "virtual", "results": [
        _model_row("ring", 1000 * (1 + p / 8), 1000 * (1 + p / 8) * 0.5)]} for p in (2, 4, 8)}
    assert F._fig2_virtual(docs) and not F._fig2_virtual({k: {"results": []} for k in docs})
    virtual = F._fig2_text(F._fig2_rows(docs), 1 << 20, "100us,0.1GB/s", virtual=True)
    wall = F._fig2_text(F._fig2_rows(docs), 1 << 20, "100us,0.1GB/s", virtual=False)
    assert "sleeps" not in virtual and "wait for no core" in virtual, virtual
    assert "modelled 100us,0.1GB/s link (virtual clock)" in virtual
    assert "sleeps" in wall and "emulated 100us,0.1GB/s link" in wall


def test_figure4_bytes_formula_and_text(tmp_path):
    pytest.importorskip("matplotlib")
    from mpicomm.figures import sweeps as S

    n = 16 << 20
    sent = S.hierarchy_bytes(4, 2, n)  # p=4, L=2, m=2
    assert sent == {"ring": 1.5 * n, "hierarchical": 0.5 * n, "hierarchical(leader)": 1.0 * n}
    docs = {}
    for g in S.FIG4_GBPS:
        docs[(g, "reduce_scatter")] = {"results": [_model_row("ring", 1.5e4 / g, 1.5e4 / g),
                                                   _model_row("hierarchical", 5e3 / g, 5e3 / g)]}
        docs[(g, "leader")] = {"results": [_model_row("hierarchical", 1e4 / g, 1e4 / g)]}
    rows = S._fig4_rows(docs)
    assert {r["strategy"] for r in rows} == {"ring", "hierarchical", "hierarchical(leader)"}
    text = S._fig4_text(rows, n)
    assert "at 0.2 GB/s ring 75.0 ms, hierarchical 25.0 ms (speed-up over the ring 3.00×; " \
           "model 3.00×), hierarchical(leader) 50.0 ms (speed-up over the ring 1.50×" in text
    assert "the speed-ups tend to 3.00× and 1.50×" in text
    assert "15 of 15 points lie within ±25%" in text
    png = S._draw_fig4(rows, str(tmp_path / "f4.png"), n)
    assert open(png, "rb").read(4) == b"\x89PNG"


def test_figure5_fusion_model_and_text(tmp_path):
    pytest.importorskip("matplotlib")
    from mpicomm.figures import sweeps as S

    # 2 ranks: B·2α + n·β (+ n/2·γ); 100 buckets of 1 MB at α = 10 µs, β = 1 ns/B
    assert S.fusion_model_s(2, 1e8, 100, 10e-6, 1e-9) == pytest.approx(100 * 2 * 10e-6 + 0.1)
    assert S.fusion_model_s(2, 1e8, 0, 10e-6, 1e-9) == pytest.approx(2 * 10e-6 + 0.1)

    def rec(buckets, step, total, exposed, compute=0.01):
        return {"buckets": buckets, "grad_bytes": 800_000, "step_time_mean_s": step,
                "comm_total_s": total, "comm_exposed_s": exposed, "compute_s": compute,
                "overlap_fraction": 1 - exposed / total}

    fusion = {0.0: rec(98, 0.5, 0.45, 0.4), 25.0: rec(1, 0.02, 0.01, 0.008)}
    overlap = {"overlap": rec(9, 0.3, 0.2, 0.12, 0.15), "no-overlap": rec(9, 0.36, 0.2, 0.2, 0.15)}
    link = (50e-6, 2e-9)
    text = S._fig5_text(fusion, overlap, (20e-6, 1e-9, 1e-10), link)
    assert "from --bucket-mb 0 (98 buckets per step) to 25 (1), the step falls from 500.0 to " \
           "20.0 ms (25.00×)" in text
    assert "predicts 4.8 → 0.9 ms" in text  # 98·2·20 µs + 0.8 ms + 0.04 ms; 1 bucket: 0.88
    assert "with --overlap 120 of 200 ms of comm is exposed (40% hidden)" in text
    assert "all 200 ms is, step 360 ms (1.20× the overlapped step)" in text
    assert "at least total − compute = 50 ms" in text
    png = S._draw_fig5(fusion, overlap, (20e-6, 1e-9, 1e-10), link, str(tmp_path / "f5.png"))
    assert open(png, "rb").read(4) == b"\x89PNG"


def test_registry_order_is_numeric():
    assert E.ordered_keys(["8", "10", "2", "t", "1"]) == ["1", "2", "8", "10", "t"]


def test_figures_6_and_7_drafts_on_synthetic_records(tmp_path):
    """Registered only once --compress / --ps-mode land; their text and plots work now."""
    pytest.importorskip("matplotlib")
    from mpicomm.figures import sweeps as S
    assert ("6" in E.FIGURES) == S.has_compression()
    assert ("7" in E.FIGURES) == S.has_real_ps()
    recs = {c: {"bytes_per_step": b, "test_accuracy": a, "train_loss_first": 2.3,
                "train_loss_last": lo}
            for c, b, a, lo in (("none", 8e5, 0.9, 0.3), ("int8", 2e5, 0.89, 0.31))}
    text = S._fig6_text(recs)
    assert "none 800 KB/step (1.00× none's), accuracy 90.0%" in text
    assert "int8 200 KB/step (0.25× none's), accuracy 89.0%, loss 0.310" in text
    assert open(S._draw_fig6(recs, str(tmp_path / "f6.png")), "rb").read(4) == b"\x89PNG"
    recs = {n: {"samples_per_sec": s, "test_accuracy": 0.8} for n, s in
            (("ring", 1000.0), ("ps sync", 900.0), ("ps async", 2700.0))}
    assert "Async runs 3.00× the sync server's samples/s and ends 0.0 points of accuracy " \
        "ahead of it" in S._fig7_text(recs)
    assert open(S._draw_fig7(recs, str(tmp_path / "f7.png")), "rb").read(4) == b"\x89PNG"


def test_figure5_text_says_when_overlap_did_not_pay():
    from mpicomm.figures import sweeps as S

    def rec(step, total, exposed):
        return {"buckets": 9, "grad_bytes": 8e6, "step_time_mean_s": step, "comm_total_s": total,
                "comm_exposed_s": exposed, "compute_s": 0.01, "overlap_fraction": 0.2}

    slower = {"overlap": rec(0.044, 0.033, 0.026), "no-overlap": rec(0.039, 0.024, 0.024)}
    assert "overlap did not pay: with the communication thread running beside backward, total " \
           "comm grew from 24 to 33 ms" in S._fig5_text({}, slower, None, (50e-6, 2e-9))
    faster = {"overlap": rec(0.030, 0.033, 0.010), "no-overlap": rec(0.039, 0.024, 0.024)}
    assert "Overlap saved 9 ms a step." in S._fig5_text({}, faster, None, (50e-6, 2e-9))


def test_figure5_text_names_the_measured_cost_per_bucket():
    from mpicomm.figures import sweeps as S

    def rec(buckets, total):
        return {"buckets": buckets, "grad_bytes": 800_000, "step_time_mean_s": total + 0.001,
                "comm_total_s": total, "comm_exposed_s": total}

    text = S._fig5_text({0.0: rec(98, 0.0345), 25.0: rec(1, 0.0021)}, {}, (3e-6, 1e-9, 0.0),
                        (50e-6, 2e-9))
    assert "each extra bucket costs 0.33 ms against the wire's 2(p−1)α = 6 µs" in text


@pytest.mark.slow
def test_runs_write_to_untracked_results_unless_asked(tmp_path):
    """A plain run writes into ./results (in .gitignore), never into the committed experiments/."""
    pytest.importorskip("matplotlib")
    import os
    import subprocess

    from mpi_harness import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mpicomm", "experiments", "--quick", "--only",
                           "8"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "results" / "README.md").exists()
    assert (tmp_path / "results" / "figures" / "fig8_predicted_scaling.png").exists()
    assert not (tmp_path / "experiments").exists()
    assert "/results/" in (ROOT / ".gitignore").read_text().split()
    done = subprocess.run([sys.executable, "-m", "mpicomm", "experiments", "--update-committed",
                           "--root", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "leave out --root" in done.stderr, done.stderr


FIG9_GRID = {"20us,10GB/s": {128: {"dp": {"samples_per_sec": 900.0},
                                   "tp4": {"samples_per_sec": 600.0}},
                             1024: {"dp": {"samples_per_sec": 100.0},
                                    "tp4": {"samples_per_sec": 300.0}}},
             "20us,0.1GB/s": {128: {"dp": {"samples_per_sec": 50.0},
                                    "pp4": {"samples_per_sec": 400.0}}}}


def test_figure9_text_from_records():
    """Which layout wins, per link and width, named from the records' samples/s."""
    from mpicomm.figures import layouts as L
    text = L._fig9_text(FIG9_GRID)
    assert "inter-node 20us,10GB/s: W=128 dp 900 samples/s, W=1024 tp4 300 samples/s " \
           "(3.00× dp); inter-node 20us,0.1GB/s: W=128 pp4 400 samples/s (8.00× dp)" in text
    args = L.fig9_args(512, "20us,1GB/s", "5")
    assert args[args.index("--layers") + 1] == "512,512,512,512,10"
    assert args[-2:] == ["--clock", "virtual"]


@pytest.mark.slow
def test_figure9_plot_from_records(tmp_path):
    pytest.importorskip("matplotlib")
    from mpicomm.figures import layouts as L
    assert open(L._draw_fig9(FIG9_GRID, str(tmp_path / "f9.png")), "rb").read(4) == b"\x89PNG"


@pytest.mark.parametrize("flags, message", [
    ({"timeout": -5.0}, "--timeout must be > 0 seconds, got -5"),
    ({"timeout": 0.0}, "--timeout must be > 0 seconds, got 0"),
    ({"wait_quiet": -1.0}, "--wait-quiet must be >= 0 seconds, got -1"),
])
def test_experiments_refuses_bad_seconds(flags, message, tmp_path):
    """`experiments --timeout -5` ran (0 silently meant the default); now one line, exit 2."""
    import argparse

    from mpicomm.cli import experiments as cmd

    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    args = parser.parse_args(["--root", str(tmp_path), "--only", "8"])
    vars(args).update(flags)
    with pytest.raises(E.ConfigError, match=message):
        cmd.run(args)
    assert not (tmp_path / "README.md").exists()


# ------------------------------------------------ figure 10 on synthetic records
FIG10_PANELS = {("25 GbE", "resnet50"): {
    "predicted": {"ps": {8: 0.98, 16: 0.40, 1024: 0.05}, "ring": {8: 1.0, 16: 0.95, 1024: 0.70},
                  "hierarchical": {8: 1.0, 16: 0.97, 1024: 0.90}},
    "nccl": {"ps": {8: 0.97, 1024: 0.06}, "ring": {8: 1.0, 1024: 0.60},
             "hierarchical": {8: 1.0, 1024: 0.91}},
    "virtual": {"ps": {8: 0.96, 16: 0.42}, "ring": {8: 1.0}}}}


def test_figure10_text_from_records():
    """The best strategy at the largest count (mpicomm's reducers, NCCL's forms in brackets),
    where ps falls under the ring, and the largest gap of a virtual point from the line of
    the reducers it ran (never from NCCL's), all read from the records."""
    from mpicomm.figures import workload_scaling as W
    text = W.conclusion(FIG10_PANELS)
    assert "resnet50 on 25 GbE: at 1024 GPUs hierarchical 0.90 [0.91] (ps 0.05 [0.06], " \
           "ring 0.70 [0.60])" in text
    assert "ps under the ring from 16 GPUs" in text
    assert "The 3 virtual-run points lie within 5.0% of the lines of the reducers they ran " \
           "(largest: ps, resnet50 on 25 GbE at 16 ranks)" in text
    args = W.virtual_args("ethernet-25g", "v100", "resnet50", 64, 16)
    assert args[args.index("--servers") + 1] == "2"  # one server per node of 8
    assert args[-2:] == ["--clock", "virtual"] and "--accelerator" in args
    pred = W.predict_args("dgx-h100-ib400", None, "bert-large", 32, 1024)
    assert pred[pred.index("--servers") + 1] == "128" and "--accelerator" not in pred
    assert pred[pred.index("--reducers") + 1] == "mpicomm"  # the solid lines: what runs
    nccl = W.predict_args("dgx-h100-ib400", None, "bert-large", 32, 1024, "nccl")
    assert nccl[nccl.index("--reducers") + 1] == "nccl"


def test_figure10_points_per_cluster_and_the_256_rank_point_is_never_run():
    """Each panel's virtual points are its own (profile, model); the committed 128- and
    256-rank points are on the full figure and the quick one, always read, never run, each
    with its JSON committed and its wall time stated."""
    from mpi_harness import ROOT

    from mpicomm.figures import workload_scaling as W
    full = W.virtual_points("ethernet-25g", "resnet50", quick=False)
    assert full == [(8, False), (16, False), (32, False), (64, False), (128, True), (256, True)]
    assert W.virtual_points("ethernet-25g", "resnet50", quick=True)[-1] == (256, True)
    for prof, m, p in W.FIG10_VIRTUAL_COMMITTED:
        assert W.FIG10_VIRTUAL_COMMITTED[(prof, m, p)].endswith(" s")  # its wall time
        assert (ROOT / "experiments" / "results" / f"fig10_virtual_{prof}_{m}_{p}.json").exists()
    assert W.virtual_points("dgx-h100-ib400", "resnet50", quick=False)[-2:] == [
        (128, True), (256, True)]
    assert W.virtual_points("ethernet-25g", "bert-large", quick=False) == [
        (8, False), (16, False), (32, True), (64, True), (128, True), (256, True)]
    assert W.virtual_points("dgx-h100-ib400", "bert-large", quick=False) == [
        (8, False), (16, False), (32, True), (64, True), (128, True), (256, True)]
    assert all(p <= 64 for prof, _, p in W.FIG10_VIRTUAL_FULL)  # what a sweep may run


def test_figure10_committed_point_is_read_not_run(tmp_path, monkeypatch):
    """A committed-only point: this run's saved JSON if there, else the committed one beside
    this run's root; never a process; a note says so."""
    from mpicomm.figures import registry
    from mpicomm.figures import workload_scaling as W
    monkeypatch.setattr(registry, "_run", lambda *a, **k: pytest.fail("ran a process"))
    name = "fig10_virtual_ethernet-25g_resnet50_256.json"
    committed = tmp_path / W.COMMITTED_ROOT / "results"
    committed.mkdir(parents=True)
    (committed / name).write_text(json.dumps({"results": [{"strategy": "ring"}]}))
    ctx = registry.Context(tmp_path / "results_root", quick=False)
    args = W.virtual_args("ethernet-25g", "v100", "resnet50", 64, 256)
    assert W._read_committed(ctx, 256, args, name)["results"][0]["strategy"] == "ring"
    assert ctx.commands[0].startswith("mpiexec -n 256 ") and "run by hand" in ctx.notes[0]
    (ctx.results).mkdir(parents=True)
    (ctx.results / name).write_text(json.dumps({"results": []}))  # this run's own copy first
    assert W._read_committed(ctx, 256, args, name) == {"results": []}


@pytest.mark.slow
def test_figure10_plot_from_records(tmp_path):
    pytest.importorskip("matplotlib")
    from mpicomm.figures import workload_scaling as W
    assert open(W.draw(FIG10_PANELS, str(tmp_path / "f10.png")), "rb").read(4) == b"\x89PNG"
