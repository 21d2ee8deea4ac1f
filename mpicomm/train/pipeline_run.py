"""``--pipeline-stages P``: the training run with the MLP's layers split over P pipeline stages.

    mpiexec -n 4 python -m mpicomm train --pipeline-stages 4 --micro-batches 8 --schedule 1f1b

1. checks: every flag a pipeline cannot honour is refused in one line
   (``ConfigError``, the same on every rank, before any message);
2. group: ranks = replicas × P (``parallel.groups``); rank r is stage r % P of
   replica r // P; the stage's gradients are averaged over the replicas with
   ``--strategy`` (data parallelism; nothing to do with one replica);
3. set-up: the whole model is initialised from the seed (as the unsplit loop)
   and the stage keeps its layers' parameters; every stage of a replica reads
   the replica's data shard (stage 0 uses x, the last stage y);
4. steps: the schedule's forwards and backwards (``parallel.stage``), the
   replicas' all-reduce, the loop's SGD on the stage's parameters;
5. record: the loop's columns (samples/s, step, exposed comm, bytes) and the
   pipeline's: the bubble counted in schedule slots and measured with the clock,
   bytes per step per stage boundary, micro-batches and bytes held per stage.
"""

from __future__ import annotations

import zlib
from types import SimpleNamespace
from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.parallel.groups import ParallelGroup
from mpicomm.parallel.pipeline import (
    SCHEDULES,
    bubble_formula,
    schedule,
    simulate,
    split_layers,
)
from mpicomm.parallel.stage import Stage
from mpicomm.train import metrics
from mpicomm.train.config import TrainConfig
from mpicomm.train.data import DIGITS, Shard, digits, load_npz, synthetic
from mpicomm.train.model import MLP
from mpicomm.train.sgd import SGD
from mpicomm.train.summary import warm_steps

__all__ = ["check_pipeline_flags", "run_pipeline"]

NAN = float("nan")


def check_pipeline_flags(cfg: TrainConfig, ranks: int | None = None) -> None:
    """Raise ``ConfigError`` for a pipeline flag that cannot take effect (no MPI)."""
    P, M = cfg.pipeline_stages, cfg.micro_batches
    if P < 1 or M < 1:
        raise ConfigError(f"--pipeline-stages and --micro-batches must be >= 1, got {P}, {M}")
    if cfg.schedule not in SCHEDULES:
        raise ConfigError(f"--schedule must be one of {', '.join(SCHEDULES)}, got "
                          f"{cfg.schedule!r}")
    if P == 1:
        if M != 1 or cfg.schedule != "1f1b":
            raise ConfigError("--micro-batches and --schedule need --pipeline-stages P >= 2")
        return
    linears = len(cfg.layers) - 1
    if P > linears:
        raise ConfigError(f"--pipeline-stages {P} for a model of {linears} layers: each stage "
                          "needs at least one layer")
    if cfg.batch_size % M:
        raise ConfigError(f"--batch-size {cfg.batch_size} does not split into --micro-batches "
                          f"{M} of equal rows")
    if ranks is not None and ranks % P:
        raise ConfigError(f"{ranks} ranks do not split into pipelines of {P} stages")
    refused = [("--strategy zero", cfg.strategy == "zero"), ("--ps-mode", bool(cfg.ps_mode)),
               ("--tensor-parallel", cfg.tensor_parallel != 1),
               ("--accumulate", cfg.accumulate != 1), ("--checkpoint", bool(cfg.checkpoint)),
               ("--trace", bool(cfg.trace)), ("--straggler/--jitter",
                                                bool(cfg.straggler or cfg.jitter)),
               ("--device gpu", cfg.device != "cpu"), ("--baseline", cfg.baseline),
               ("--bucket-mb", cfg.bucket_mb != 25.0)]
    for flag, bad in refused:
        if bad:
            raise ConfigError(f"{flag} is not supported with --pipeline-stages")


def run_pipeline(cfg: TrainConfig, comm: Any, verbose: bool = True) -> dict[str, Any]:
    """Train with the layers over ``cfg.pipeline_stages`` stages; return the record (all ranks)."""
    check_pipeline_flags(cfg, comm.Get_size())                                          # 1.
    g = ParallelGroup(comm, cfg.pipeline_stages, strategy=cfg.strategy,                 # 2.
                      options=cfg.reducer_options())
    try:
        job = _set_up(cfg, g)                                                          # 3.
        out = _steps(cfg, g, job)                                                      # 4.
        rec = _record(cfg, comm, g, job, out)                                          # 5.
    finally:
        g.close()
    if verbose and comm.Get_rank() == 0:
        print(f"{rec['strategy']}: {comm.Get_size()} ranks = {g.replicas} replicas x "
              f"{g.parts} stages | bubble {rec['bubble_slots']:.3f} in slots, "
              f"{rec['bubble_measured']:.3f} measured | peak micro-batches held by stage "
              f"{rec['peak_microbatches_by_stage']}", flush=True)
    return rec


def _dataset(cfg: TrainConfig) -> Any:
    f, c = cfg.layers[0], cfg.layers[-1]
    if cfg.data == DIGITS:
        return digits(f, c, holdout=cfg.holdout, seed=cfg.seed, dtype=cfg.dtype)
    if cfg.data:
        return load_npz(cfg.data, f, c, holdout=cfg.holdout, seed=cfg.seed, dtype=cfg.dtype)
    return synthetic(f, c, cfg.train_samples, cfg.test_samples, seed=cfg.seed, dtype=cfg.dtype)


def _set_up(cfg: TrainConfig, g: ParallelGroup) -> SimpleNamespace:
    """The stage's parameters (a copy of its layers), gradients, momentum, data and ``Stage``."""
    ds = _dataset(cfg)
    shard = Shard(ds.x_train, ds.y_train, batch=cfg.batch_size, worker_rank=g.replica,
                  num_workers=g.replicas, seed=cfg.seed)
    a, b = split_layers(len(cfg.layers) - 1, g.parts)[g.part]
    full = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype)
    lo, hi = full.spans[a].start, full.spans[b - 1].stop
    params = full.params[lo:hi].copy()
    grads, velocity = np.zeros_like(params), np.zeros_like(params)
    weights, grad_views, off = [], [], 0
    for fan_in, fan_out in zip(cfg.layers[a:b], cfg.layers[a + 1 : b + 1], strict=True):
        mid, end = off + fan_in * fan_out, off + fan_in * fan_out + fan_out
        weights.append((params[off:mid].reshape(fan_in, fan_out), params[mid:end]))
        grad_views.append((grads[off:mid].reshape(fan_in, fan_out), grads[mid:end]))
        off = end
    last = g.part == g.parts - 1
    stage = Stage(g.p2p, g.part, g.parts, weights, grad_views, relu_last=not last,
                  micro_rows=cfg.batch_size // cfg.micro_batches, micro=cfg.micro_batches)
    sgd = SGD(np, params, grads, velocity, [SimpleNamespace(lo=0, hi=params.size)],
              cfg.momentum, cfg.weight_decay)
    return SimpleNamespace(shard=shard, params=params, grads=grads, velocity=velocity,
                           stage=stage, sgd=sgd, last=last, layers=(a, b))


def _steps(cfg: TrainConfig, g: ParallelGroup, job: SimpleNamespace) -> dict:
    """Run the steps; per step: (step, idle waiting for stages, replicas' all-reduce, optimizer)."""
    actions = schedule(cfg.schedule, g.parts, cfg.micro_batches)[g.part]
    n = cfg.steps
    times, losses = np.zeros((n, 4)), np.zeros(n)
    base_lr = cfg.lr * (g.replicas if cfg.scale_lr else 1)
    perf = clock.now
    metrics.barrier(g.comm)
    for i in range(n):
        lr = base_lr * min(1.0, (i + 1) / cfg.warmup_steps) if cfg.warmup_steps else base_lr
        xb, yb = job.shard.next()
        t0 = perf()
        losses[i] = job.stage.run(actions, xb, yb)
        t1 = perf()
        if g.replicas > 1:
            g.reducer.allreduce(job.grads, op="mean")
        t2 = perf()
        job.sgd.update(0, lr)
        t3 = perf()
        times[i] = (t3 - t0, job.stage.take_idle(), t2 - t1, t3 - t2)
    return {"times": times, "losses": losses}


def _record(cfg: TrainConfig, comm: Any, g: ParallelGroup, job: SimpleNamespace,
            out: dict) -> dict[str, Any]:
    """The run's record, the same on every rank (collective over ``comm``)."""
    n, P, M, R = cfg.steps, g.parts, cfg.micro_batches, g.replicas
    times = out["times"]
    timed = times[warm_steps(n):]
    st, cn = job.stage, g.reducer.stats
    crc = float(zlib.crc32(memoryview(job.params)))
    row = np.array([g.part, g.replica, *timed.sum(axis=0),
                    g.counts.bytes_sent + cn.bytes_sent, st.sent_fwd, st.sent_bwd,
                    st.slots_made, st.slots_made * st.slot_bytes, job.params.nbytes,
                    job.velocity.nbytes, crc])
    rows = metrics.gather_rows(comm, row)
    step_by_rank = metrics.gather_rows(comm, times[:, 0])  # (ranks, n)
    loss_sum = metrics.sum_over_ranks(comm, out["losses"] if job.last else np.zeros(n))
    losses = loss_sum / R
    series = step_by_rank[:, warm_steps(n):].max(axis=0)
    n_timed = len(series)
    wall = rows[:, 2].max()  # the slowest rank's timed steps
    step, idle, dp, opt = (rows[:, 2:6].sum(axis=0) / (len(rows) * n_timed)) if n_timed else \
        (NAN,) * 4
    r0 = rows[rows[:, 1] == 0]  # replica 0's stages, in stage order
    r0 = r0[np.argsort(r0[:, 0])]
    sim = simulate(schedule(cfg.schedule, P, M))
    same = all(len(set(rows[rows[:, 0] == s][:, 13])) == 1 for s in range(P))  # crc
    label = f"pp{P}" if R == 1 else f"dp{R}xpp{P}"
    return {
        "strategy": f"{label}:{cfg.schedule}", "ranks": comm.Get_size(), "workers": R,
        "pipeline_stages": P, "micro_batches": M, "schedule": cfg.schedule,
        "global_batch": cfg.batch_size * R, "steps": n, "steps_timed": n_timed,
        "samples_per_sec": cfg.batch_size * R * n_timed / wall if wall > 0 else NAN,
        "step_time_median_s": float(np.median(series)) if n_timed else NAN,
        "step_time_p90_s": float(np.percentile(series, 90)) if n_timed else NAN,
        "step_time_mean_s": step, "comm_s": idle + dp, "comm_exposed_s": idle + dp,
        "pipeline_wait_s": idle, "dp_allreduce_s": dp, "optimizer_s": opt,
        "compute_s": step - idle - dp - opt, "comm_share": (idle + dp) / step,
        "optimizer_share": opt / step, "compute_share": (step - idle - dp - opt) / step,
        "other_share": 0.0,
        "bubble_slots": sim.bubble, "bubble_formula": bubble_formula(P, M),
        "bubble_measured": float(np.mean(rows[:, 3] / rows[:, 2])) if wall > 0 else NAN,
        "bytes_per_step": float(rows[:, 6].max() / n), "bytes_per_step_by_rank":
            [float(x) / n for x in rows[:, 6]],
        "boundary_bytes_per_step": [float(r0[s, 7] + r0[s + 1, 8]) / n for s in range(P - 1)],
        "peak_microbatches_by_stage": [int(x) for x in r0[:, 9]],
        "peak_microbatches_slots": sim.peak_held,
        "activation_bytes_peak_by_stage": [int(x) for x in r0[:, 10]],
        "param_bytes_by_stage": [int(x) for x in r0[:, 11]],
        "optimizer_state_bytes": int(rows[:, 12].max()),
        "params_in_sync": same, "loss_history": losses.tolist(),
        "loss_history_step": list(range(1, n + 1)), "train_loss_first": float(losses[0]),
        "train_loss_last": float(losses[-min(n, 10):].mean()),
        "final_loss": float(losses[-min(n, 10):].mean()), "clock": clock.name(),
        "resumed_from_step": None, "layers_by_stage": _layers(cfg, P),
    }


def _layers(cfg: TrainConfig, P: int) -> list[list[int]]:
    return [list(ab) for ab in split_layers(len(cfg.layers) - 1, P)]
