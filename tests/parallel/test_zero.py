"""ZeRO-1/2 (``--strategy zero``): the ring's parameters every step, its bytes, 1/p momentum."""

import json
from pathlib import Path

import pytest
from mpi_harness import run_mpi

from mpicomm.train.config import ConfigError, TrainConfig
from mpicomm.train.zero_setup import check_zero_flags

SCRIPT = Path(__file__).resolve().parent / "scripts" / "zero_equal.py"


def _zero_equal(nranks, steps, bucket_mb):
    res = run_mpi(nranks, ["-m", "mpi4py", str(SCRIPT), str(steps), str(bucket_mb)],
                  timeout=240)
    res.expect_ok()
    return res.records


@pytest.mark.parametrize("nranks", [4, 3])
def test_zero_equals_ring_every_step(nranks):
    """float64, odd layer widths, several buckets cut unevenly: ZeRO-1/2 = ring to 1e-9."""
    for r in _zero_equal(nranks, 6, 0.002):
        assert max(r["rel"].values()) < 1e-9, r
        assert r["bytes"]["zero1"] == r["bytes"]["zero2"] == r["bytes"]["ring"] > 0, r
        for stage in ("zero1", "zero2"):  # a shard of momentum: <= 1/p of the ring's + 5%
            assert r["opt"][stage] <= r["opt"]["ring"] / nranks * 1.05, r
        assert all(r["sync"].values()), r


def test_zero_one_bucket_two_ranks():
    """One bucket (the default 25 MB), 2 ranks: equal, and half the momentum."""
    for r in _zero_equal(2, 4, 25.0):
        assert max(r["rel"].values()) < 1e-9, r
        assert r["opt"]["zero1"] <= r["opt"]["ring"] / 2 * 1.05, r


@pytest.mark.parametrize("flags", [dict(compress="fp16"), dict(accumulate=2),
                                   dict(checkpoint="x.npz"), dict(channels=2),
                                   dict(dedicated=True), dict(servers=2)])
def test_zero_refuses_flags_it_cannot_honour(flags):
    with pytest.raises(ConfigError, match="--strategy zero"):
        check_zero_flags(TrainConfig(strategy="zero", **flags))


def test_zero_stage_needs_zero():
    with pytest.raises(ConfigError, match="--zero-stage needs --strategy zero"):
        check_zero_flags(TrainConfig(strategy="ring", zero_stage=2))
    with pytest.raises(ConfigError, match="1 or 2"):
        check_zero_flags(TrainConfig(strategy="zero", zero_stage=3))


def test_zero_cli_runs_and_refuses(tmp_path):
    """The command line: a ZeRO-2 run reports its momentum shard; a bad flag exits 2 in one line."""
    out = tmp_path / "z.json"
    small = ["-m", "mpicomm", "train", "--layers", "16,24,4", "--steps", "3", "--batch-size", "8",
             "--train-samples", "256", "--test-samples", "32", "--eval-samples", "64",
             "--log-every", "0"]
    res = run_mpi(2, [*small, "--strategy", "zero", "--zero-stage", "2", "--json", str(out)],
                  timeout=120)
    assert res.returncode == 0, res.tail()
    rec = json.loads(out.read_text())["results"][0]
    assert rec["strategy"] == "zero" and rec["params_in_sync"] and not rec["overlap"], rec
    assert rec["optimizer_state_bytes"] <= (16 * 24 + 24 + 24 * 4 + 4) * 4 / 2 + 8, rec
    res = run_mpi(2, [*small, "--strategy", "zero", "--compress", "int8"], timeout=60)
    assert res.returncode == 2 and res.stdout.count("--compress is not supported") == 1, res.tail()


@pytest.mark.slow  # two mpiexec runs
def test_zero2_with_baseline_runs(tmp_path):
    """--baseline times rank 0 alone under native: the zero-only --zero-stage 2 must not follow
    it there (it stopped the run with "--zero-stage needs --strategy zero")."""
    out = tmp_path / "z.json"
    res = run_mpi(2, ["-m", "mpicomm", "train", "--layers", "16,24,4", "--steps", "3",
                      "--train-samples", "256", "--test-samples", "32", "--eval-samples", "64",
                      "--log-every", "0", "--strategy", "zero", "--zero-stage", "2",
                      "--baseline", "--json", str(out)], timeout=120)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    rec = json.loads(out.read_text())["results"][0]
    assert rec["baseline_samples_per_sec"] > 0 and rec["scaling_efficiency"] > 0, rec


@pytest.mark.slow  # one mpiexec run
def test_zero2_step_shares_add_up(tmp_path):
    """ZeRO-2 reduce-scatters inside backward: that time is communication, not compute, and
    not subtracted from the optimizer twice (optimizer_s came out negative, the shares > 100%).
    Virtual clock: the reduce-scatter costs 50 us + bytes/0.1 GB/s, far above the SGD update."""
    out = tmp_path / "z.json"
    res = run_mpi(2, ["-m", "mpicomm", "train", "--layers", "16,24,4", "--steps", "6",
                      "--train-samples", "256", "--test-samples", "32", "--eval-samples", "64",
                      "--log-every", "0", "--strategy", "zero", "--zero-stage", "2",
                      "--clock", "virtual", "--ranks-per-node", "1",
                      "--inter-link", "50us,0.1GB/s", "--json", str(out)], timeout=120)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    rec = json.loads(out.read_text())["results"][0]
    assert rec["clock"] == "virtual", rec
    parts = [rec[k] for k in ("compute_s", "comm_exposed_s", "optimizer_s", "other_s")]
    assert min(parts) >= 0, rec
    assert sum(parts) == pytest.approx(rec["step_time_mean_s"], rel=1e-6), rec
    assert rec["comm_exposed_s"] > 2 * 50e-6, rec  # reduce-scatter and allgather counted


@pytest.mark.parametrize("reducer, message", [
    (dict(size=3, num_workers=2), "1 of the reducer's 3 ranks only serve"),
    (dict(compress="int8"), "compress='int8' would be bypassed"),
    (dict(channels=2), "channels=2 would be bypassed"),
])
def test_zero_engine_refuses_a_reducer_it_would_bypass_or_hang_on(reducer, message):
    """Through the API, a dedicated-server ps reducer hung (its servers never join the
    shards' ring) and a compressing or multi-channel one was bypassed without a word."""
    from types import SimpleNamespace

    import numpy as np

    from mpicomm.core.options import ReducerOptions
    from mpicomm.engine.zero import ZeroEngine

    shape = dict(size=2, num_workers=2)
    opts = {k: v for k, v in reducer.items() if k not in shape}
    red = SimpleNamespace(**{**shape, **{k: v for k, v in reducer.items() if k in shape}},
                          rank=0, p2p=None, options=ReducerOptions(**opts))
    grads = np.zeros(8)
    with pytest.raises(ValueError, match=message):
        ZeroEngine(red, np.zeros(8), grads, [(0, 0, 8)], bucket_bytes=64, stage=1,
                   make_optimizer=lambda p, g, v: lambda lr: None)
