"""The record of a training run: times and bytes over ranks, the final loss and accuracy.

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

from mpicomm.engine import plan_buckets
from mpicomm.train import metrics
from mpicomm.train.model import layer_tensors, num_params

__all__ = ["summarize", "warm_steps"]


def warm_steps(n: int) -> int:
    """Steps left out of the timing at the start of ``n``: they warm caches and check buffers."""
    return min(5, n // 5)


def summarize(cfg: Any, world: Any, job: Any, out: dict, baseline_sps: float | None) -> dict:
    """Return the run's record (the same on every rank)."""
    comm, P, n_run = world.comm, world.workers, out["n_run"]
    times = out["times"]
    skip = warm_steps(n_run)
    timed = times[skip:] if world.is_worker else np.zeros((n_run - skip, times.shape[1]))
    # step time of step i: the mean over workers (their step boundaries are rank-local, so a
    # per-step max would add up every rank's jitter and exceed the wall time)
    step_mean = metrics.sum_over_ranks(comm, timed[:, 0]) / P if len(timed) else np.zeros(1)
    sums = metrics.sum_over_ranks(comm, timed.sum(axis=0))  # step, compute, exposed, opt, total
    wall_max = float(metrics.max_over_ranks(comm, np.array([timed[:, 0].sum()]))[0])
    st = world.reducer.stats
    traffic = metrics.gather_rows(comm, np.array([st.bytes_sent, st.bytes_recv]))  # per rank
    record = _timing(cfg, world, sums, step_mean, wall_max, max(n_run - skip, 0), n_run)
    record.update(_traffic(traffic, n_run))
    record.update(_scores(cfg, world, job, out["losses"], n_run))
    record.update(history(comm, out["losses"], times[:, 0], world.is_worker))
    buckets = plan_buckets(layer_tensors(cfg.layers), np.dtype(cfg.dtype).itemsize,
                           cfg.bucket_mb * 2**20)
    record.update({
        "buckets": len(buckets),
        "allreduce_calls_per_step": len(buckets),
        "bucket_mb": cfg.bucket_mb,
        "overlap": bool(cfg.overlap and len(buckets) > 1),  # one bucket: nothing to overlap
        "accumulate": cfg.accumulate,
        "baseline_samples_per_sec": baseline_sps,
        "scaling_efficiency": (record["samples_per_sec"] / (P * baseline_sps)
                               if baseline_sps else None),
        "resumed_from_step": job.start_step if cfg.resume else None,
        "checkpoint_s": out["checkpoint_s"],
        "reducer": world.reducer.describe(),
    })
    if not record["params_in_sync"]:
        world.say(f"WARNING: {cfg.strategy}: workers ended with different parameters")
    return record


def _timing(cfg: Any, world: Any, sums: np.ndarray, step_mean: np.ndarray, wall_max: float,
            n_timed: int, n_run: int) -> dict:
    P = world.workers
    step, compute, exposed, opt, total = sums
    share = (lambda s: s / step) if step > 0 else (lambda s: float("nan"))  # noqa: E731
    per_step = lambda s: s / (P * n_timed) if n_timed else float("nan")  # noqa: E731
    other = step - compute - exposed - opt
    G = world.global_batch
    return {
        "strategy": cfg.strategy,
        "ranks": world.comm.Get_size(),
        "workers": P,
        "params": num_params(cfg.layers),
        "grad_bytes": num_params(cfg.layers) * np.dtype(cfg.dtype).itemsize,
        "global_batch": G,
        "steps": n_run,
        "steps_timed": n_timed,
        "samples_per_sec": G * n_timed / wall_max if wall_max > 0 else float("nan"),
        "step_time_median_s": float(np.median(step_mean)) if n_timed else float("nan"),
        "step_time_p90_s": float(np.percentile(step_mean, 90)) if n_timed else float("nan"),
        "step_times_s": step_mean.tolist() if n_timed else [],  # per timed step (verdicts)
        "step_time_mean_s": per_step(step),
        "compute_s": per_step(compute),
        "comm_s": per_step(exposed),
        "comm_exposed_s": per_step(exposed),
        "comm_total_s": per_step(total),
        # exposed also holds the hand-off from the comm thread, so it can exceed total: clamp
        "overlap_fraction": max(0.0, 1 - exposed / total) if total > 0 else float("nan"),
        "optimizer_s": per_step(opt),
        "other_s": per_step(other),
        "compute_share": share(compute),
        "comm_share": share(exposed),
        "optimizer_share": share(opt),
        "other_share": share(other),
    }


def _traffic(traffic: np.ndarray, n_run: int) -> dict:
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


def _scores(cfg: Any, world: Any, job: Any, losses: np.ndarray, n_run: int) -> dict:
    """Final loss/accuracy on train and test rows (split over workers), losses, crc of params."""
    comm, P, w = world.comm, world.workers, world.worker_rank
    score, crc = np.zeros(6), -1.0
    if world.is_worker:
        ds, model, xp = job.ds, job.model, world.xp
        n_eval = cfg.eval_samples
        splits = ((ds.x_train[:n_eval], ds.y_train[:n_eval]), (ds.x_test, ds.y_test))
        for j, (x, y) in enumerate(splits):
            lo, hi = w * len(x) // P, (w + 1) * len(x) // P
            loss_sum, correct = model.evaluate(xp.asarray(x[lo:hi]), xp.asarray(y[lo:hi]))
            score[3 * j : 3 * j + 3] = loss_sum, correct, hi - lo
        params = model.params if isinstance(model.params, np.ndarray) else model.params.get()
        crc = float(zlib.crc32(memoryview(params)))
    score = metrics.sum_over_ranks(comm, score)
    crcs = metrics.gather_rows(comm, np.array([crc]))[:, 0]
    worker_crcs = {c for c in crcs if c >= 0}
    is_w = world.is_worker and n_run
    last = losses[-min(len(losses), cfg.log_every or 10):] if is_w else np.zeros(0)
    first = losses[: min(len(losses), 10)] if world.is_worker else np.zeros(0)
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
