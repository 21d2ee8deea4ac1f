"""experiments: a tiny registered figure end to end (runs, JSON, PNG, README section), timeouts."""

import json
import sys

import pytest

from mpicomm.bench import experiments as E
from mpicomm.bench import plot


@pytest.fixture
def ctx(tmp_path):
    root = tmp_path / "experiments"
    root.mkdir()
    return E.Context(root, quick=True, timeout_s=120)


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

    E.figure("t", "tiny figure")(tiny_figure)
    E.figure("tb", "broken figure")(broken)
    yield
    del E.FIGURES["t"], E.FIGURES["tb"]


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


def test_replot_runs_nothing(ctx, tiny):
    E.run_figures(ctx, ["t"])
    (ctx.results / "logs" / "t_bench.txt").unlink()
    ctx.replot = True
    E.run_figures(ctx, ["t"])
    assert not (ctx.results / "logs" / "t_bench.txt").exists()
    assert "ring ran 2 sizes" in (ctx.root / "README.md").read_text()


def test_timeout_kills_the_job(tmp_path):
    rc = E._run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, 1.0,
                tmp_path / "log.txt")
    assert rc is None


def test_unknown_figure_key(ctx):
    with pytest.raises(E.ConfigError, match="unknown figure 99"):
        E.run_figures(ctx, ["99"])


def test_registry_has_the_figures_of_this_branch():
    from mpicomm.bench import figures  # noqa: F401 - registers

    assert {"1", "2", "3", "8"} <= set(E.FIGURES)


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
