"""Checkpoints: resume is bit-for-bit (codec state included), with another split of the global
batch or bucket size; bad or mismatched files are refused with one line."""

import json

import numpy as np
import pytest
from mpi_harness import run_script
from train_runs import SMALL, SMALL_DATA, ok, params, train

from mpicomm.train.loop import CheckpointError


def test_checkpoint_resume_is_bit_identical(tmp_path):
    common = [*SMALL, "--strategy", "ring", "--batch-size", "8", "--lr", "0.1",
              "--warmup-steps", "6", "--scale-lr", "--train-samples", "200"]  # epochs turn over
    ok(train(2, *common, "--steps", "20", "--checkpoint", tmp_path / "full.npz"))
    ck = tmp_path / "part.npz"
    ok(train(2, *common, "--steps", "13", "--checkpoint", ck, "--checkpoint-every", "5"))
    assert params(ck)[2] == 13
    res = ok(train(2, *common, "--steps", "20", "--checkpoint", ck, "--resume",
                   "--log-every", "20"))
    assert "resumed at step 13" in res.stdout
    full, vfull, _ = params(tmp_path / "full.npz")
    resumed, vres, step = params(ck)
    assert step == 20
    np.testing.assert_array_equal(resumed, full)
    np.testing.assert_array_equal(vres, vfull)


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_dedicated_ps_resume_trains_to_steps_not_past_it(tmp_path):
    """The dedicated server reads no checkpoint; it must still run the workers' remaining steps."""
    common = [*SMALL, "--strategy", "ps", "--dedicated", "--batch-size", "8",
              "--train-samples", "200", "--checkpoint-every", "5"]
    ok(train(3, *common, "--steps", "20", "--checkpoint", tmp_path / "full.npz"))
    ck, out = tmp_path / "part.npz", tmp_path / "resumed.json"
    ok(train(3, *common, "--steps", "10", "--checkpoint", ck))
    ok(train(3, *common, "--steps", "20", "--checkpoint", ck, "--resume", "--json", out))
    full, vfull, _ = params(tmp_path / "full.npz")
    resumed, vres, step = params(ck)
    assert step == 20
    np.testing.assert_array_equal(resumed, full)
    np.testing.assert_array_equal(vres, vfull)
    rec = json.loads(out.read_text())["results"][0]
    assert (rec["steps"], rec["resumed_from_step"], rec["workers"]) == (10, 10, 2), rec


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
@pytest.mark.slow  # a save of 0.25 s five times (the default tier's time budget)
@pytest.mark.parametrize("nranks, fields", [
    (2, {"strategy": "ring"}),
    (3, {"strategy": "ps", "ps_mode": "sync"}),  # 2 workers and a server
])
def test_worker_0s_save_is_checkpoint_time_not_the_others_next_step(tmp_path, nranks, fields):
    """Worker 0 saves while the others go on: their next step's first message waited for it,
    and a save of 0.25 s showed up as a step of 0.25 s on every other worker."""
    run = dict(layers=[16, 32, 4], batch_size=8, steps=10, train_samples=512, test_samples=64,
               eval_samples=64, log_every=0, checkpoint=str(tmp_path / "c.npz"),
               checkpoint_every=2, **fields)
    res = run_script(nranks, "slow_save.py", "0.25", json.dumps(run), timeout=120)
    res.expect_ok()
    rec = next(r for r in res.records if r["rank"] == 0)
    assert max(rec["step_times_s"]) < 0.05, rec["step_times_s"]  # steps of ~1 ms; a leak: 0.12
    assert rec["checkpoint_s"] >= 5 * 0.25, rec  # 5 saves, each counted where it happened


@pytest.mark.slow
def test_bad_checkpoints_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    res = train(2, *SMALL, "--steps", "3", "--checkpoint", bad, "--resume")
    assert res.returncode != 0 and "corrupt or not an mpicomm checkpoint" in res.stdout, res.tail()
    ck = tmp_path / "ck.npz"
    ok(train(2, *SMALL, "--steps", "3", "--checkpoint", ck))
    res = train(2, *[a if a != "16,32,32,4" else "16,8,4" for a in SMALL], "--steps", "5",
                "--checkpoint", ck, "--resume")
    assert res.returncode != 0, res.tail()
    assert "holds a model with --layers 16,32,32,4" in res.stdout, res.tail()
    assert "this run has --layers 16,8,4" in res.stdout


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_resume_with_the_global_batch_split_differently(tmp_path):
    """Issue 19 §2: the position is saved in global batches, so 64 rows x 1 saved and resumed as
    32 rows x 2 micro-batches reads on from the same row (before: 0.766248 against 0.765634)."""
    common = [*SMALL, "--strategy", "ring", "--dtype", "float64"]  # 512 rows: 8 steps an epoch
    whole = tmp_path / "whole.json"
    ok(train(1, *common, "--batch-size", "64", "--steps", "20", "--json", whole))
    ck, rest = tmp_path / "ck.npz", tmp_path / "rest.json"
    ok(train(1, *common, "--batch-size", "64", "--steps", "10", "--checkpoint", ck))
    ok(train(1, *common, "--batch-size", "32", "--accumulate", "2", "--steps", "20",
             "--checkpoint", ck, "--resume", "--json", rest))
    a, b = (json.loads(p.read_text())["results"][0] for p in (whole, rest))
    assert b["resumed_from_step"] == 10
    assert b["final_loss"] == pytest.approx(a["final_loss"], rel=1e-10), (a, b)
    assert b["train_loss_last"] == pytest.approx(a["train_loss_last"], rel=1e-10)


def test_codec_state_travels_in_the_checkpoint():
    """Every rank's codec_state() arrays are gathered to rank 0, saved, and each rank reads
    back its own (one rank's residuals are not another's)."""
    from mpicomm.train.checkpoint import codec_state_arrays, restore_codec_state

    class WithState:
        def codec_state(self):
            return {"7": np.arange(5.0), "bucket 2": np.ones(3)}

    class OneRank:  # the Gather of a 1-rank communicator: rank 0 gets its own rows
        def Get_size(self):
            return 1

        def Get_rank(self):
            return 0

        def Gather(self, mine, every, root):
            every[0] = mine

    arrays = codec_state_arrays(WithState(), OneRank())
    assert len(arrays) == 2
    state = restore_codec_state({"params": np.zeros(2), **arrays}, 0, 1)
    assert set(state) == {"7", "bucket 2"}
    np.testing.assert_array_equal(state["7"], np.arange(5.0))
    assert codec_state_arrays(object(), OneRank()) == {}
    assert restore_codec_state({"params": 1}, 0, 4) is None
    # another number of ranks cannot take over one rank's residuals: refused, naming both
    with pytest.raises(CheckpointError, match="residuals of 1 ranks; this run has 2"):
        restore_codec_state({"params": np.zeros(2), **arrays}, 1, 2)


@pytest.mark.parametrize("compress", ["none", "int8", "topk:0.1:noef"])
def test_topk_residuals_need_error_feedback_to_resume(compress):
    """Residuals resumed without error feedback would be dropped: refused, naming the codec
    (topk:RATIO:noef passed before, and the residuals were silently lost)."""
    from mpicomm.train.checkpoint import require_feedback

    with pytest.raises(CheckpointError, match=f"this run has --compress {compress}, which "):
        require_feedback(compress, "ck.npz")
    require_feedback("topk:0.2", "ck.npz")  # another ratio keeps them: carried over


def test_topk_residuals_follow_a_changed_bucket_size():
    """A top-k checkpoint resumed with another --bucket-mb: the residuals are per element, so
    they are carried over to the new buckets (they restarted from zero before, silently)."""
    from mpicomm.engine import plan_buckets
    from mpicomm.nn import layer_tensors, num_params
    from mpicomm.train.checkpoint import rebucket_residuals

    layers = (16, 32, 32, 4)
    n, tensors = num_params(layers), layer_tensors(layers)
    small, whole = plan_buckets(tensors, 8, 1024), plan_buckets(tensors, 8, 25 * 2**20)
    assert len(small) > 2 and len(whole) == 1
    full = np.random.default_rng(0).standard_normal(n)
    saved = {str(b.index): full[b.lo : b.hi].copy() for b in small}
    moved = rebucket_residuals(saved, whole, n)
    assert set(moved) == {"0"}
    np.testing.assert_array_equal(moved["0"], full)
    back = rebucket_residuals(moved, small, n)  # and back: each bucket's own, bit for bit
    assert set(back) == set(saved)
    for k, v in saved.items():
        np.testing.assert_array_equal(back[k], v)
    with pytest.raises(CheckpointError, match="residuals of 10 values; the model has"):
        rebucket_residuals({"0": np.zeros(10)}, whole, n)
    with pytest.raises(CheckpointError, match="not the engine's bucket indices"):
        rebucket_residuals({"n10:d": np.zeros(n)}, whole, n)


@pytest.mark.slow
def test_topk_resume_is_bit_identical_in_float64(tmp_path):
    """issue 17: top-k error feedback is every rank's own state; a resumed run restores each
    rank's residuals (saved only rank 0's before: 2.0245 against 2.0159 straight through)."""
    common = [*SMALL, "--strategy", "ring", "--compress", "topk:0.1", "--dtype", "float64",
              "--batch-size", "8", "--train-samples", "200"]
    ok(train(2, *common, "--steps", "12", "--checkpoint", tmp_path / "full.npz"))
    ck = tmp_path / "part.npz"
    ok(train(2, *common, "--steps", "7", "--checkpoint", ck))
    ok(train(2, *common, "--steps", "12", "--checkpoint", ck, "--resume"))
    full, vfull, _ = params(tmp_path / "full.npz")
    resumed, vres, step = params(ck)
    assert step == 12
    np.testing.assert_array_equal(resumed, full)
    np.testing.assert_array_equal(vres, vfull)


@pytest.mark.slow  # four runs of 2-4 ranks
def test_topk_resume_with_another_bucket_size_or_rank_count(tmp_path):
    """Top-k residuals saved with --bucket-mb 0.001 (3 buckets) and resumed with the default
    (1 bucket) are carried over (they restarted silently from zero before, and the stale ones
    were saved again); resumed on 4 ranks instead of 2, they are refused in one line, exit 2."""
    common = [*SMALL, "--strategy", "ring", "--compress", "topk:0.1", "--dtype", "float64",
              "--train-samples", "200"]
    ck = tmp_path / "k.npz"
    ok(train(2, *common, "--batch-size", "8", "--bucket-mb", "0.001", "--steps", "4",
             "--checkpoint", ck))
    with np.load(ck) as f:
        saved = {k: f[k] for k in f.files if k.startswith("codec_state__")}
    assert {k.rsplit("__", 1)[1] for k in saved} == {"0", "1", "2"}
    res = train(4, *common, "--batch-size", "4", "--steps", "6", "--checkpoint", ck, "--resume")
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("residuals of 2 ranks; this run has 4") == 1, out
    assert "Traceback" not in out, out
    with np.load(ck) as f:  # the same checkpoint with its residuals zeroed
        np.savez(tmp_path / "zero.npz", **{k: np.zeros_like(v) if k in saved else v
                                          for k, v in ((k, f[k]) for k in f.files)})
    after = {}
    for name in ("k.npz", "zero.npz"):  # resumed with the default --bucket-mb: one bucket
        ok(train(2, *common, "--batch-size", "8", "--steps", "5", "--checkpoint",
                 tmp_path / name, "--resume"))
        with np.load(tmp_path / name) as f:
            after[name] = {k: f[k] for k in f.files if k.startswith("codec_state__")}
    assert sorted(after["k.npz"]) == ["codec_state__r0__0", "codec_state__r1__0"]
    for r in (0, 1):  # the same step's gradient g: left = saved + g where unsent, g alone
        whole = np.concatenate([saved[f"codec_state__r{r}__{i}"] for i in (2, 1, 0)])
        left, left0 = (after[x][f"codec_state__r{r}__0"] for x in ("k.npz", "zero.npz"))
        both = (left != 0) & (left0 != 0)
        assert both.sum() > 0.5 * whole.size
        np.testing.assert_allclose(left[both] - left0[both], whole[both], rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # three 2-rank runs
def test_resume_refuses_a_data_file_rewritten_in_place(tmp_path):
    """The checkpoint names the data by path; a file rewritten there with other rows of the
    same shape resumed silently (its data position then reads other rows): now refused in
    one line, exit 2, by the data's CRC-32; the same data resumes."""
    rng = np.random.default_rng(0)
    data, ck = tmp_path / "d.npz", tmp_path / "ck.npz"
    x, y = rng.standard_normal((200, 16)).astype(np.float32), rng.integers(0, 4, 200)
    np.savez(data, x=x, y=y)
    common = [*SMALL_DATA, "--strategy", "ring", "--batch-size", "8", "--data", data,
              "--checkpoint", ck]
    ok(train(2, *common, "--steps", "4"))
    np.savez(data, x=x[::-1].copy(), y=y[::-1].copy())  # the same shape, other rows
    res = train(2, *common, "--steps", "6", "--resume")
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("was made with other data than npz(") == 1, out
    assert "Traceback" not in out, out
    np.savez(data, x=x, y=y)
    assert "resumed at step 4" in ok(train(2, *common, "--steps", "6", "--resume",
                                           "--log-every", "6")).stdout


@pytest.mark.slow  # two 2-rank runs
def test_topk_checkpoint_resumed_without_topk_is_refused(tmp_path):
    """The residuals cannot go on without top-k: one line and exit 2 on every rank (it was a
    ValueError from every rank's engine, exit 1)."""
    ck = tmp_path / "k.npz"
    ok(train(2, *SMALL, "--strategy", "ring", "--compress", "topk:0.1", "--steps", "3",
             "--checkpoint", ck))
    res = train(2, *SMALL, "--strategy", "ring", "--compress", "int8", "--steps", "6",
                "--checkpoint", ck, "--resume")
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("holds top-k error-feedback residuals; this run has --compress int8") == 1, out
    assert "Traceback" not in out and "Abort" not in out, out


@pytest.mark.slow  # two training runs of a few seconds
def test_trace_window_before_the_resumed_step_is_refused(tmp_path):
    """Resumed at step 4 with --trace-steps 1:3. Before: exit 0, "wrote trace" and a file
    with no events; now one line and exit 2, before any step."""
    ck, out = tmp_path / "ck.npz", tmp_path / "t.json"
    ok(train(2, *SMALL, "--steps", "4", "--checkpoint", ck))
    res = train(2, *SMALL, "--steps", "8", "--checkpoint", ck, "--resume", "--trace", out,
                "--trace-steps", "1:3")
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert res.stdout.count("--trace-steps 1:3: the run resumes at step 4") == 1, res.tail()
    assert "wrote trace" not in res.stdout
    res = train(2, *SMALL, "--steps", "8", "--checkpoint", ck, "--resume", "--trace", out,
                "--trace-steps", "5:7")  # inside the resumed run: traced
    ok(res)
    steps = {e["name"] for e in json.loads(out.read_text()) if e.get("cat") == "step"}
    assert steps == {"step 5", "step 6"}, steps
