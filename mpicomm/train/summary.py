"""The statistics of a run's record (``train.record`` builds it): bytes, history, scores.

Collective over the run's communicator (servers contribute zeros). Times per
step are means over workers and over the timed steps (the first
``min(5, steps // 5)`` steps warm caches and are left out).

``comm_s`` is the *exposed* communication: the time the training thread waited
for (or, without overlap, performed) reductions, so compute + comm + optimizer
+ other = step. ``comm_total_s`` is the time buckets spent being reduced,
hidden or not; ``overlap_fraction`` = 1 − exposed/total.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from mpicomm.train import metrics

__all__ = ["warm_steps", "traffic", "history", "scores", "HISTORY_POINTS"]


def warm_steps(n: int) -> int:
    """Steps left out of the timing at the start of ``n``: they warm caches and check buffers."""
    return min(5, n // 5)


def traffic(traffic: np.ndarray, n_run: int) -> dict:
    """Bytes per round (one global batch) from every rank's (sent, received) totals."""
    per = (lambda b: float(b) / n_run) if n_run else (lambda b: 0.0)  # noqa: E731
    return {
        "bytes_per_step": per(traffic[:, 0].max()),
        "bytes_per_step_mean": per(traffic[:, 0].mean()),
        "bytes_recv_per_step": per(traffic[:, 1].max()),
        "bytes_per_step_by_rank": [per(b) for b in traffic[:, 0]],
    }


HISTORY_POINTS = 1000  # at most this many (step, loss, wall time) points in a record


def history(comm: Any, losses: np.ndarray, step_s: np.ndarray, is_worker: bool) -> dict:
    """Per-step training loss and wall-clock seconds since the first step, mean over workers.

    Collective. Workers may have run different numbers of steps (an async parameter
    server): each step averages the workers that ran it. Servers contribute nothing.
    Long runs keep every k-th step so a record holds at most ``HISTORY_POINTS``.
    """
    n = int(metrics.max_over_ranks(comm, np.array([len(losses) if is_worker else 0.0]))[0])
    rows = np.zeros((3, n))
    if is_worker and len(losses):
        k = len(losses)
        rows[0, :k], rows[1, :k], rows[2, :k] = losses, np.cumsum(step_s[:k]), 1.0
    tot = metrics.sum_over_ranks(comm, rows.ravel()).reshape(3, n) if n else rows
    ran = tot[2] > 0
    stride = max(1, -(-n // HISTORY_POINTS))
    idx = np.flatnonzero(ran)[::stride]
    return {"loss_history_step": (idx + 1).tolist(),
            "loss_history": (tot[0, idx] / tot[2, idx]).tolist(),
            "wall_s_history": (tot[1, idx] / tot[2, idx]).tolist()}


def scores(cfg: Any, world: Any, job: Any, losses: np.ndarray, n_run: int) -> dict:
    """Final loss/accuracy on train and test rows (split over workers), losses, crc of params.

    A diverged model (a NaN or inf parameter) has no accuracy: NaN, as its loss. A split
    model's parts evaluate the whole model together (``model.evaluate``, ``model.gather``:
    collective over them); the reporting part counts it.
    """
    comm, P, w = world.comm, world.workers, world.worker_rank
    score, crc = np.zeros(6), -1.0
    if world.is_worker:
        ds, model, xp = job.ds, job.model, world.xp
        n_eval = cfg.eval_samples
        splits = ((ds.x_train[:n_eval], ds.y_train[:n_eval]), (ds.x_test, ds.y_test))
        diverged = not bool(xp.isfinite(model.params).all())  # NaN logits: argmax says class 0
        for j, (x, y) in enumerate(splits):
            lo, hi = w * len(x) // P, (w + 1) * len(x) // P
            loss_sum, correct = model.evaluate(xp.asarray(x[lo:hi]), xp.asarray(y[lo:hi]))
            if world.reports:
                score[3 * j : 3 * j + 3] = loss_sum, np.nan if diverged else correct, hi - lo
        params = model.params if isinstance(model.params, np.ndarray) else model.params.get()
        crc = float(zlib.crc32(memoryview(np.ascontiguousarray(model.gather(params)))))
    score = metrics.sum_over_ranks(comm, score)
    crcs = metrics.gather_rows(comm, np.array([crc]))[:, 0]
    worker_crcs = {c for c in crcs if c >= 0}
    is_w = world.reports and n_run
    last = losses[-min(len(losses), cfg.log_every or 10):] if is_w else np.zeros(0)
    first = losses[: min(len(losses), 10)] if world.reports else np.zeros(0)
    sums = metrics.sum_over_ranks(comm, np.array([last.sum(), last.size, first.sum(),
                                                  first.size]))
    return {
        "final_loss": score[0] / score[2],
        "final_accuracy": score[1] / score[2],
        "test_accuracy": score[4] / score[5],
        "train_loss_first": sums[2] / sums[3] if sums[3] else float("nan"),
        "train_loss_last": sums[0] / sums[1] if sums[1] else float("nan"),
        "params_in_sync": len(worker_crcs) == 1,
        "param_crc32": int(next(iter(worker_crcs))) if len(worker_crcs) == 1 else None,
    }
