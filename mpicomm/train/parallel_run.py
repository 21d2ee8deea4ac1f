"""Model-parallel training runs: ``--pipeline-stages P`` and ``--tensor-parallel T``.

    mpiexec -n 4 python -m mpicomm train --pipeline-stages 4 --micro-batches 8 --schedule 1f1b
    mpiexec -n 4 python -m mpicomm train --tensor-parallel 2      # 2 replicas x 2 shards

1. checks: every flag a model-parallel run cannot honour is refused in one line
   (``ConfigError``, the same on every rank, before any message);
2. group: ranks = replicas × parts (``parallel.groups``); rank r is part r % K of
   replica r // K (a pipeline stage or a tensor shard); each part's gradients
   are averaged over the replicas with ``--strategy`` (data parallelism);
3. set-up: the whole model is initialised from the seed (as the unsplit loop)
   and the part keeps its share; every part of a replica reads the replica's
   data shard;
4. steps: the part's forward and backward (``parallel.stage.Stage`` over the
   schedule, or ``parallel.tensor.TensorParallel``), the replicas' all-reduce,
   the loop's SGD on the part's parameters;
5. record: the loop's columns (samples/s, step, exposed comm, bytes, memory per
   rank) and the family's: pipeline bubble (in schedule slots and measured with
   the clock), bytes per stage boundary, micro-batches held; tensor-parallel
   bytes against the formula.
"""

from __future__ import annotations

import zlib
from types import SimpleNamespace
from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import is_given
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.parallel.groups import ParallelGroup
from mpicomm.parallel.pipeline import (
    SCHEDULES,
    bubble_formula,
    schedule,
    simulate,
    split_layers,
)
from mpicomm.parallel.stage import Stage
from mpicomm.parallel.tensor import TensorParallel, tp_bytes_formula
from mpicomm.train import metrics
from mpicomm.train.config import TrainConfig
from mpicomm.train.data import DataError, Shard, load_dataset
from mpicomm.train.model import MLP, SoftmaxCrossEntropy
from mpicomm.train.sgd import SGD
from mpicomm.train.summary import warm_steps

__all__ = ["check_parallel_flags", "run_parallel", "is_model_parallel", "ParallelSetupError"]

NAN = float("nan")


def is_model_parallel(cfg: TrainConfig) -> bool:
    """True for a pipeline or tensor-parallel run (this module's runner, not the loop's)."""
    return cfg.pipeline_stages > 1 or cfg.tensor_parallel > 1


def check_parallel_flags(cfg: TrainConfig, ranks: int | None = None) -> None:
    """Raise ``ConfigError`` for a model-parallel flag that cannot take effect (no MPI)."""
    P, M, T = cfg.pipeline_stages, cfg.micro_batches, cfg.tensor_parallel
    if P < 1 or M < 1 or T < 1:
        raise ConfigError("--pipeline-stages, --micro-batches and --tensor-parallel must be "
                          f">= 1, got {P}, {M}, {T}")
    if cfg.schedule not in SCHEDULES:
        raise ConfigError(f"--schedule must be one of {', '.join(SCHEDULES)}, got "
                          f"{cfg.schedule!r}")
    if P == 1 and (M != 1 or cfg.schedule != "1f1b"):
        raise ConfigError("--micro-batches and --schedule need --pipeline-stages P >= 2")
    if not is_model_parallel(cfg):
        return
    linears, K = len(cfg.layers) - 1, max(P, T)
    if P > 1 and T > 1:
        raise ConfigError("--pipeline-stages with --tensor-parallel is not supported (choose "
                          "one; data parallelism combines with either)")
    if P > linears:
        raise ConfigError(f"--pipeline-stages {P} for a model of {linears} layers: each stage "
                          "needs at least one layer")
    if T > 1 and linears < 2:
        raise ConfigError(f"--tensor-parallel {T} needs a pair of linear layers: --layers "
                          f"{','.join(map(str, cfg.layers))} has {linears}")
    if T > 1 and min(cfg.layers[1:-1:2]) < T:
        raise ConfigError(f"--tensor-parallel {T} needs every layer pair's hidden width >= "
                          f"{T}: here {list(cfg.layers[1:-1:2])}")
    if cfg.batch_size % M:
        raise ConfigError(f"--batch-size {cfg.batch_size} does not split into --micro-batches "
                          f"{M} of equal rows")
    if ranks is not None and ranks % K:
        raise ConfigError(f"{ranks} ranks do not split into groups of {K} "
                          f"({'stages' if P > 1 else 'tensor shards'})")
    _check_replica_nodes(cfg, ranks, K)
    for flag, bad in (("--compress", is_given(cfg, "compress", cfg.compress != "none")),
                      ("--channels", is_given(cfg, "channels", cfg.channels != 1))):
        if ranks == K and bad:
            raise ConfigError(f"{flag} has no effect with one replica ({ranks} ranks = {K} "
                              "parts): it shapes the all-reduce across replicas only")
    refused = [("--strategy zero", cfg.strategy == "zero"), ("--ps-mode", bool(cfg.ps_mode)),
               ("--accumulate", is_given(cfg, "accumulate", cfg.accumulate != 1)),
               ("--checkpoint", bool(cfg.checkpoint)),
               ("--trace", bool(cfg.trace)), ("--straggler/--jitter",
                                                bool(cfg.straggler or cfg.jitter)),
               ("--device gpu", cfg.device != "cpu"), ("--baseline", cfg.baseline),
               ("--bucket-mb", is_given(cfg, "bucket_mb", cfg.bucket_mb != 25.0)),
               ("--dedicated", cfg.dedicated),  # every rank holds a part: none can only serve
               ("--tensorboard", bool(cfg.tensorboard)),  # the loop's writer: not this runner
               ("--overlap" if cfg.overlap else "--no-overlap",  # no backward thread here
                is_given(cfg, "overlap", not cfg.overlap)),
               ("--nvtx", bool(cfg.nvtx))]  # the loop's ranges: not this runner's
    for flag, bad in refused:
        if bad:
            raise ConfigError(f"{flag} is not supported with "
                              f"{'--pipeline-stages' if P > 1 else '--tensor-parallel'}")


def _check_replica_nodes(cfg: TrainConfig, ranks: int | None, K: int) -> None:
    """Refuse simulated nodes on which a part's replicas sit unevenly.

    The replicas' reducer models nodes as equal runs of its ranks (``groups.replica_nodes``).
    Part j's replicas are world ranks j, j+K, j+2K, ...: nodes of n ranks hold n/K of them
    each when K divides n, one each when n <= K, and otherwise runs of unequal length (6 ranks,
    nodes of 3, K = 2: part 1's replicas on nodes 0, 1, 1), which the reducer would model as
    other nodes than they are.
    """
    n = resolve_ranks_per_node(cfg.ranks_per_node)
    if ranks is None or n is None or ranks == K or n <= K or n % K == 0:
        return
    parts = "stages" if cfg.pipeline_stages > 1 else "tensor shards"
    raise ConfigError(f"--ranks-per-node {n} with {K} {parts} per replica: a part's replicas "
                      "would sit unevenly on the nodes, which their all-reduce cannot model; "
                      f"use nodes of at most {K} ranks or of a multiple of {K}")


def run_parallel(cfg: TrainConfig, comm: Any, verbose: bool = True) -> dict[str, Any]:
    """Train a pipeline or tensor-parallel layout; return the run's record (all ranks)."""
    check_parallel_flags(cfg, comm.Get_size())                                          # 1.
    g = ParallelGroup(comm, max(cfg.pipeline_stages, cfg.tensor_parallel),             # 2.
                      strategy=cfg.strategy, options=cfg.reducer_options())
    try:
        job = _agreed_set_up(cfg, g, comm)                                             # 3.
        out = _steps(cfg, g, job, verbose)                                             # 4.
        rec = _record(cfg, comm, g, job, out)                                          # 5.
    finally:
        g.close()
    if verbose and comm.Get_rank() == 0:
        print(f"{rec['strategy']}: {comm.Get_size()} ranks = {g.replicas} replicas x "
              f"{g.parts} parts | loss {rec['train_loss_first']:.4f} -> "
              f"{rec['train_loss_last']:.4f} | {rec['bytes_per_step'] / 1e3:,.1f} KB/step",
              flush=True)
    return rec


class ParallelSetupError(RuntimeError):
    """Set-up failed on some rank; every rank raises it, the failing one has printed why."""


def _agreed_set_up(cfg: TrainConfig, g: ParallelGroup, comm: Any) -> SimpleNamespace:
    """``_set_up`` on every rank; a failure on any rank raises ``ParallelSetupError`` on all."""
    job, failure = None, None
    try:
        job = _set_up(cfg, g)
    except (DataError, ValueError) as exc:
        failure = exc
    bad = metrics.first_failure(comm, failure is not None)
    if bad >= 0:
        if failure is not None and comm.Get_rank() == bad:
            print(f"mpicomm train: error: {failure}", flush=True)
        raise ParallelSetupError(f"set-up failed on rank {bad}")
    return job


def _set_up(cfg: TrainConfig, g: ParallelGroup) -> SimpleNamespace:
    """The part (stage or tensor shard), its momentum and SGD, and the replica's data."""
    ds = load_dataset(cfg)
    shard = Shard(ds.x_train, ds.y_train, batch=cfg.batch_size, worker_rank=g.replica,
                  num_workers=g.replicas, seed=cfg.seed)
    full = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype)
    if cfg.pipeline_stages > 1:
        part = _stage(cfg, g, full)
        actions = schedule(cfg.schedule, g.parts, cfg.micro_batches)[g.part]
        run = lambda x, y: part.stage.run(actions, x, y)  # noqa: E731
        waited, spanned = part.stage.take_idle, part.stage.take_span
    else:
        part = TensorParallel(g.p2p, g.parts, g.part, cfg.layers, full.params,
                              criterion=_criterion(cfg, cfg.batch_size))
        run, waited, spanned = part.step, part.take_comm, None
    velocity = np.zeros_like(part.params)
    sgd = SGD(np, part.params, part.grads, velocity, [SimpleNamespace(lo=0, hi=part.params.size)],
              cfg.momentum, cfg.weight_decay)
    return SimpleNamespace(shard=shard, part=part, run=run, waited=waited, spanned=spanned,
                           velocity=velocity, sgd=sgd,
                           last=g.part == g.parts - 1 or cfg.tensor_parallel > 1)


def _stage(cfg: TrainConfig, g: ParallelGroup, full: MLP) -> SimpleNamespace:
    """Pipeline stage ``g.part``: a copy of its layers' parameters, views, and its ``Stage``."""
    a, b = split_layers(len(cfg.layers) - 1, g.parts)[g.part]
    params = full.params[full.spans[a].start : full.spans[b - 1].stop].copy()
    grads = np.zeros_like(params)
    weights, grad_views, off = [], [], 0
    for fan_in, fan_out in zip(cfg.layers[a:b], cfg.layers[a + 1 : b + 1], strict=True):
        mid, end = off + fan_in * fan_out, off + fan_in * fan_out + fan_out
        weights.append((params[off:mid].reshape(fan_in, fan_out), params[mid:end]))
        grad_views.append((grads[off:mid].reshape(fan_in, fan_out), grads[mid:end]))
        off = end
    rows = cfg.batch_size // cfg.micro_batches
    stage = Stage(g.p2p, g.part, g.parts, weights, grad_views, relu_last=g.part < g.parts - 1,
                  micro_rows=rows, micro=cfg.micro_batches, criterion=_criterion(cfg, rows))
    return SimpleNamespace(params=params, grads=grads, stage=stage)


def _criterion(cfg: TrainConfig, rows: int) -> SoftmaxCrossEntropy:
    """The loop's loss (``train.model``) at ``rows`` rows: the unsplit model's very rule."""
    return SoftmaxCrossEntropy(np, rows, cfg.layers[-1], np.dtype(cfg.dtype))


def _steps(cfg: TrainConfig, g: ParallelGroup, job: SimpleNamespace, verbose: bool) -> dict:
    """Run the steps; per step: (step, waiting for the other parts, replicas' all-reduce,
    optimizer, the part's span: a pipeline stage's forward/backward schedule) seconds.
    Every ``--log-every`` steps replica 0's last part (it has the loss) prints a progress
    line, as the loop's worker 0 does; no message is sent for it."""
    n = cfg.steps
    say = verbose and cfg.log_every and g.replica == 0 and g.part == g.parts - 1
    times, losses = np.zeros((n, 5)), np.zeros(n)
    base_lr = cfg.lr * (g.replicas if cfg.scale_lr else 1)
    perf = clock.now
    metrics.barrier(g.comm)
    for i in range(n):
        lr = base_lr * min(1.0, (i + 1) / cfg.warmup_steps) if cfg.warmup_steps else base_lr
        xb, yb = job.shard.next()
        t0 = perf()
        losses[i] = job.run(xb, yb)
        t1 = perf()
        if g.replicas > 1:
            g.reducer.allreduce(job.part.grads, op="mean")
        t2 = perf()
        job.sgd.update(0, lr)
        t3 = perf()
        span = job.spanned() if job.spanned else t1 - t0
        times[i] = (t3 - t0, job.waited(), t2 - t1, t3 - t2, span)
        if say and (i + 1) % cfg.log_every == 0:
            _log(cfg, g, i, lr, losses, times)
    return {"times": times, "losses": losses}


def _label(cfg: TrainConfig, g: ParallelGroup) -> str:
    """The run's name: ``ppP:SCHEDULE`` or ``tpT``, ``dpR x`` it with R > 1 replicas."""
    name = f"pp{g.parts}:{cfg.schedule}" if cfg.pipeline_stages > 1 else f"tp{g.parts}"
    return name if g.replicas == 1 else f"dp{g.replicas}x{name}"


def _log(cfg: TrainConfig, g: ParallelGroup, i: int, lr: float, losses: np.ndarray,
         times: np.ndarray) -> None:
    """One progress line: replica 0's mean loss and this rank's samples/s over the window."""
    k = min(cfg.log_every, i + 1)
    window = slice(i - k + 1, i + 1)
    print(f"{_label(cfg, g)} step {i + 1:5d}/{cfg.steps}  loss {losses[window].mean():.4f}  "
          f"lr {lr:.4g}  {cfg.batch_size * g.replicas * k / times[window, 0].sum():,.0f} "
          "samples/s", flush=True)


def _record(cfg: TrainConfig, comm: Any, g: ParallelGroup, job: SimpleNamespace,
            out: dict) -> dict[str, Any]:
    """The run's record, the same on every rank (collective over ``comm``)."""
    n, R = cfg.steps, g.replicas
    times = out["times"]
    timed = times[warm_steps(n):]
    params = job.part.params
    row = np.array([g.part, g.replica, *timed[:, :4].sum(axis=0),
                    g.counts.bytes_sent + g.reducer.stats.bytes_sent, g.counts.bytes_sent,
                    params.nbytes, job.velocity.nbytes, float(zlib.crc32(memoryview(params))),
                    timed[:, 4].sum()])
    rows = metrics.gather_rows(comm, row)
    step_by_rank = metrics.gather_rows(comm, times[:, 0])
    losses = metrics.sum_over_ranks(comm, out["losses"] if job.last else np.zeros(n))
    losses /= R * (g.parts if cfg.tensor_parallel > 1 else 1)  # every tensor shard has it
    series = step_by_rank[:, warm_steps(n):].max(axis=0)
    n_timed, wall = len(series), rows[:, 2].max()  # the slowest rank's timed steps
    step, wait, dp, opt = rows[:, 2:6].sum(axis=0) / (len(rows) * max(n_timed, 1))
    last = min(n, cfg.log_every or 10)  # as the loop's record (train.summary.scores)
    rec = {
        "ranks": comm.Get_size(), "workers": R, "global_batch": cfg.batch_size * R,
        "steps": n, "steps_timed": n_timed,
        "samples_per_sec": cfg.batch_size * R * n_timed / wall if wall > 0 else NAN,
        "step_time_median_s": float(np.median(series)) if n_timed else NAN,
        "step_time_p90_s": float(np.percentile(series, 90)) if n_timed else NAN,
        "step_time_mean_s": step, "dp_allreduce_s": dp, "optimizer_s": opt,
        "model_parallel_comm_s": wait, "comm_s": wait + dp, "comm_exposed_s": wait + dp,
        "compute_s": step - wait - dp - opt, "compute_share": (step - wait - dp - opt) / step,
        "comm_share": (wait + dp) / step, "optimizer_share": opt / step, "other_share": 0.0,
        "bytes_per_step": float(rows[:, 6].max() / n),
        "bytes_per_step_by_rank": [float(x) / n for x in rows[:, 6]],
        "model_parallel_bytes_per_step": float(rows[:, 7].max() / n),
        "param_bytes": int(rows[:, 8].max()), "optimizer_state_bytes": int(rows[:, 9].max()),
        "params_in_sync": all(len(set(rows[rows[:, 0] == k][:, 10])) == 1
                              for k in range(g.parts)),  # each part equal across replicas
        "loss_history": losses.tolist(), "loss_history_step": list(range(1, n + 1)),
        "train_loss_first": float(losses[: min(n, 10)].mean()),
        "train_loss_last": float(losses[-last:].mean()),
        "final_loss": float(losses[-last:].mean()), "clock": clock.name(),
        "resumed_from_step": None,
    }
    if cfg.pipeline_stages > 1:
        rec.update(_pipeline_fields(cfg, comm, g, job, rows, n))
    else:
        rec["strategy"] = _label(cfg, g)
        rec["tensor_parallel"] = g.parts
        held = job.part.activation_bytes(cfg.batch_size)
        rec["activation_bytes"] = int(metrics.max_over_ranks(comm, np.array([held]))[0])
        rec["tp_bytes_formula_per_step"] = tp_bytes_formula(cfg.layers, g.parts, cfg.batch_size,
                                                            np.dtype(cfg.dtype).itemsize)
    return rec


def _pipeline_fields(cfg: TrainConfig, comm: Any, g: ParallelGroup, job: SimpleNamespace,
                     rows: np.ndarray, n: int) -> dict:
    """Bubble (slots and clock), bytes per boundary, micro-batches and bytes held per stage."""
    idle = _idle_shares(rows, g.parts)
    P, M, st = g.parts, cfg.micro_batches, job.part.stage
    extra = metrics.gather_rows(comm, np.array([st.sent_fwd, st.sent_bwd, st.slots_made,
                                                st.slots_made * st.slot_bytes]))
    r0 = rows[:, 1] == 0
    order = np.argsort(rows[r0, 0])
    e0 = extra[r0][order]  # replica 0's stages, in stage order
    sim = simulate(schedule(cfg.schedule, P, M))
    return {
        "strategy": _label(cfg, g), "pipeline_stages": P, "micro_batches": M,
        "schedule": cfg.schedule,
        "bubble_slots": sim.bubble, "bubble_formula": bubble_formula(P, M),
        "bubble_measured": float(idle.min(axis=0).mean()) if idle.size else NAN,
        "idle_share_by_stage": [float(x) for x in idle.mean(axis=1)],
        "boundary_bytes_per_step": [float(e0[s, 0] + e0[s + 1, 1]) / n for s in range(P - 1)],
        "peak_microbatches_by_stage": [int(x) for x in e0[:, 2]],
        "peak_microbatches_slots": sim.peak_held,
        "activation_bytes_peak_by_stage": [int(x) for x in e0[:, 3]],
        "activation_bytes": int(extra[:, 3].max()),
        "layers_by_stage": [list(ab) for ab in split_layers(len(cfg.layers) - 1, P)],
    }


def _idle_shares(rows: np.ndarray, P: int) -> np.ndarray:
    """Each stage's idle share of its replica's pipeline span: ``[stage, replica]``.

    The span of a step is stage 0's (its first F to its last B: it contains every
    stage's actions); stage s works ``span_s − idle_s`` of it (its F and B, waits
    for messages left out) and idles the rest. Returns 1 − busy/span; the pipeline's
    bubble is the busiest stage's share (its fill and drain), the other stages idle
    more by their lighter load (stage 0 computes no input gradient). Only durations
    of one rank's clock are compared, so any clock serves.
    """
    R = int(rows[:, 1].max()) + 1
    busy, span = np.zeros((P, R)), np.zeros((P, R))
    for part, replica, wait, total in rows[:, [0, 1, 3, 11]]:
        busy[int(part), int(replica)] = total - wait
        span[int(part), int(replica)] = total
    ref = span[0]  # stage 0's span, per replica
    if not np.all(ref > 0):
        return np.zeros((P, 0))
    return 1.0 - busy / ref
