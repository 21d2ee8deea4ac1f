"""The real parameter server: sync = allreduce, staleness bounds, pushes applied once, shutdown."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi, run_script

from mpicomm.train.config import ConfigError, TrainConfig

SMALL = ["--layers", "32,64,10", "--batch-size", "16", "--train-samples", "2048",
         "--test-samples", "256", "--eval-samples", "256", "--log-every", "0"]


def _train(nranks, tmp_path, *flags, timeout=240):
    out = tmp_path / "run.json"
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *SMALL, *flags, "--json", str(out)],
                  timeout=timeout)
    assert not res.timed_out and res.returncode == 0, res.tail()
    return json.loads(out.read_text())["results"][0], res


@pytest.mark.parametrize("servers", [1, pytest.param(2, marks=pytest.mark.slow)])  # 5 ranks
def test_sync_equals_allreduce(servers):
    """3 workers (+ servers) in sync mode end with the ring loop's parameters, float64."""
    res = run_script(3 + servers, "ps_equal.py", "25", "sync", str(servers), timeout=240)
    res.expect_ok()
    workers = [r for r in res.records if r.get("role") != "server"]
    assert len(workers) == 3 and all(r["rel"] < 1e-9 for r in workers)


def test_ssp_zero_is_sync():
    res = run_script(4, "ps_equal.py", "12", "ssp", "1", timeout=240)
    res.expect_ok()


def _pushes_once(rec):
    """Every server applied every worker's pushes exactly once: its count = the worker's steps."""
    for per_worker in rec["pushes_by_server_by_worker"]:
        assert per_worker == rec["steps_by_worker"], rec
    assert rec["pushes_by_server"] == [sum(rec["steps_by_worker"])] * len(rec["pushes_by_server"])


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
@pytest.mark.parametrize("bound", [1, 2])
def test_ssp_bound_holds_with_two_servers(tmp_path, bound):
    rec, _ = _train(5, tmp_path, "--strategy", "ps", "--ps-mode", "ssp", "--staleness",
                    str(bound), "--servers", "2", "--steps", "40", "--straggler", "1:15")
    assert rec["staleness_max"] <= bound, rec
    assert rec["staleness_max"] >= 1, rec  # the straggler let the others run ahead
    _pushes_once(rec)
    assert max(rec["steps_by_worker"]) - min(rec["steps_by_worker"]) <= bound


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_async_records_staleness_and_shuts_down(tmp_path):
    """A straggler: the others run ahead (staleness > 0), finish at different steps, exit 0."""
    rec, _ = _train(5, tmp_path, "--strategy", "ps", "--ps-mode", "async", "--servers", "2",
                    "--steps", "40", "--straggler", "1:25")
    _pushes_once(rec)
    steps = rec["steps_by_worker"]
    assert len(set(steps)) > 1 and steps[1] < max(steps), rec  # workers ended apart
    assert rec["staleness_max"] >= 2 and rec["staleness_mean"] > 0, rec
    assert sum(steps) >= 40 * 3 and rec["params_in_sync"], rec  # the budget, final pull
    assert rec["slow_rank"] is None or rec["slow_rank"] == 1
    assert rec["ps_momentum"] == "lookahead"  # the default rule of async servers


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["async", "ssp"])
def test_verdict_series_and_history_follow_time(tmp_path, mode):
    """s per global batch (W pushes in time order) agrees with samples/s; history's clock grows."""
    extra = ["--staleness", "1"] if mode == "ssp" else []
    rec, _ = _train(4, tmp_path, "--strategy", "ps", "--ps-mode", mode, *extra, "--steps", "60",
                    "--jitter", "3")
    series = rec["step_times_s"]
    assert len(series) >= 45 and all(x >= 0 for x in series), series
    sps = rec["global_batch"] / (sum(series) / len(series))
    assert 0.75 < sps / rec["samples_per_sec"] < 1.33, (sps, rec["samples_per_sec"])
    wall = rec["wall_s_history"]
    assert len(wall) == len(rec["loss_history"]) >= 55
    assert all(np.diff(wall) >= 0), wall  # windows in time order


@pytest.mark.slow  # 4 ranks (the tiers' rank rule, tests/conftest.py); CI's slow step
def test_async_shared_momentum_rule_and_slowest_worker_note(tmp_path):
    rec, res = _train(4, tmp_path, "--strategy", "ps", "--ps-mode", "async", "--ps-momentum",
                      "shared", "--steps", "30", "--straggler", "2:30")
    _pushes_once(rec)
    assert rec["ps_momentum"] == "shared", rec
    assert rec["slow_rank"] == 2, rec
    assert "rank 2 is the slowest worker" in res.stdout and "nobody waited" in res.stdout


@pytest.mark.slow  # 4 ranks (the tiers' rank rule, tests/conftest.py); CI's slow step
def test_sync_pushes_once_and_straggler_named(tmp_path):
    rec, res = _train(4, tmp_path, "--strategy", "ps", "--ps-mode", "sync", "--servers", "1",
                      "--steps", "30", "--straggler", "2:25")
    assert rec["steps_by_worker"] == [30, 30, 30] and rec["staleness_max"] == 0
    _pushes_once(rec)
    assert rec["slow_rank"] == 2, rec
    assert "rank 2 holds the others back" in res.stdout


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_ring_straggler_named(tmp_path):
    rec, res = _train(3, tmp_path, "--strategy", "ring", "--steps", "30", "--straggler", "1:25",
                      "--jitter", "2")
    assert rec["slow_rank"] == 1, rec
    assert rec["last_to_arrive_by_rank"][1] > 0.6
    assert "rank 1 holds the others back" in res.stdout


def test_no_straggler_names_nobody_or_is_honest(tmp_path):
    rec, _ = _train(3, tmp_path, "--strategy", "ring", "--steps", "20")
    assert len(rec["wait_mean_s_by_rank"]) == 3 and all(w >= 0 for w in rec["wait_mean_s_by_rank"])


@pytest.mark.slow  # a training run of a few seconds
def test_balanced_virtual_run_names_nobody(tmp_path):
    """docs/trace.md's job under the virtual clock. Before: "rank 1 holds the others back:
    last to arrive in 98% of 48 calls; it waits 2.03 ms per call, the others 2.03 ms" (it
    leaves each call microseconds after rank 0, so it comes last, holding nobody back)."""
    rec, res = _train(2, tmp_path, "--strategy", "ring", "--layers", "256,512x4,10",
                      "--bucket-mb", "1", "--ranks-per-node", "1", "--inter-link",
                      "50us,0.5GB/s", "--steps", "12", "--clock", "virtual")
    assert rec["clock"] == "virtual" and max(rec["last_to_arrive_by_rank"]) > 0.5, rec
    assert rec["slow_rank"] is None and "holds the others back" not in res.stdout, (
        rec["slow_rank_note"], rec["wait_mean_s_by_rank"])


def _run_json(nranks, tmp_path, name, *flags):
    out = tmp_path / f"{name}.json"
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *SMALL, *flags, "--json", str(out)],
                  timeout=240)
    assert not res.timed_out and res.returncode == 0, res.tail()
    return json.loads(out.read_text())["results"][0]


@pytest.mark.slow  # 11 CPU-s
def test_sync_checkpoint_resume_is_bitwise(tmp_path):
    """20 steps straight = 10, checkpoint (servers' momentum included), resume to 20."""
    ck, ps = str(tmp_path / "ck.npz"), ["--strategy", "ps", "--ps-mode", "sync", "--servers", "2"]
    whole = _run_json(5, tmp_path, "whole", *ps, "--steps", "20")
    _run_json(5, tmp_path, "half", *ps, "--steps", "10", "--checkpoint", ck)
    rest = _run_json(5, tmp_path, "rest", *ps, "--steps", "20", "--checkpoint", ck, "--resume")
    assert rest["resumed_from_step"] == 10 and rest["steps_by_worker"] == [10, 10, 10]
    assert rest["param_crc32"] == whole["param_crc32"], (rest, whole)
    done = _run_json(5, tmp_path, "done", *ps, "--steps", "20", "--checkpoint", ck, "--resume")
    assert done["steps_by_worker"] == [0, 0, 0] and done["param_crc32"] == whole["param_crc32"]
    assert done["samples_per_sec"] is None and done["step_time_median_s"] is None  # "-", not 0


@pytest.mark.slow  # three 3-rank training runs
@pytest.mark.parametrize("codec", ["int8", "fp16"])
def test_compressed_sync_checkpoint_resume_is_bitwise(tmp_path, codec):
    """A compressed pull leaves the workers' parameters a rounding away from the servers': the
    checkpoint holds both (the workers' only, before: 1.10666 resumed against 1.10657)."""
    ck = str(tmp_path / "ck.npz")
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--compress", codec]
    whole = _run_json(3, tmp_path, "whole", *ps, "--steps", "12")
    _run_json(3, tmp_path, "half", *ps, "--steps", "5", "--checkpoint", ck)
    rest = _run_json(3, tmp_path, "rest", *ps, "--steps", "12", "--checkpoint", ck, "--resume")
    assert rest["resumed_from_step"] == 5 and rest["reducer"]["compress"] == codec, rest
    assert rest["param_crc32"] == whole["param_crc32"], (rest, whole)


@pytest.mark.slow  # two 4-rank training runs
def test_checkpoint_snapshots_are_not_counted_as_step_traffic(tmp_path):
    """Every rank's bytes per step are the same with a checkpoint every step as without: the
    servers' momentum and exact parameters sent to worker 0 are a checkpoint's, not a step's
    (with --checkpoint-every 1 the servers sent 15,859 bytes per step against 4,811)."""
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--servers", "2", "--compress", "int8",
          "--steps", "6"]
    plain = _run_json(4, tmp_path, "plain", *ps)
    saved = _run_json(4, tmp_path, "saved", *ps, "--checkpoint", str(tmp_path / "ck.npz"),
                      "--checkpoint-every", "1")
    for key in ("bytes_per_step_by_rank", "bytes_recv_per_step", "bytes_per_step_mean"):
        assert saved[key] == plain[key], (key, saved[key], plain[key])
    assert saved["param_crc32"] == plain["param_crc32"]


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_ring_checkpoint_resumes_as_ps_sync(tmp_path):
    """The allreduce loop's checkpoint format: a ring run at step 10 goes on as ps:sync."""
    ck, f64 = str(tmp_path / "ck.npz"), ["--dtype", "float64"]
    ring = _run_json(3, tmp_path, "ring", "--strategy", "ring", *f64, "--steps", "20")
    _run_json(3, tmp_path, "half", "--strategy", "ring", *f64, "--steps", "10", "--checkpoint", ck)
    ps = _run_json(4, tmp_path, "ps", "--strategy", "ps", "--ps-mode", "sync", *f64, "--steps",
                   "20", "--checkpoint", ck, "--resume")
    assert ps["final_loss"] == pytest.approx(ring["final_loss"], rel=1e-12)
    assert ps["test_accuracy"] == ring["test_accuracy"]


def test_too_few_ranks_refused(tmp_path):
    res = run_mpi(2, ["-m", "mpicomm", "train", *SMALL, "--strategy", "ps", "--ps-mode", "async",
                      "--servers", "2", "--steps", "3"], timeout=120)
    assert res.returncode == 2 and "at least one worker" in res.stdout, res.tail()


@pytest.mark.parametrize("kw, fragment", [
    ({"ps_mode": "lazy", "strategy": "ps"}, "--ps-mode must be"),
    ({"ps_mode": "async", "strategy": "ring"}, "needs --strategy ps"),
    ({"ps_mode": "async", "strategy": "ps", "checkpoint": "c.npz"}, "covers sync runs only"),
    ({"ps_mode": "ssp", "strategy": "ps", "staleness": 1, "resume": True, "checkpoint": "c.npz"},
     "covers sync runs only"),
    ({"staleness": 2}, "--staleness needs --ps-mode ssp"),
    ({"ps_mode": "ssp", "strategy": "ps", "staleness": -1}, "--staleness must be"),
    ({"straggler": ("1:x",)}, "--straggler must be RANK:MS"),
    ({"jitter": -1.0}, "--jitter must be"),
    ({"ps_momentum": "nesterov"}, "--ps-momentum must be lookahead or shared"),
])
def test_bad_flags_refused(kw, fragment):
    with pytest.raises(ConfigError, match=fragment):
        TrainConfig(**kw)


def test_straggler_flag_repeatable():
    cfg = TrainConfig(straggler=["1:20", "2:5,3:1"])
    assert cfg.straggler == ("1:20", "2:5", "3:1")


@pytest.mark.slow  # a training run of a few seconds
def test_async_progress_lines_count_worker_0s_pushes(tmp_path):
    """Worker 1 straggles, so worker 0 pushes past --steps. Before: "ps:async step 7/4" and
    the global batch over worker 0's step time as the samples/s (2-5x the run's)."""
    import re

    rec, res = _train(3, tmp_path, "--strategy", "ps", "--ps-mode", "async", "--dedicated",
                      "--steps", "4", "--straggler", "1:40", "--log-every", "1")
    assert not re.search(r"step +\d+/4", res.stdout), res.stdout
    pushes = [int(n) for n in re.findall(r"ps:async worker 0 push +(\d+) \(8 by all workers in "
                                         r"the run\)  loss .* worker 0: [\d,]+ samples/s",
                                         res.stdout)]
    assert pushes == list(range(1, rec["steps_by_worker"][0] + 1)) and pushes[-1] > 4, res.stdout
