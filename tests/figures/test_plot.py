"""plot: the kind of a result file from its keys, and PNGs for each kind (small synthetic JSON)."""

import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT

from mpicomm.bench.predict import predict_rows
from mpicomm.bench.profiles import profile
from mpicomm.core.errors import ConfigError
from mpicomm.figures import plot

STRATS = ["native", "ring", "ps"]
SIZES = [4096, 65536, 1 << 20, 16 << 20]


def bench_doc(p=2, model=False):
    rows = []
    for k, s in enumerate(STRATS):
        for n in SIZES:
            t = 5 + n / (2e3 * (k + 1))  # µs
            r = {"strategy": s, "ranks": p, "bytes": n, "time_us": t,
                 "busbw_gbps": n / t / 1e3 * 2 * (p - 1) / p, "wrong": 0}
            if model:
                r["predicted_us"] = t * 0.9
                r["measured_over_predicted"] = 1 / 0.9
            rows.append(r)
    return {"command": "model" if model else "bench", "world_ranks": p, "results": rows}


def compare_doc(workers):
    rows = [{"strategy": s, "ranks": workers, "workers": workers, "samples_per_sec": 1e4 / (k + 1),
             "compute_s": 2e-3, "comm_s": 1e-3 * (k + 1), "optimizer_s": 3e-4, "other_s": 1e-4,
             "scaling_efficiency": 0.9 / (k + 1), "baseline_samples_per_sec": 6e3,
             "bytes_per_step": 1e6} for k, s in enumerate(STRATS)]
    return {"command": "compare", "results": rows}


def predict_doc():
    return {"command": "predict", "profile": {"name": "dgx-h100-ib400"}, "compute_ms": 50,
            "results": predict_rows(profile("dgx-h100-ib400"), [8, 64, 1024], [1 << 20, 1 << 28],
                                    compute_s=0.05)}


def test_detect_kind():
    assert plot.detect_kind(bench_doc()) == "bench"
    assert plot.detect_kind(bench_doc(model=True)) == "model"
    assert plot.detect_kind(compare_doc(2)) == "compare"
    assert plot.detect_kind(predict_doc()) == "predict"
    gloo = {"torch": "2", "results": [{"strategy": "gloo", "bytes": 8, "time_us": 1.0,
                                       "busbw_gbps": 0.1}]}
    assert plot.detect_kind(gloo) == "bench"
    with pytest.raises(ConfigError, match="cannot tell what wrote this JSON"):
        plot.detect_kind({"results": [{"foo": 1}]})


def test_load_rejects_non_results(tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="no 'results' list"):
        plot.load(str(tmp_path / "x.json"))
    (tmp_path / "y.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        plot.load(str(tmp_path / "y.json"))


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # several seconds (CI's slow step)
def test_every_kind_draws_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    docs = [("b", bench_doc()), ("m", bench_doc(4, model=True)), ("c2", compare_doc(2)),
            ("c4", compare_doc(4)), ("p", predict_doc())]
    made = plot.plot_docs(docs, str(tmp_path))
    names = sorted(p.rsplit("/", 1)[-1] for p in made)
    assert names == sorted(["b_busbw.png", "m_model.png", "c2_steps.png", "c4_steps.png",
                            "scaling.png", "p_predict_1048576B.png",
                            "p_predict_268435456B.png"])
    for path in made:
        assert _is_png(path) and (tmp_path / path.rsplit("/", 1)[-1]).stat().st_size > 5000


@pytest.mark.slow  # several seconds (CI's slow step)
def test_plot_command(tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(bench_doc()))
    out = tmp_path / "figs"
    done = subprocess.run([sys.executable, "-m", "mpicomm", "plot", str(src), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _is_png(out / "bench_busbw.png") and f"wrote {out / 'bench_busbw.png'}" in done.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": [{"foo": 1}]}')
    done = subprocess.run([sys.executable, "-m", "mpicomm", "plot", str(bad)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "cannot tell what wrote this JSON" in done.stderr


def test_missing_matplotlib_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'mpicomm\[plot\]'"):
        plot._plt()


def test_plot_out_that_cannot_be_made_is_one_line(tmp_path, monkeypatch):
    """`plot F.json --out /proc/nope` ended in a FileNotFoundError traceback (exit 1)."""
    import argparse

    from mpicomm.cli import plot as plot_cmd

    monkeypatch.setattr(plot, "_plt", lambda: None)  # refused before matplotlib is needed
    (tmp_path / "file").write_text("")
    for out in (str(tmp_path / "file" / "figs"), "/proc/nope"):
        args = argparse.Namespace(results=[str(ROOT / "experiments/results/bench_2ranks.json")],
                                  out=out)
        with pytest.raises(ConfigError, match=f"--out {out}: cannot create the folder"):
            plot_cmd.run(args)
    missing = tmp_path / "no" / "x.json"  # a file that cannot be read: no folder made for it
    with pytest.raises(ConfigError, match="cannot read a JSON result"):
        plot_cmd.run(argparse.Namespace(results=[str(missing)], out=None))
    assert not missing.parent.exists()
