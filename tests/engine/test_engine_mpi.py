"""The sync engine under mpiexec: every strategy, bucket size, overlap and dtype reaches the
parameters of the one-allreduce loop; no bucket leaves before backward wrote it; a failure on
the communication thread ends the job; resume is bit-identical; accumulation is exact; the
trace is valid JSON with one pid per rank and only the --trace-steps steps."""

import json
from pathlib import Path

import numpy as np
import pytest
from mpi_harness import run_mpi, run_script
from train_runs import SMALL, ok, params, rel_err
from train_runs import train as _train

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def train(nranks, *args, timeout=120):
    return ok(_train(nranks, *args, timeout=timeout))


def _agreement(tmp_path, slow):
    res = run_mpi(4, ["-m", "mpi4py", str(SCRIPTS / "engine_agree.py"), str(tmp_path),
                      str(slow)], timeout=400)
    res.expect_ok()
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert len(runs) >= 8 * (3 if slow else 2 * 5)
    refs = {}
    for label, strategy, dtype, bucket_mb, _overlap, dedicated, buckets in runs:
        if bucket_mb == 1000.0:  # one bucket, no overlap: the single-allreduce loop
            assert buckets == 1
            if strategy == "native" or dedicated:
                refs[(dtype, dedicated)] = params(tmp_path / f"{label}.npz")[0]
    for label, _strategy, dtype, bucket_mb, _overlap, dedicated, buckets in runs:
        if bucket_mb == 0.0:
            assert buckets == 8, label  # one per weight and per bias of the 4 linear layers
        elif bucket_mb == 0.003:
            assert 2 < buckets < 8, label
        got = params(tmp_path / f"{label}.npz")[0]
        tol = 1e-12 if dtype == "float64" else 1e-6
        err = rel_err(got, refs[(dtype, dedicated)])
        assert err < tol, f"{label}: {err:.3g} from the single-allreduce loop"


@pytest.mark.slow
def test_every_strategy_bucket_size_and_overlap_matches_the_single_allreduce_loop(tmp_path):
    _agreement(tmp_path, slow=0.0)


@pytest.mark.slow
def test_a_slowed_backward_with_tiny_buckets_sends_nothing_early(tmp_path):
    """Each layer's backward finishes 20 ms after the previous one: a bucket sent before its
    last layer is written would carry stale gradients and the params would differ."""
    _agreement(tmp_path, slow=0.02)


def test_comm_thread_failure_ends_the_job_with_one_message_and_a_valid_trace(tmp_path):
    out = tmp_path / "fail.json"
    res = run_mpi(2, [str(SCRIPTS / "comm_thread_failure.py"), str(out)], timeout=60)
    assert not res.timed_out, res.tail()
    assert res.returncode not in (0, None), res.tail()
    text = res.stdout + res.stderr
    assert text.count("rank 1: communication thread: OSError: injected failure") >= 1, res.tail()
    assert text.count("-- aborting job") == 1, res.tail()  # one failing rank reports
    events = json.loads(out.read_text())  # strict JSON although the job died
    assert any(e.get("cat") == "bucket" and e["pid"] == 1 for e in events)


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
@pytest.mark.parametrize("ahead", [[], ["--overlap-forward"]])  # checkpoints wait for the tail
def test_resume_is_bit_identical_with_buckets_and_overlap(tmp_path, ahead):
    common = [*SMALL, "--strategy", "ring", "--batch-size", "8", "--train-samples", "200",
              "--bucket-mb", "0.002", "--overlap", *ahead]
    train(2, *common, "--steps", "16", "--checkpoint", tmp_path / "full.npz")
    ck = tmp_path / "part.npz"
    train(2, *common, "--steps", "9", "--checkpoint", ck, "--checkpoint-every", "3")
    train(2, *common, "--steps", "16", "--checkpoint", ck, "--resume")
    full, vfull, _ = params(tmp_path / "full.npz")
    resumed, vres, step = params(ck)
    assert step == 16
    np.testing.assert_array_equal(resumed, full)
    np.testing.assert_array_equal(vres, vfull)


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
@pytest.mark.parametrize("nranks", [1, 2])
def test_k_micro_batches_of_b_equal_one_batch_of_kb(tmp_path, nranks):
    common = [*SMALL, "--dtype", "float64", "--steps", "6", "--train-samples", "768",
              "--bucket-mb", "0.002"]
    train(nranks, *common, "--batch-size", "8", "--accumulate", "4",
          "--checkpoint", tmp_path / "acc.npz")
    train(1, *common, "--batch-size", str(32 * nranks), "--checkpoint", tmp_path / "big.npz")
    train(nranks, *common, "--batch-size", "8", "--checkpoint", tmp_path / "small.npz")
    acc, vacc, _ = params(tmp_path / "acc.npz")
    big, vbig, _ = params(tmp_path / "big.npz")
    assert rel_err(acc, big) < 1e-12 and rel_err(vacc, vbig) < 1e-10
    assert rel_err(params(tmp_path / "small.npz")[0], big) > 1e-4  # B alone is not K·B


def test_trace_has_one_pid_per_rank_named_threads_and_only_the_traced_steps(tmp_path):
    out = tmp_path / "t.json"
    res = train(2, *SMALL, "--strategy", "ring", "--steps", "10", "--bucket-mb", "0.002",
                "--trace", out, "--trace-steps", "3:6")
    assert "wrote trace" in res.stdout
    events = json.loads(out.read_text())
    assert {e["pid"] for e in events} == {0, 1}
    names = {(e["pid"], e["args"]["name"]) for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(0, "training"), (0, "communication"), (1, "training"),
            (1, "communication")} <= names, names
    for pid in (0, 1):
        mine = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
        steps = sorted(e["name"] for e in mine if e["cat"] == "step")
        assert steps == ["step 3", "step 4", "step 5"], steps
        lo = min(e["ts"] for e in mine if e["cat"] == "step")
        hi = max(e["ts"] + e["dur"] for e in mine if e["cat"] == "step")
        assert all(lo <= e["ts"] and e["ts"] + e["dur"] <= hi + 1 for e in mine)
        cats = {e["cat"] for e in mine}
        assert {"forward", "backward", "bucket", "wait", "optimizer"} <= cats, cats
        buckets = [e for e in mine if e["cat"] == "bucket"]
        assert all(e["args"]["bytes"] > 0 for e in buckets)
        tids = {e["tid"] for e in buckets}
        assert len(tids) == 1 and tids != {e["tid"] for e in mine if e["cat"] == "forward"}


def test_async_reducer_from_a_user_script():
    run_script(3, "../engine/scripts/async_user.py", timeout=60).expect_ok()


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_a_traced_virtual_run_charges_each_layer_its_own_backward(tmp_path):
    """The per-layer trace events between bucket hand-overs shared one segment key, so every
    layer's backward was charged the cheapest layer's (a traced run 4x faster in backward)."""
    out = tmp_path / "t.json"
    train(2, *SMALL, "--layers", "16,256,256,4", "--strategy", "ring", "--steps", "6",
          "--bucket-mb", "0", "--ranks-per-node", "1", "--inter-link", "10us,1GB/s",
          "--clock", "virtual", "--accelerator", "host", "--trace", out)  # CPU time's segments
    events = [e for e in json.loads(out.read_text()) if e["ph"] == "X" and e["cat"] == "backward"]
    def dur(pid, layer):
        return np.median([e["dur"] for e in events
                          if e["pid"] == pid and e["name"] == f"backward layer {layer}"])

    for pid in (0, 1):
        assert dur(pid, 1) > 4 * dur(pid, 2), (pid, dur(pid, 1), dur(pid, 2))  # 256x256, 256x4
