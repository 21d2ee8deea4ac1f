"""Datasets for the training loop, and each worker's share of every global batch.

1. ``synthetic(...)``: Gaussian inputs labelled by a fixed random *teacher*
   network (features → 32 tanh units → classes, argmax). Everything derives
   from the seed, so every rank builds the same data with no file and no
   message. An MLP student learns it well above chance in a few hundred steps.
2. ``load_npz(path, ...)``: arrays ``x`` (N, features) and ``y`` (N,) integer
   labels; optional ``x_test``/``y_test`` are the held-out split, otherwise a
   seeded ``holdout`` fraction of the rows is held out. Errors name the file,
   the array and expected vs got.
3. ``digits(...)``: scikit-learn's bundled 8×8 handwritten digits (1,797
   images, 64 features, 10 classes; shipped inside scikit-learn, no download;
   optional extra ``[data]``). Pixels 0..16 are scaled to [0, 1]; a seeded,
   stratified ``holdout`` fraction of every class is held out.
4. ``Shard``: worker w's rows of every global batch. Each epoch the training
   rows are permuted by ``(seed, epoch)`` and cut into global batches of
   ``batch × workers`` rows; worker w takes rows ``[w·batch, (w+1)·batch)`` of
   each. Within an epoch the workers' shards are disjoint, and the union of
   the workers' batches at step t is exactly the batch a 1-worker run with
   ``batch × workers`` rows sees at step t — so data parallelism changes the
   arithmetic's order, never the samples. The position (epoch, cursor) is all
   the state there is; ``state()``/``load_state()`` checkpoint it.
"""

from __future__ import annotations

import functools
import os
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Dataset", "DataError", "Shard", "synthetic", "load_npz", "digits", "DIGITS",
           "load_dataset", "DEFAULT_HOLDOUT",
           "DIGITS_LAYERS", "check_rows_per_step"]

DIGITS = "digits"  # the --data value naming the bundled digits set
DEFAULT_HOLDOUT = 0.1  # --holdout when not given
DIGITS_LAYERS = (64, 128, 10)  # its --layers when none are given: 64 pixels in, 10 classes out

TEACHER_HIDDEN = 32
_STREAM_TEACHER, _STREAM_INPUTS, _STREAM_SPLIT, _STREAM_EPOCH = 1, 2, 3, 4


class DataError(ValueError):
    """The data cannot be used with this configuration (file, arrays, shapes, batch)."""


@dataclass
class Dataset:
    """Training and held-out arrays (x in the model's dtype, y int64) and their origin."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    @property
    def classes_seen(self) -> int:
        """Number of distinct labels in the training split."""
        return int(np.unique(self.y_train).size)

    def fingerprint(self) -> int:
        """CRC-32 of the four arrays' bytes: the data itself, wherever the file lies."""
        crc = 0
        for a in (self.x_train, self.y_train, self.x_test, self.y_test):
            crc = zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"), crc)
        return crc


def synthetic(
    features: int, classes: int, n_train: int, n_test: int, *, seed: int, dtype: Any = "float32"
) -> Dataset:
    """Return a teacher-labelled Gaussian classification task, identical for a given seed.

    Args:
        features, classes: input width and number of labels (from ``--layers``).
        n_train, n_test: rows in the training and held-out splits.
        seed: the one seed; the teacher and the inputs use separate streams of it.
        dtype: dtype of ``x``.
    """
    teacher = np.random.default_rng([seed, _STREAM_TEACHER])
    w1 = teacher.standard_normal((features, TEACHER_HIDDEN)) / np.sqrt(features)
    w2 = teacher.standard_normal((TEACHER_HIDDEN, classes)) * 2.0 / np.sqrt(TEACHER_HIDDEN)
    rng = np.random.default_rng([seed, _STREAM_INPUTS])
    x = rng.standard_normal((n_train + n_test, features), dtype=np.float32)
    x = x.astype(dtype, copy=False)
    y = (np.tanh(x @ w1) @ w2).argmax(axis=1).astype(np.int64)
    return Dataset(
        x[:n_train], y[:n_train], x[n_train:], y[n_train:],
        source=f"synthetic(features={features}, classes={classes}, train={n_train}, "
        f"test={n_test}, seed={seed})",
    )


def load_npz(
    path: str, features: int, classes: int, *, holdout: float, seed: int, dtype: Any = "float32",
    holdout_given: bool = False
) -> Dataset:
    """Load ``x``/``y`` (and optional ``x_test``/``y_test``) from ``path``, checking shapes.

    Args:
        path: ``.npz`` file written by ``np.savez``.
        features, classes: what ``--layers`` expects (first and last width).
        holdout: fraction of rows held out (seeded permutation) when the file has no test split.
        holdout_given: the user set ``holdout``: a file with its own test split refuses it.
        seed: seed of the held-out split.
        dtype: dtype ``x`` is converted to.

    Raises:
        DataError: missing file, unreadable file, missing arrays, wrong shapes or labels.
    """
    where = f"--data {path}"
    if not os.path.exists(path):
        raise DataError(f"{where}: no such file")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as exc:  # noqa: BLE001 - any read failure is one clear message
        raise DataError(f"{where}: cannot read as .npz ({type(exc).__name__}: {exc})") from None
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(
                f"{where}: missing array {key!r} (found: {', '.join(sorted(arrays)) or 'none'}); "
                "expected x (N, features) and y (N,) integer labels"
            )
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise DataError(f"{where}: has only one of x_test, y_test; give both or neither")
    x, y = _check_xy(where, arrays["x"], arrays["y"], "x", "y", features, classes, dtype)
    if "x_test" in arrays:
        if holdout_given:
            raise DataError(f"{where}: has its own test split (x_test, y_test), so --holdout "
                            f"{holdout} would be ignored; drop --holdout")
        xt, yt = _check_xy(
            where, arrays["x_test"], arrays["y_test"], "x_test", "y_test", features, classes, dtype
        )
        return Dataset(x, y, xt, yt, source=f"npz({path})")
    if not 0 < holdout < 1:
        raise DataError(f"{where}: holdout must be in (0, 1), got {holdout}")
    n_test = max(1, int(round(holdout * len(x))))
    if n_test >= len(x):
        raise DataError(f"{where}: {len(x)} rows leave none to train on after holding out {n_test}")
    order = np.random.default_rng([seed, _STREAM_SPLIT]).permutation(len(x))
    test, train = order[:n_test], np.sort(order[n_test:])
    return Dataset(x[train], y[train], x[np.sort(test)], y[np.sort(test)],
                   source=f"npz({path}, holdout={holdout})")


def digits(
    features: int, classes: int, *, holdout: float, seed: int, dtype: Any = "float32"
) -> Dataset:
    """Return scikit-learn's 8×8 digits, pixels scaled to [0, 1], split per class by ``seed``.

    Args:
        features, classes: what ``--layers`` expects; must be 64 and 10.
        holdout: fraction of each class held out (stratified, seeded).
        seed: seed of the split.
        dtype: dtype of ``x``.

    Raises:
        DataError: scikit-learn is missing, or ``--layers`` does not fit 64 → 10.
    """
    where = f"--data {DIGITS}"
    if features != 64 or classes != 10:
        raise DataError(
            f"{where}: 8×8 digits have 64 features and 10 classes but --layers is "
            f"{features},...,{classes}; use e.g. --layers 64,128,10"
        )
    if not 0 < holdout < 1:
        raise DataError(f"{where}: holdout must be in (0, 1), got {holdout}")
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise DataError(
            f"{where} needs scikit-learn (it ships the data set): "
            "pip install 'mpicomm[data]' or pip install scikit-learn"
        ) from None
    bunch = load_digits()
    x = np.ascontiguousarray(bunch.data / 16.0, dtype=dtype)  # pixel intensities 0..16
    y = bunch.target.astype(np.int64)
    test = _stratified_holdout(y, holdout, seed)
    train = np.setdiff1d(np.arange(len(y)), test)
    return Dataset(x[train], y[train], x[test], y[test],
                   source=f"digits(8x8, holdout={holdout}, seed={seed})")


def _stratified_holdout(y: np.ndarray, holdout: float, seed: int) -> np.ndarray:
    """Return the sorted held-out rows: ``round(holdout × n_c)`` seeded picks of every class c."""
    rng = np.random.default_rng([seed, _STREAM_SPLIT])
    picks = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        picks.append(rng.permutation(rows)[: max(1, int(round(holdout * len(rows))))])
    return np.sort(np.concatenate(picks))


def _check_xy(where, x, y, xn, yn, features, classes, dtype):
    if x.ndim != 2:
        raise DataError(f"{where}: {xn} must be 2-D (N, features), got shape {x.shape}")
    if x.shape[1] != features:
        raise DataError(
            f"{where}: {xn} has {x.shape[1]} features per sample but --layers starts "
            f"with {features}; make the first width {x.shape[1]}"
        )
    if y.ndim != 1 or len(y) != len(x):
        raise DataError(f"{where}: {yn} must have shape ({len(x)},) to match {xn}, got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{where}: {yn} must hold integer class labels, got dtype {y.dtype}")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise DataError(f"{where}: {xn} must be real numbers, got dtype {x.dtype}")
    if len(y) and (y.min() < 0 or y.max() >= classes):
        raise DataError(
            f"{where}: {yn} has labels in [{y.min()}, {y.max()}] but --layers ends with "
            f"{classes} classes; labels must be in [0, {classes - 1}]"
        )
    with np.errstate(over="ignore"):  # beyond the dtype's range: inf, refused just below
        x = np.ascontiguousarray(x, dtype=dtype)
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))  # NaN, inf, or beyond dtype's range
    if bad.size:
        raise DataError(f"{where}: {xn} has {bad.size} rows with NaN or inf in {np.dtype(dtype)} "
                        f"(first: row {bad[0]}); every input must be finite")
    return x, y.astype(np.int64)


def check_rows_per_step(rows: int, batch: int, workers: int, accumulate: int = 1) -> None:
    """Refuse an optimizer step that needs more rows than the training split has.

    One step reads ``batch × workers × accumulate`` rows; more than ``rows`` would
    reuse rows inside one step. Raises ``DataError`` naming the flags to change.
    """
    need = batch * workers * accumulate
    if need <= rows:
        return
    acc = f" × --accumulate {accumulate}" if accumulate > 1 else ""
    fits = [f"--batch-size <= {rows // (workers * accumulate)}"] * (rows >= workers * accumulate)
    if accumulate > 1 and rows >= batch * workers:
        fits.append(f"--accumulate <= {rows // (batch * workers)}")
    fix = "use " + " or ".join(fits) if fits else "use fewer workers or more data"
    raise DataError(
        f"batch too large for the shard: --batch-size {batch} per worker × {workers} workers"
        f"{acc} = {need} rows per step, but the training set has {rows} rows; {fix}"
    )


class Shard:
    """Worker ``worker_rank``'s rows of every global batch, epoch after epoch.

    One optimizer step reads ``accumulate`` micro-batches; together they are
    global batch s, rows ``[s·G, (s+1)·G)`` of the epoch's permutation with
    G = batch × num_workers × accumulate, micro-batch j of worker w being rows
    ``s·G + j·batch·num_workers + w·batch`` onwards. So the rows of a global
    batch do not depend on how it is split, and a checkpoint's position
    (epoch, global batches consumed) resumes under any split of the same G.

    Args:
        x, y: the training split (NumPy; copied to ``xp`` once).
        batch: rows per worker per micro-batch.
        worker_rank, num_workers: this worker and the number of workers.
        seed: seed of the per-epoch permutations.
        xp: array module the batches are produced in.
        accumulate: micro-batches per optimizer step.

    Raises:
        DataError: one optimizer step needs more rows than the training split has
            (``check_rows_per_step``, the rule the config applies too).
    """

    def __init__(
        self, x: np.ndarray, y: np.ndarray, *, batch: int, worker_rank: int, num_workers: int,
        seed: int, xp: Any = np, accumulate: int = 1,
    ) -> None:
        n = len(x)
        check_rows_per_step(n, batch, num_workers, accumulate)
        self.accumulate = accumulate
        self.global_batch = batch * num_workers * accumulate
        self.xp, self.seed, self.batch = xp, seed, batch
        self.x, self.y = xp.asarray(x), xp.asarray(y)
        self.steps_per_epoch = n // self.global_batch  # the last partial batch is dropped
        self._micro_rows = batch * num_workers         # rows of one micro-batch, all workers
        self._micros = self.steps_per_epoch * accumulate
        self.offset = worker_rank * batch
        self.xb = xp.empty((batch, x.shape[1]), dtype=x.dtype)  # reused every step
        self.yb = xp.empty(batch, dtype=np.int64)
        self.epoch, self.cursor = 0, 0  # cursor: micro-batches read in this epoch
        self._perm = self._permutation(0)
        # NumPy's take(out=) copies through a temporary when mode="raise" (the default);
        # the rows are valid by construction, so "clip" changes nothing but the copy.
        self._take = functools.partial(np.take, mode="clip") if xp is np else xp.take

    def _permutation(self, epoch: int) -> Any:
        perm = np.random.default_rng([self.seed, _STREAM_EPOCH, epoch]).permutation(len(self.x))
        return self.xp.asarray(perm)

    def next(self) -> tuple[Any, Any]:
        """Return this worker's (x, y) for the next micro-batch (reused buffers: copy to keep)."""
        if self.cursor == self._micros:
            self.epoch, self.cursor = self.epoch + 1, 0
            self._perm = self._permutation(self.epoch)
        lo = self.cursor * self._micro_rows + self.offset
        rows = self._perm[lo : lo + self.batch]
        self._take(self.x, rows, axis=0, out=self.xb)
        self._take(self.y, rows, out=self.yb)
        self.cursor += 1
        return self.xb, self.yb

    def state(self) -> dict[str, int]:
        """Return the position to checkpoint: epoch and *global* batches consumed in it.

        Counted in global batches, not micro-batches, so a run resumed with the same
        global batch split differently (``--batch-size``/``--accumulate``) reads on
        from the same row.
        """
        if self.cursor % self.accumulate:
            raise DataError(f"data position {self.cursor} is inside an optimizer step")
        return {"epoch": self.epoch, "cursor": self.cursor // self.accumulate}

    def load_state(self, epoch: int, cursor: int) -> None:
        """Continue from a checkpointed position (``cursor``: global batches of the epoch)."""
        if not 0 <= cursor <= self.steps_per_epoch:
            raise DataError(
                f"data position cursor={cursor} is outside an epoch of {self.steps_per_epoch} steps"
            )
        self.epoch, self.cursor = int(epoch), int(cursor) * self.accumulate
        self._perm = self._permutation(self.epoch)


def load_dataset(cfg: Any) -> Dataset:
    """The data set a training config names (``TrainConfig``: ``data``, ``layers``,
    ``holdout``, ``seed``, ``dtype``, the synthetic sizes): digits, a ``.npz`` or synthetic."""
    features, classes = cfg.layers[0], cfg.layers[-1]
    if cfg.data == DIGITS:  # scikit-learn's bundled 8x8 digits
        return digits(features, classes, holdout=cfg.holdout, seed=cfg.seed, dtype=cfg.dtype)
    if cfg.data:
        return load_npz(cfg.data, features, classes, holdout=cfg.holdout, seed=cfg.seed,
                        dtype=cfg.dtype, holdout_given=cfg.holdout != DEFAULT_HOLDOUT)
    return synthetic(features, classes, cfg.train_samples, cfg.test_samples, seed=cfg.seed,
                     dtype=cfg.dtype)
