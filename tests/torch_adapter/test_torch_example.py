"""experiments/torch_ddp.py runs under mpiexec, prints its table, and gloo and the ring hook
train the same model to the same loss."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
from mpi_harness import ROOT, run_mpi  # noqa: E402


@pytest.mark.slow
def test_torch_ddp_example(tmp_path):
    out = tmp_path / "ddp.json"
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), "--strategy", "gloo,ring",
                      "--steps", "40", "--hidden", "32", "--json", str(out)], timeout=180)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    assert "× gloo" in res.stdout and "WARNING" not in res.stdout, res.tail()
    recs = {r["strategy"]: r for r in json.loads(out.read_text())["results"]}
    assert set(recs) == {"gloo", "ring"}
    for r in recs.values():
        assert r["params_in_sync"] and r["samples_per_sec"] > 0 and 0 <= r["comm_share"] <= 1
        assert r["test_accuracy"] > 0.5  # 40 steps of a small MLP: far above chance (10%)
    assert abs(recs["gloo"]["final_loss"] - recs["ring"]["final_loss"]) < 1e-4


def test_torch_ddp_example_refuses_unknown_strategy():
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), "--strategy", "rign"],
                  timeout=120)
    assert res.returncode != 0 and "unknown ['rign']" in res.stdout, res.tail()
