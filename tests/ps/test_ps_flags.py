"""Every flag works under --ps-mode or is refused in one line: compression, emulated links,
trace, accumulation; the rest exit 2 before any message."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi

SMALL = ["--layers", "32,64,10", "--batch-size", "16", "--train-samples", "2048",
         "--test-samples", "256", "--eval-samples", "256", "--log-every", "0"]


def _train(nranks, tmp_path, name, *flags, timeout=240):
    out = tmp_path / f"{name}.json"
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *SMALL, *flags, "--json", str(out)],
                  timeout=timeout)
    assert not res.timed_out and res.returncode == 0, res.tail()
    return json.loads(out.read_text())["results"][0]


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_async_int8_moves_a_third_of_the_bytes_and_still_learns(tmp_path):
    """Pushes and pulls are int8 on the wire: <= 0.35x the bytes per step of plain floats."""
    ps = ["--strategy", "ps", "--ps-mode", "async", "--dedicated", "--steps", "30"]
    plain = _train(4, tmp_path, "plain", *ps)
    small = _train(4, tmp_path, "int8", *ps, "--compress", "int8")
    assert small["reducer"]["compress"] == "int8" and plain["reducer"]["compress"] == "none"
    ratio = small["bytes_per_step"] / plain["bytes_per_step"]
    assert ratio <= 0.35, ratio
    assert small["params_in_sync"], small  # the final pull is exact
    assert small["final_loss"] < small["train_loss_first"] * 0.8, small  # it learns
    assert small["final_loss"] == pytest.approx(plain["final_loss"], rel=0.1)


@pytest.mark.slow  # two 3-rank training runs
def test_int8_in_float64(tmp_path):
    """int8 keeps one scale per chunk in the gradient's dtype: the PS sized its messages for
    float32 scales, so float64 died in the first encode (shapes (212,) and (196,))."""
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--steps", "10", "--dtype", "float64"]
    plain = _train(3, tmp_path, "plain", *ps)
    small = _train(3, tmp_path, "int8", *ps, "--compress", "int8")
    assert small["reducer"]["compress"] == "int8", small
    assert small["bytes_per_step"] / plain["bytes_per_step"] <= 0.25, (small, plain)  # ~1/8
    assert small["final_loss"] == pytest.approx(plain["final_loss"], rel=0.05)


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_sync_fp16_stays_close_to_plain(tmp_path):
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--servers", "2", "--steps", "20",
          "--dtype", "float64"]
    plain = _train(5, tmp_path, "plain", *ps)
    half = _train(5, tmp_path, "fp16", *ps, "--compress", "fp16")
    assert half["final_loss"] == pytest.approx(plain["final_loss"], rel=2e-2)
    assert half["final_loss"] != plain["final_loss"]  # the codec was on the path
    assert half["bytes_per_step"] < 0.3 * plain["bytes_per_step"]  # float64 -> 2 bytes


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_emulated_links_reach_the_transport_and_change_no_result(tmp_path):
    """Sync PS is deterministic: emulating the links changes timing, not one bit of the model."""
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--steps", "8", "--ranks-per-node", "2"]
    real = _train(4, tmp_path, "real", *ps)
    slow = _train(4, tmp_path, "slow", *ps, "--inter-link", "2ms,1GB/s")
    assert slow["reducer"]["transport"]["emulated"] is True, slow["reducer"]
    assert real["reducer"]["transport"]["emulated"] is False
    assert slow["param_crc32"] == real["param_crc32"]
    # every step crosses the emulated link twice (push, pull): >= 4 ms of held messages
    assert slow["comm_s"] > 4e-3, slow["comm_s"]


def test_async_trace_holds_the_servers_events(tmp_path):
    trace = tmp_path / "t.json"
    _train(4, tmp_path, "run", "--strategy", "ps", "--ps-mode", "async", "--servers", "1",
           "--steps", "10", "--trace", str(trace))
    events = json.loads(trace.read_text())  # valid JSON, Chrome's array format
    server = [e for e in events if e.get("pid") == 3 and e["ph"] == "X"]
    cats = {e["cat"] for e in server}
    assert {"server", "p2p"} <= cats, cats
    assert sum(e["name"].startswith("apply push") for e in server) >= 30  # 10 steps x 3
    workers = {e["pid"] for e in events if e["ph"] == "X" and e["cat"] == "bucket"}
    assert workers == {0, 1, 2}


@pytest.mark.slow  # a training run of a few seconds
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_servers_keep_to_the_trace_window(tmp_path, mode):
    """--trace-steps 5:7 of 60 steps. Before: the server recorded the whole run (a 200-step
    sync run: 1,804 server events beside 20 per worker, a 242 KB file); now the pushes of
    steps 5 and 6 only."""
    trace = tmp_path / "t.json"
    _train(3, tmp_path, "run", "--strategy", "ps", "--ps-mode", mode, "--dedicated",
           "--steps", "60", "--trace", str(trace), "--trace-steps", "5:7")
    events = [e for e in json.loads(trace.read_text()) if e["ph"] == "X"]
    applied = sorted(e["name"] for e in events if e["pid"] == 2 and e["cat"] == "server")
    if mode == "sync":
        assert applied == ["apply step 5", "apply step 6"], applied
    else:  # one apply per push: each worker's pushes of steps 5 and 6
        assert applied == ["apply push of worker 0"] * 2 + ["apply push of worker 1"] * 2
    assert sum(e["pid"] == 2 for e in events) <= 30, len(events)  # and their messages


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_sync_accumulate_equals_the_whole_batch(tmp_path):
    """--accumulate 2 of 8 rows = 16 rows at once (float64): the global batch is the same."""
    ps = ["--strategy", "ps", "--ps-mode", "sync", "--steps", "12", "--dtype", "float64"]
    whole = _train(3, tmp_path, "whole", *ps)
    split = _train(3, tmp_path, "split", *ps, "--batch-size", "8", "--accumulate", "2")
    assert split["accumulate"] == 2
    assert split["final_loss"] == pytest.approx(whole["final_loss"], rel=1e-10)
    assert np.allclose(split["loss_history"], whole["loss_history"], rtol=1e-10)


@pytest.mark.parametrize("flags, fragment", [
    (["--compress", "topk:0.1"], "fp16 or int8 only"),
    (["--bucket-mb", "1"], "--bucket-mb has no effect under --ps-mode"),
    (["--no-validate"], "--validate/--no-validate has no effect"),
    (["--servers", "3"], "at least one worker"),
])
def test_flags_the_server_cannot_honour_are_refused(flags, fragment):
    res = run_mpi(3, ["-m", "mpicomm", "train", *SMALL, "--strategy", "ps", "--ps-mode", "async",
                      "--steps", "100000", *flags], timeout=120)
    assert res.returncode == 2 and not res.timed_out, res.tail()
    lines = [x for x in res.stdout.splitlines() if "error" in x]
    assert len(lines) == 1 and fragment in lines[0], res.stdout
    assert "Traceback" not in res.stdout + res.stderr
