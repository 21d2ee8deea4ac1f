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


@pytest.mark.slow
def test_torch_ddp_example_refuses_unknown_strategy():
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), "--strategy", "rign"],
                  timeout=120)
    assert res.returncode != 0 and "unknown ['rign']" in res.stdout, res.tail()


@pytest.mark.slow
def test_torch_ddp_example_compresses_the_hook(tmp_path):
    """--compress reaches HookState (it had no such flag): the ring's buckets go as fp16, the
    model still learns and stays in sync, and its loss stays near gloo's uncompressed one."""
    out = tmp_path / "ddp.json"
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), "--strategy", "gloo,ring",
                      "--compress", "fp16", "--steps", "40", "--hidden", "32", "--json",
                      str(out)], timeout=180)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    assert "ring+fp16" in res.stdout and "WARNING" not in res.stdout, res.tail()
    recs = {r["strategy"]: r for r in json.loads(out.read_text())["results"]}
    assert (recs["gloo"]["compress"], recs["ring"]["compress"]) == ("none", "fp16")
    assert recs["ring"]["params_in_sync"] and recs["ring"]["test_accuracy"] > 0.5
    # fp16 rounds each bucket (relative 2^-11): the loss moves, but little, and not to zero
    assert 0 < abs(recs["gloo"]["final_loss"] - recs["ring"]["final_loss"]) < 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("flags, said", [
    (["--strategy", "ring", "--compress", "fp17"], "unknown compress codec 'fp17'"),
    (["--strategy", "gloo", "--compress", "int8"], "gloo (DDP's own allreduce) never compresses"),
])
def test_torch_ddp_example_refuses_a_compress_that_cannot_work(flags, said):
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), *flags], timeout=120)
    assert res.returncode == 2 and res.stdout.count(said) == 1, res.tail()
    assert "Traceback" not in res.stdout + res.stderr
