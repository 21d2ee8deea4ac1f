"""The training loop under mpiexec: strategies agree, data parallelism is exact, it learns,
checkpoints resume bit-for-bit, compare writes its JSON, and bad input gives a clear message."""

import json
import os

import numpy as np
import pytest
from mpi_harness import run_mpi, run_script

import mpicomm
from mpicomm.cli.main import build_parser
from mpicomm.train.loop import CheckpointError, ConfigError, TrainConfig

SMALL = ["--layers", "16,32,32,4", "--train-samples", "512", "--test-samples", "64",
         "--eval-samples", "128", "--log-every", "0"]
SMALL_DATA = [f for i, f in enumerate(SMALL)  # with --data: the data set sets the sizes
              if f not in ("--train-samples", "--test-samples")
              and SMALL[i - 1] not in ("--train-samples", "--test-samples")]


def train(nranks, *args, timeout=120):
    return run_mpi(nranks, ["-m", "mpicomm", "train", *map(str, args)], timeout=timeout)


def ok(res):
    assert res.returncode == 0 and not res.timed_out, res.tail()
    return res


def params(path):
    with np.load(path) as f:
        return f["params"], f["momentum"], int(f["step"])


def rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.slow
def test_strategies_reach_the_same_params(tmp_path):
    """native, ring, hierarchical (2 ranks/node), ps (colocated) on 4 ranks agree to 1e-5;
    ps with a dedicated server (3 workers) agrees with native on 3 ranks."""
    assert {"native", "ring", "hierarchical", "ps"} <= set(mpicomm.strategies())
    runs4 = [["native", "native", {}], ["ring", "ring", {}],
             ["hierarchical", "hierarchical", {"ranks_per_node": 2}], ["ps", "ps", {}],
             ["ps2", "ps", {"servers": 2}], ["ps_dedicated", "ps", {"dedicated": True}]]
    extra = [s for s in ("recursive_doubling", "auto") if s in mpicomm.strategies()]
    runs4 += [[s, s, {}] for s in extra]
    run_script(4, "train_agree.py", tmp_path, json.dumps(runs4), timeout=150).expect_ok()
    run_script(3, "train_agree.py", tmp_path, json.dumps([["native3", "native", {}]]),
               timeout=90).expect_ok()
    ref, _, step = params(tmp_path / "native.npz")
    assert step == 20
    start = mpicomm.train.model.MLP((16, 32, 32, 4), seed=0).params
    assert rel_err(ref, start) > 1e-2  # training moved the params, so agreement means something
    for label in ("ring", "hierarchical", "ps", "ps2", *extra):
        got = params(tmp_path / f"{label}.npz")[0]
        assert rel_err(got, ref) < 1e-5, f"{label} differs from native: {rel_err(got, ref):.3g}"
    ded, ref3 = params(tmp_path / "ps_dedicated.npz")[0], params(tmp_path / "native3.npz")[0]
    assert rel_err(ded, ref3) < 1e-5
    assert rel_err(ref3, ref) > 1e-3  # 3 workers is a different run from 4 (a real check)


@pytest.mark.slow  # a training run of several seconds (CI's slow step)
def test_data_parallel_equals_single_process_on_the_global_batch(tmp_path):
    common = [*SMALL, "--dtype", "float64", "--steps", "15", "--checkpoint-every", "15"]
    ok(train(4, *common, "--batch-size", "8", "--checkpoint", tmp_path / "p4.npz"))
    ok(train(1, *common, "--batch-size", "32", "--checkpoint", tmp_path / "p1.npz"))
    p4, v4, _ = params(tmp_path / "p4.npz")
    p1, v1, _ = params(tmp_path / "p1.npz")
    assert rel_err(p4, p1) < 1e-12 and rel_err(v4, v1) < 1e-10
    ok(train(1, *common, "--batch-size", "8", "--checkpoint", tmp_path / "b8.npz"))
    assert rel_err(params(tmp_path / "b8.npz")[0], p1) > 1e-4  # batch 8 alone is not the same


@pytest.mark.slow
def test_loss_decreases_and_the_model_learns(tmp_path):
    out = tmp_path / "learn.json"
    ok(train(2, "--layers", "32,64,10", "--steps", "300", "--batch-size", "32",
             "--train-samples", "8192", "--json", out))
    rec = json.loads(out.read_text())["results"][0]
    assert rec["train_loss_last"] < 0.5 * rec["train_loss_first"], rec
    assert rec["final_accuracy"] > 0.6 and rec["test_accuracy"] > 0.5, rec  # chance: 0.1
    assert rec["params_in_sync"] is True
    # the loss curve: one point per step, its first ten the record's first-loss mean
    steps, losses, wall = rec["loss_history_step"], rec["loss_history"], rec["wall_s_history"]
    assert steps == list(range(1, 301)) and len(losses) == len(wall) == 300
    assert np.mean(losses[:10]) == pytest.approx(rec["train_loss_first"], rel=1e-9)
    assert np.mean(losses[-100:]) == pytest.approx(rec["train_loss_last"], rel=1e-9)
    assert all(b > a for a, b in zip(wall, wall[1:], strict=False)), "wall time must grow"


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


@pytest.mark.slow  # a 3-rank run
def test_a_diverged_model_has_no_accuracy(tmp_path):
    """NaN parameters: every logit is NaN and argmax says class 0, so the record gave the share
    of class 0 as the accuracy (30.5% and 29.7%, ps:sync at --lr 1e6); now null, and '-'."""
    out = tmp_path / "nan.json"
    res = ok(train(3, *SMALL, "--strategy", "ps", "--ps-mode", "sync", "--steps", "10",
                   "--batch-size", "8", "--lr", "1e6", "--json", out, "--wide"))
    rec = json.loads(out.read_text())["results"][0]
    assert rec["final_loss"] is None, rec  # the loss was already NaN (null)
    assert rec["final_accuracy"] is None and rec["test_accuracy"] is None, rec
    row = next(x for x in res.stdout.splitlines() if x.startswith("ps:sync "))
    assert "%" not in row.split()[-3:] and row.split()[-2:] == ["-", "-"], row


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


def test_setup_errors_free_the_reducer_and_validate_follows_the_environment(tmp_path):
    """In one job: a set-up error leaves no communicator behind (every strategy, baseline);
    MPICOMM_VALIDATE reaches the reducer unless the config sets validate."""
    run_script(3, "train_setup.py", timeout=90).expect_ok()


@pytest.mark.parametrize("command", [["train", "--baseline"], ["compare", "--repeats", "1"]])
def test_baseline_setup_error_stops_every_rank(command):
    """Rank 0 fails alone in the 1-worker baseline: one message, non-zero exit, no hang."""
    res = run_mpi(2, ["-m", "mpicomm", *command, *SMALL_DATA, "--steps", "2",
                      "--data", "/nonexistent/d.npz"], timeout=40)
    assert not res.timed_out and res.returncode == 2, res.tail()
    out = res.stdout + res.stderr
    assert out.count("--data /nonexistent/d.npz: no such file") == 1, res.tail()


def test_validate_flag_defaults_to_the_reducer_default(tmp_path):
    parse = build_parser().parse_args
    assert TrainConfig().validate is None and "validate" not in TrainConfig().reducer_options()
    for flags, want in (([], None), (["--validate"], True), (["--no-validate"], False)):
        for command in ("train", "compare"):
            assert parse([command, *flags]).validate is want, (command, flags)
        assert TrainConfig.from_args(parse(["train", *flags])).validate is want
    assert TrainConfig(validate=False).reducer_options()["validate"] is False
    out = tmp_path / "v.json"
    ok(train(1, *SMALL, "--steps", "2", "--json", out))
    assert json.loads(out.read_text())["config"]["validate"] is None


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


@pytest.mark.parametrize("args, message", [
    (["--layers", "16,x,4"], "--layers '16,x,4': 'x' is not an integer"),
    (["--layers", "16"], "need at least 2 widths"),
    (["--data", "/nonexistent/d.npz"], "--data /nonexistent/d.npz: no such file"),
    (["--batch-size", "300"], "batch too large for the shard: --batch-size 300 per worker × 2"),
    (["--momentum", "1.5"], "--momentum must be in [0, 1)"),
    (["--strategy", "carrier-pigeon"], "unknown strategy 'carrier-pigeon'; valid strategies"),
])
def test_bad_input_gives_a_clear_message(args, message):
    base = SMALL_DATA if "--data" in args else SMALL
    res = train(2, *base, "--steps", "2", *args, timeout=60)
    assert res.returncode == 2, res.tail()  # config and set-up errors: exit code 2
    out = res.stdout + res.stderr
    assert message in out, res.tail()
    assert out.count(message) == 1  # said once, not once per rank


def test_npz_shape_mismatch_and_missing_keys(tmp_path):
    f = tmp_path / "d.npz"
    np.savez(f, x=np.zeros((50, 7), np.float32), y=np.zeros(50, np.int64))
    res = train(2, *SMALL_DATA, "--data", f, "--steps", "2", timeout=60)
    assert res.returncode != 0
    assert "x has 7 features per sample but --layers starts with 16" in res.stdout, res.tail()
    np.savez(f, x=np.zeros((50, 16), np.float32), labels=np.zeros(50, np.int64))
    res = train(2, *SMALL_DATA, "--data", f, "--steps", "2", timeout=60)
    assert "missing array 'y' (found: labels, x)" in res.stdout, res.tail()


@pytest.mark.slow
def test_npz_data_trains(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 16)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)  # 4 quadrant classes
    np.savez(tmp_path / "q.npz", x=x, y=y)
    out = tmp_path / "q.json"
    ok(train(2, *SMALL_DATA, "--data", tmp_path / "q.npz", "--steps", "150", "--batch-size", "16",
             "--json", out))
    rec = json.loads(out.read_text())["results"][0]
    assert rec["test_accuracy"] > 0.7, rec


@pytest.mark.slow
def test_compare_runs_and_writes_json(tmp_path):
    out = tmp_path / "cmp.json"
    res = run_mpi(4, ["-m", "mpicomm", "compare", *SMALL, "--steps", "30", "--repeats", "2",
                      "--json", str(out)], timeout=120)
    ok(res)
    doc = json.loads(out.read_text())  # strict JSON: no NaN
    assert [r["strategy"] for r in doc["results"]] == ["native", "ps", "ring", "hierarchical"]
    for r in doc["results"]:
        for key in ("strategy", "ranks", "samples_per_sec", "step_time_median_s", "compute_s",
                    "comm_s", "bytes_per_step", "final_loss"):
            assert r[key] is not None, (key, r)
        assert r["ranks"] == 4 and r["samples_per_sec"] > 0 and r["bytes_per_step"] > 0
        assert r["params_in_sync"] is True and r["scaling_efficiency"] > 0
        assert len(r["samples_per_sec_runs"]) == 2 and r["predicted_comm_s"] > 0
    hier = doc["results"][3]["reducer"]
    assert hier.get("num_nodes", 2) == 2, hier  # simulated nodes of 2 ranks
    by = {r["strategy"]: r for r in doc["results"]}
    n = by["ring"]["grad_bytes"]
    assert by["ring"]["bytes_per_step"] == pytest.approx(2 * 3 / 4 * n, rel=0.01)
    assert by["ps"]["bytes_per_step"] > 1.5 * by["ring"]["bytes_per_step"]  # the server link
    assert {"python", "mpi4py", "numpy", "mpi_library"} <= set(doc["environment"])
    assert doc["topology"]["ranks"] == 4 and doc["config"]["layers"] == [16, 32, 32, 4]
    # the verdict (noise-aware since issue 8): a winner or a tie, each with its interval; with
    # more ranks than cores under the wall clock, one line instead says the scheduler decides
    if len(os.sched_getaffinity(0)) < 4:
        assert doc["reading"][0].startswith("no verdict: 4 ranks share")
        assert "--clock virtual" in doc["reading"][0]
        assert not any(line.startswith("verdict: ") for line in doc["reading"])
    else:
        assert doc["reading"][0].startswith("verdict: ") and "95% interval" in doc["reading"][0]
    assert doc["reading"][0] in res.stdout


def test_config_refuses_invalid_values():
    assert ConfigError is mpicomm.ConfigError  # one class: `except mpicomm.ConfigError` works
    with pytest.raises(mpicomm.ConfigError, match="--lr must be a positive number"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ConfigError, match="need --checkpoint"):
        TrainConfig(resume=True)
    with pytest.raises(ConfigError, match="--batch-size must be a positive integer"):
        TrainConfig(batch_size=0)
    cfg = TrainConfig(layers="8,4")
    assert cfg.layers == (8, 4)
    with pytest.raises(Exception, match="cannot assign|frozen"):
        cfg.lr = 1.0


def test_flags_are_generated_from_every_config_field():
    import dataclasses

    from mpicomm.train.config import SINGLE_RUN_ONLY, field_help

    helps = field_help()
    parser = build_parser()
    train_args, compare_args = parser.parse_args(["train"]), parser.parse_args(["compare"])
    for f in dataclasses.fields(TrainConfig):
        assert helps.get(f.name), f"{f.name}: no help comment"
        default = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
        if f.default == ():  # a repeatable flag (action="append"): absent is None
            default = None
        assert getattr(train_args, f.name) == default, f.name
        assert hasattr(compare_args, f.name) == (f.name not in SINGLE_RUN_ONLY), f.name
    assert TrainConfig.from_args(train_args) == TrainConfig()
    args = parser.parse_args(["train", "--no-overlap", "--bucket-mb", "0", "--accumulate", "4",
                              "--layers", "256,64x48,10", "--scale-lr"])
    cfg = TrainConfig.from_args(args)
    assert (cfg.overlap, cfg.bucket_mb, cfg.accumulate, cfg.scale_lr) == (False, 0.0, 4, True)
    assert cfg.layers == (256, *[64] * 48, 10)
    assert "validate" in helps and "MPICOMM_VALIDATE" in helps["validate"]  # continued comment


@pytest.mark.parametrize("kwargs, message", [
    ({"bucket_mb": -1}, "--bucket-mb must be a number >= 0"),
    ({"accumulate": 0}, "--accumulate must be a positive integer"),
    ({"trace_steps": "5:2", "trace": "t.json"}, "--trace-steps must be A:B"),
    ({"trace_steps": ":0", "trace": "t.json"}, "--trace-steps must be A:B"),  # was: an empty trace
    ({"trace_steps": "2:5"}, "--trace-steps needs --trace"),
])
def test_engine_flags_refuse_invalid_values(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


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
    from mpicomm.train.checkpoint import rebucket_residuals
    from mpicomm.train.model import layer_tensors, num_params

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


@pytest.mark.parametrize("flag, path, fragment", [
    ("--json", "/nonexistent/x.json", "folder /nonexistent does not exist"),
    ("--trace", "/nonexistent/t.json", "--trace /nonexistent/t.json"),
    ("--checkpoint", "/nonexistent/c.npz", "--checkpoint"),
    ("--json", "/", "is a folder"),
])
def test_output_paths_checked_before_the_first_step(flag, path, fragment):
    """Issue 19 §5: one line, exit 2, before any step (100,000 steps would time out)."""
    res = train(2, *SMALL, "--strategy", "ring", "--steps", "100000", flag, path, timeout=60)
    assert res.returncode == 2 and not res.timed_out, res.tail()
    out = res.stdout + res.stderr  # every command checks its outputs first (cli.main._run)
    errors = [x for x in out.splitlines() if "error:" in x]
    assert len(errors) == 1 and fragment in errors[0], out
    assert not res.stdout.strip() and "Traceback" not in out, out  # nothing ran


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
