"""--overlap-forward: the buckets still reducing when backward ends are sent first layer
first and waited for by the next forward (engine step 4., engine/priority.py). Only the
order changes, so the parameters are bitwise those of the plain engine; the waits sit
inside the forward. (A checkpoint sees every bucket applied: resume is bitwise a straight
run, ``test_resume_is_bit_identical_with_buckets_and_overlap``.)"""

import json
from pathlib import Path

import numpy as np
import pytest
from mpi_harness import run_mpi
from train_runs import SMALL, ok, params
from train_runs import train as _train

from mpicomm.engine.buckets import plan_buckets
from mpicomm.engine.grad_engine import GradEngine
from mpicomm.nn import layer_tensors
from mpicomm.train.config import ConfigError, TrainConfig

SCRIPTS = Path(__file__).resolve().parent / "scripts"
# several buckets of this model: one per weight and per bias
ARGS = [*SMALL, "--strategy", "ring", "--dtype", "float64", "--bucket-mb", "0"]


def train(nranks, *args, timeout=120):
    return ok(_train(nranks, *args, timeout=timeout))


@pytest.mark.parametrize("nranks, extra", [
    (2, []), (3, ["--accumulate", "2"]),
    pytest.param(2, ["--strategy", "native", "--bucket-mb", "0.001"], marks=pytest.mark.slow)])
def test_parameters_are_bitwise_those_of_the_plain_order(tmp_path, nranks, extra):
    runs = {}
    for name, flags in (("plain", []), ("ahead", ["--overlap-forward"]),
                        ("blocking", ["--no-overlap"])):
        ck = tmp_path / f"{name}.npz"
        train(nranks, *ARGS, *extra, "--steps", "8", "--checkpoint", ck, *flags)
        runs[name] = params(ck)
    for name in ("ahead", "blocking"):
        np.testing.assert_array_equal(runs[name][0], runs["plain"][0], err_msg=name)
        np.testing.assert_array_equal(runs[name][1], runs["plain"][1], err_msg=name)


def test_the_tail_is_waited_for_inside_the_next_forward(tmp_path):
    out = tmp_path / "t.json"
    res = train(2, *ARGS, "--steps", "8", "--overlap-forward", "--trace", out,
                "--trace-steps", "4:7", "--json", tmp_path / "r.json")
    events = [e for e in json.loads(out.read_text()) if e["ph"] == "X" and e["pid"] == 0]
    forwards = [e for e in events if e["cat"] == "forward"]
    waits = [e for e in events if e["cat"] == "wait"]
    inside = [w for w in waits if any(f["ts"] <= w["ts"] <= f["ts"] + f["dur"]
                                      for f in forwards)]
    per_step = {e["name"]: e for e in events if e["cat"] == "step"}
    assert set(per_step) == {"step 4", "step 5", "step 6"}, per_step
    # steps 5 and 6 take the tail of 4 and 5 in their forward; the first layer's bucket
    # (the last one sent) is the first they wait for
    assert len(inside) >= 2, [w["name"] for w in waits]
    last = len(plan_buckets(layer_tensors((16, 32, 32, 4)), 8, 0)) - 1
    for step in ("step 5", "step 6"):
        s = per_step[step]
        mine = [w for w in inside if s["ts"] <= w["ts"] <= s["ts"] + s["dur"]]
        assert mine and mine[0]["name"] == f"wait bucket {last}", [w["name"] for w in mine]
    record = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert record["overlap_forward"] is True, record
    assert "wrote trace" in res.stdout


@pytest.mark.parametrize("flags, named", [
    (dict(overlap=False), "--no-overlap"),
    (dict(strategy="ps", ps_mode="sync"), "--ps-mode"),
    (dict(strategy="zero"), "--strategy zero"),
    (dict(strategy="ps", dedicated=True), "--dedicated"),
])  # pipeline and tensor runs: it works (tests/parallel/test_layouts_loop.py)
def test_refused_where_it_cannot_take_effect(flags, named):
    with pytest.raises(ConfigError, match=f"--overlap-forward cannot take effect with {named}"):
        TrainConfig(overlap_forward=True, **flags)


class _Reducer:
    name, owner = "fake", None

    def allreduce(self, buf, op="sum", key=None):
        return buf


def test_backward_refuses_to_start_before_the_forward_took_the_tail(monkeypatch):
    monkeypatch.setattr("mpicomm.engine.async_reducer.require_thread_multiple", lambda: None)
    grads = np.zeros(12)
    tensors = [(0, 0, 4), (0, 4, 6), (1, 6, 10), (1, 10, 12)]
    spans = [slice(0, 6), slice(6, 12)]
    engine = GradEngine(_Reducer(), grads, tensors, spans, bucket_bytes=0,
                        overlap_forward=True, agree_comm=object())
    engine._set_head(1)  # as agreed: bucket 0 during backward, the rest after it
    try:
        engine.backward(iter([1, 0]))
        assert [b.index for b in engine.reduced(defer=True)] == [0]
        with pytest.raises(RuntimeError, match="deferred buckets"):
            engine.backward(iter([1, 0]))
        taken = [b.index for i in (0, 1) for b in engine.ready_for(i)]
        assert taken == [3, 2, 1]  # layer 0's buckets (3, 2: bias then weight), then layer 1's
        engine.backward(iter([1, 0]))  # all taken: a new step may begin
        assert [b.index for b in engine.reduced(defer=True)] == [0]
        assert [b.index for b in engine.settle()] == [3, 2, 1]  # before reading the params
        engine.backward(iter([1, 0]))
        assert [b.index for b in engine.reduced()] == [0, 3, 2, 1]
    finally:
        engine.close()


@pytest.mark.slow  # two training runs (the default tier's time budget, docs/testing.md)
def test_a_checkpoint_written_mid_run_holds_every_bucket(tmp_path):
    """A job killed after a --checkpoint-every save resumes from it: the step that saves waits
    for its tail, so the saved parameters are a straight run's of that many steps."""
    script = str(SCRIPTS / "every_checkpoint.py")
    mid = tmp_path / "mid.npz"
    run_mpi(2, [script, str(mid), "9", "--checkpoint-every", "--overlap-forward"],
            timeout=60).expect_ok()
    straight = tmp_path / "straight.npz"
    run_mpi(2, [script, str(straight), "6"], timeout=60).expect_ok()
    saved, vsaved, step = params(f"{mid}.step6.npz")
    assert step == 6
    np.testing.assert_array_equal(saved, params(straight)[0])
    np.testing.assert_array_equal(vsaved, params(straight)[1])


def _flops(layers, batch):
    """(forward, backward) flops of the MLP's matmuls: x·W; xᵀ·dy and, but in layer 0, dy·Wᵀ."""
    pairs = list(zip(layers[:-1], layers[1:], strict=True))
    forward = sum(2 * batch * a * b for a, b in pairs)
    return forward, forward + sum(2 * batch * a * b for a, b in pairs[1:])


@pytest.mark.slow
def test_in_virtual_time_the_next_forward_hides_what_backward_cannot():
    """The compute is charged by a flop model (the rest of the CPU time x 1e-9), so the run is
    the schedule alone, on any host: plain overlap hides at most backward/comm; with
    --overlap-forward more than that, at most (forward + backward)/comm; the step falls."""
    spf = 1e-11  # seconds per flop: forward 2.5 ms, backward 4.9 ms against 16.6 ms of comm
    res = run_mpi(2, ["-m", "mpi4py", str(SCRIPTS / "overlap_virtual.py"), str(spf),
                      "overlap,ahead,off"], timeout=120)
    res.expect_ok()
    runs = next(r["runs"] for r in res.records if r["rank"] == 0)
    plain, ahead, off = runs["overlap"], runs["ahead"], runs["off"]
    forward, backward = (f * spf for f in _flops((256,) + (512,) * 8 + (10,), 64))
    comm = off["comm_total_s"]
    assert {r["final_loss"] for r in runs.values()} == {off["final_loss"]}  # the same run
    for r in runs.values():
        assert abs(r["compute_s"] - (forward + backward)) < 1e-3 * (forward + backward), r
        assert abs(r["comm_total_s"] - comm) < 1e-3 * comm, r
    assert off["overlap_fraction"] == 0 and off["step_time_mean_s"] >= forward + backward + comm
    assert 0.15 < plain["overlap_fraction"] <= backward / comm + 0.005, (plain, backward / comm)
    assert backward / comm + 0.02 < ahead["overlap_fraction"] <= (forward + backward) / comm
    assert ahead["step_time_mean_s"] < 0.97 * plain["step_time_mean_s"] < off["step_time_mean_s"]
