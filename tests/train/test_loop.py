"""The training loop under mpiexec: strategies agree, data parallelism is exact, it learns,
a diverged model is named, a set-up failure stops every rank."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi, run_script
from train_runs import SMALL, SMALL_DATA, ok, params, rel_err, train

import mpicomm


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
    start = mpicomm.nn.MLP((16, 32, 32, 4), seed=0).params
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


@pytest.mark.slow
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
