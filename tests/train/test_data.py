"""Data: the synthetic task is deterministic, shards are disjoint and add up to the global
batch, the position checkpoints, and .npz problems are named clearly."""

import json

import numpy as np
import pytest
from train_runs import SMALL_DATA, ok, train

from mpicomm.train.data import DataError, Shard, load_npz, synthetic


def test_synthetic_is_deterministic_and_uses_every_class():
    a = synthetic(12, 5, 300, 50, seed=4)
    b = synthetic(12, 5, 300, 50, seed=4)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert a.classes_seen == 5 and a.x_train.shape == (300, 12) and a.x_test.shape == (50, 12)
    assert not np.array_equal(a.y_train, synthetic(12, 5, 300, 50, seed=5).y_train)


def test_worker_batches_are_disjoint_and_union_is_the_global_batch():
    x = np.arange(100, dtype=np.float32).reshape(100, 1)
    y = np.arange(100, dtype=np.int64)
    workers = [Shard(x, y, batch=6, worker_rank=w, num_workers=3, seed=1) for w in range(3)]
    single = Shard(x, y, batch=18, worker_rank=0, num_workers=1, seed=1)
    seen_epoch0 = []
    for step in range(12):  # 5 steps per epoch: crosses two epoch boundaries
        parts = [s.next()[1].copy() for s in workers]
        union = np.concatenate(parts)
        np.testing.assert_array_equal(union, single.next()[1])
        assert len(set(union.tolist())) == 18
        if step < 5:
            seen_epoch0 += union.tolist()
    assert len(set(seen_epoch0)) == len(seen_epoch0) == 90  # disjoint within the epoch
    assert workers[0].epoch == 2


def test_position_round_trips():
    x = np.random.default_rng(0).standard_normal((40, 3)).astype(np.float32)
    y = np.arange(40, dtype=np.int64)
    a = Shard(x, y, batch=4, worker_rank=1, num_workers=2, seed=9)
    for _ in range(7):
        a.next()
    b = Shard(x, y, batch=4, worker_rank=1, num_workers=2, seed=9)
    b.load_state(**a.state())
    for _ in range(6):
        np.testing.assert_array_equal(a.next()[1], b.next()[1])


def test_batch_too_large_for_the_shard():
    x, y = np.zeros((10, 2), np.float32), np.zeros(10, np.int64)
    with pytest.raises(DataError, match=r"4 per worker × 3 workers = 12 rows .* has 10 rows"):
        Shard(x, y, batch=4, worker_rank=0, num_workers=3, seed=0)


def test_npz_holdout_and_explicit_test_split(tmp_path):
    x = np.random.default_rng(0).standard_normal((100, 4))
    y = np.arange(100) % 3
    np.savez(tmp_path / "a.npz", x=x, y=y)
    ds = load_npz(str(tmp_path / "a.npz"), 4, 3, holdout=0.2, seed=0)
    assert len(ds.x_train) == 80 and len(ds.x_test) == 20 and ds.x_train.dtype == np.float32
    rows = {tuple(r) for r in ds.x_train.astype(np.float64)} | {tuple(r) for r in ds.x_test}
    assert len(rows) == 100  # a split, not a resample
    np.savez(tmp_path / "b.npz", x=x, y=y, x_test=x[:7], y_test=y[:7])
    assert len(load_npz(str(tmp_path / "b.npz"), 4, 3, holdout=0.2, seed=0).y_test) == 7
    with pytest.raises(DataError, match="has its own test split .*--holdout 0.2 would be ignored"):
        load_npz(str(tmp_path / "b.npz"), 4, 3, holdout=0.2, seed=0, holdout_given=True)
    assert len(load_npz(str(tmp_path / "a.npz"), 4, 3, holdout=0.2, seed=0,
                        holdout_given=True).y_test) == 20  # no split of its own: --holdout applies


@pytest.mark.parametrize("arrays, message", [
    ({"x": np.zeros((5, 4)), "y": np.zeros(4, np.int64)}, r"y must have shape \(5,\)"),
    ({"x": np.zeros((5, 4)), "y": np.zeros(5)}, "integer class labels"),
    ({"x": np.zeros((5, 4)), "y": np.full(5, 3)}, r"labels in \[3, 3\] but --layers ends with 3"),
    ({"x": np.zeros(5), "y": np.zeros(5, np.int64)}, "x must be 2-D"),
    ({"x": np.zeros((5, 4)), "y": np.zeros(5, np.int64), "x_test": np.zeros((2, 4))},
     "only one of x_test, y_test"),
    # these trained: the imaginary part dropped without a word; NaN from the first step on
    ({"x": np.ones((5, 4), np.complex64), "y": np.zeros(5, np.int64)},
     "x must be real numbers, got dtype complex64"),
    ({"x": np.array([[0.0] * 4, [np.nan, 0, 0, 0], [0.0] * 4, [0, -np.inf, 0, 0], [0.0] * 4]),
      "y": np.zeros(5, np.int64)}, r"x has 2 rows with NaN or inf in float32 \(first: row 1\)"),
    ({"x": np.zeros((5, 4)), "y": np.zeros(5, np.int64), "x_test": np.full((2, 4), 1e300),
      "y_test": np.zeros(2, np.int64)}, r"x_test has 2 rows with NaN or inf in float32"),
])
def test_npz_errors_name_the_problem(tmp_path, arrays, message):
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(DataError, match=message):
        load_npz(str(tmp_path / "d.npz"), 4, 3, holdout=0.2, seed=0)


def test_unreadable_npz(tmp_path):
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(DataError, match="cannot read as .npz"):
        load_npz(str(tmp_path / "junk.npz"), 4, 3, holdout=0.2, seed=0)


# ------------------------------------------------------------------ digits (scikit-learn)
def test_digits_loads_scaled_and_splits_reproducibly_per_class():
    pytest.importorskip("sklearn")
    from mpicomm.train.data import digits

    a = digits(64, 10, holdout=0.2, seed=3)
    assert a.x_train.shape[1] == 64 and a.x_train.dtype == np.float32
    assert len(a.x_train) + len(a.x_test) == 1797
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0 and a.x_train.max() > 0.9
    # stratified: every class holds out round(0.2 × its count) rows
    full = np.bincount(np.concatenate([a.y_train, a.y_test]), minlength=10)
    np.testing.assert_array_equal(np.bincount(a.y_test, minlength=10), np.round(0.2 * full))
    rows = {r.tobytes() for r in np.concatenate([a.x_train, a.x_test])}
    assert len(rows) > 1700  # a split, not a resample (a few digits images are duplicates)
    b = digits(64, 10, holdout=0.2, seed=3, dtype="float64")
    np.testing.assert_array_equal(a.y_test, b.y_test)
    np.testing.assert_array_equal(a.x_test, b.x_test.astype(np.float32))
    c = digits(64, 10, holdout=0.2, seed=4)
    assert not np.array_equal(a.y_test, c.y_test) or not np.array_equal(a.x_test, c.x_test)


def test_digits_refuses_layers_that_do_not_fit():
    from mpicomm.train.data import digits

    with pytest.raises(DataError, match=r"64 features and 10 classes but --layers is 256,...,10"):
        digits(256, 10, holdout=0.1, seed=0)


def test_digits_without_scikit_learn_says_how_to_install(monkeypatch):
    import builtins

    from mpicomm.train.data import digits

    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.split(".")[0] == "sklearn":
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(DataError, match=r"needs scikit-learn .*mpicomm\[data\]"):
        digits(64, 10, holdout=0.1, seed=0)


@pytest.mark.slow
def test_digits_trains_above_90_percent_held_out_at_2_ranks(tmp_path):
    """The documented command: mpiexec -n 2 python -m mpicomm train --data digits --layers
    64,128,10 (300 steps); held-out accuracy from its JSON."""
    pytest.importorskip("sklearn")
    import json

    from mpi_harness import run_mpi

    out = tmp_path / "d.json"
    res = run_mpi(2, ["-m", "mpicomm", "train", "--data", "digits", "--layers", "64,128,10",
                      "--log-every", "0", "--json", str(out)], timeout=120)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    rec = json.loads(out.read_text())["results"][0]
    assert rec["workers"] == 2 and rec["params_in_sync"]
    assert rec["test_accuracy"] >= 0.90, rec["test_accuracy"]
    assert rec["train_loss_last"] < 0.5 * rec["train_loss_first"]


@pytest.mark.slow
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
