"""The run record: one typed dataclass, built in one place for every strategy and PS mode.

``build_record`` is collective over the run's communicator (servers contribute
zeros) and returns the same ``RunRecord`` on every rank. Steps:

1. every rank's step times are gathered once (``ps_timeline``): per worker its
   step seconds, step ends (since the run's common start) and losses;
2. the sample of the verdicts, ``step_times_s``: workers in lock-step (an
   allreduce or a sync PS) give each step's mean over workers; async/ssp
   workers give the length of each window of W pushes in time order (one
   global batch, whoever pushed it). The median and p90 are of this series;
3. means per step of compute / exposed comm / optimizer / other, over every
   timed worker-step (the first ``warm_steps(n)`` of each worker left out);
4. bytes per round (a round: one global batch), scores, loss history, the
   parameter servers' counts, the slow-rank report, the clock's name.

``RunRecord.as_dict()`` is the JSON form (compare, plot and experiments read
its keys); the PS fields are left out of runs without ``--ps-mode``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpicomm.core import clock, flops
from mpicomm.engine import plan_buckets
from mpicomm.train import metrics, ps_timeline, slow_rank
from mpicomm.train.summary import history, scores, traffic, warm_steps
from mpicomm.train.workload_setup import run_num_params, run_tensors

__all__ = ["RunRecord", "build_record", "PS_FIELDS"]

NAN = float("nan")

PS_FIELDS = ("ps_mode", "staleness_bound", "ps_momentum", "steps_by_worker", "pushes_by_server",
             "pushes_by_server_by_worker", "staleness_max", "staleness_mean", "lag_max",
             "lag_mean")


@dataclass
class RunRecord:
    """Everything one training run reports (times per step are seconds, means over workers)."""

    strategy: str
    ranks: int
    workers: int
    params: int
    grad_bytes: int
    global_batch: int
    steps: int                       # steps run (the most any worker ran)
    steps_timed: int                 # global batches timed
    samples_per_sec: float
    step_time_median_s: float
    step_time_p90_s: float
    step_times_s: list[float]        # per timed global batch: the verdicts' sample
    step_time_mean_s: float
    compute_s: float
    comm_s: float
    comm_exposed_s: float
    comm_total_s: float
    overlap_fraction: float
    optimizer_s: float
    other_s: float
    compute_share: float
    comm_share: float
    optimizer_share: float
    other_share: float
    bytes_per_step: float
    bytes_per_step_mean: float
    bytes_recv_per_step: float
    bytes_per_step_by_rank: list[float]
    final_loss: float
    final_accuracy: float
    test_accuracy: float
    train_loss_first: float
    train_loss_last: float
    params_in_sync: bool
    param_crc32: int | None
    loss_history_step: list[int]
    loss_history: list[float]
    wall_s_history: list[float]
    buckets: int
    allreduce_calls_per_step: int
    bucket_mb: float
    overlap: bool
    overlap_forward: bool
    accumulate: int
    baseline_samples_per_sec: float | None
    scaling_efficiency: float | None
    resumed_from_step: int | None
    checkpoint_s: float
    reducer: dict
    clock: str                       # mpicomm.core.clock.name(): "wall" or "virtual"
    model: str | None = None         # --model: the workload trained (None: the MLP of --layers)
    device: dict | None = None       # the modelled device charging compute (core.flops.describe);
                                     # None: this host's time (wall, or --accelerator host)
    fold: int = 1                    # --fold: buffers held 1/F of each tensor, charged in full
    optimizer_state_bytes: int = 0   # momentum bytes held, the most any rank holds (ZeRO: a shard)
    wait_mean_s_by_rank: list = field(default_factory=list)
    last_to_arrive_by_rank: list = field(default_factory=list)
    slow_rank: int | None = None
    slow_rank_note: str | None = None
    # --ps-mode only
    ps_mode: str | None = None
    staleness_bound: int | None = None
    ps_momentum: str | None = None
    steps_by_worker: list[int] | None = None
    pushes_by_server: list[int] | None = None
    pushes_by_server_by_worker: list[list[int]] | None = None
    staleness_max: int | None = None
    staleness_mean: float | None = None
    lag_max: int | None = None
    lag_mean: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form: every field, the PS ones only for a ``--ps-mode`` run."""
        out = dataclasses.asdict(self)
        if self.ps_mode is None:
            for name in PS_FIELDS:
                del out[name]
        return out


def build_record(cfg: Any, world: Any, job: Any, out: dict,
                 baseline_sps: float | None) -> RunRecord:
    """Return the run's record, the same on every rank (collective over ``world.comm``)."""
    comm, W, mode = world.comm, world.workers, cfg.ps_algorithm
    lockstep = mode in (None, "sync")
    timeline = ps_timeline.gather(comm, out if world.reports else None, W)         # 1.
    series = np.asarray(timeline.step_series("sync" if lockstep else "async"))     # 2.
    times = out["times"] if world.reports else np.zeros((0, 7))
    timed = times[warm_steps(len(times)):]                                          # 3.
    row = np.array([float(world.reports), len(times), len(timed), timed[:, 0].sum(),
                    *timed[:, :5].sum(axis=0)])
    rows = metrics.gather_rows(comm, row)
    wk = rows[rows[:, 0] > 0]
    steps_by_worker = [int(x) for x in wk[:, 1]]
    n_timed, wall = wk[:, 2].sum(), wk[:, 3].max()
    rounds = sum(steps_by_worker) // W                                              # 4.
    losses = out["losses"] if world.reports else np.zeros(0)
    if lockstep:
        hist = history(comm, losses, times[:, 0], world.reports)
    else:  # workers' steps are not simultaneous: windows of W pushes in time order
        hist = timeline.history()
    # --fold F: a message held 1/F of its elements and was charged F times that (core.flops)
    moved = traffic(metrics.gather_rows(comm, np.array(world.bytes_moved())) * clock.fold(),
                    rounds)
    buckets, overlap = _plan(cfg, world, job)
    sps = cfg.batch_size * cfg.accumulate * n_timed / wall if wall > 0 else NAN
    rec = RunRecord(
        strategy=world.label,
        ranks=comm.Get_size(), workers=W, params=run_num_params(cfg),
        grad_bytes=run_num_params(cfg) * np.dtype(cfg.dtype).itemsize, model=cfg.model,
        global_batch=world.global_batch, steps=int(max(steps_by_worker, default=0)),
        steps_timed=int(n_timed // W), samples_per_sec=sps,
        step_time_median_s=float(np.median(series)) if series.size else NAN,
        step_time_p90_s=float(np.percentile(series, 90)) if series.size else NAN,
        step_times_s=series.tolist(), **_step_means(wk[:, 4:9].sum(axis=0), n_timed), **moved,
        **scores(cfg, world, job, losses, len(losses)), **hist,
        buckets=buckets, allreduce_calls_per_step=buckets, bucket_mb=cfg.bucket_mb,
        overlap=overlap, overlap_forward=bool(overlap and cfg.overlap_forward),
        accumulate=cfg.accumulate, baseline_samples_per_sec=baseline_sps,
        scaling_efficiency=sps / (W * world.parts * baseline_sps) if baseline_sps else None,
        resumed_from_step=job.start_step if cfg.resume else None,
        checkpoint_s=float(out["checkpoint_s"]), reducer=world.reducer.describe(),
        clock=clock.name(), device=flops.describe(), fold=clock.fold(),
    )
    held = job.velocity.nbytes if world.is_worker and job.velocity is not None else 0
    rec.optimizer_state_bytes = int(metrics.max_over_ranks(comm, np.array([held]))[0])
    if cfg.ps_mode:
        _ps_fields(rec, cfg, comm, getattr(world.reducer, "counts", None), W, steps_by_worker)
    for key, value in slow_rank.report(comm, *world.reducer.stall_channel.take_log(),
                                       world.is_worker, others_wait=mode != "async").items():
        setattr(rec, key, value)
    if not rec.params_in_sync:
        world.say(f"WARNING: {rec.strategy}: workers ended with different parameters")
    if rec.steps and not math.isfinite(rec.final_loss):  # the table can only show "-"
        world.say(f"WARNING: {rec.strategy}: the run diverged: the final loss is "
                  f"{rec.final_loss} (NaN or inf parameters or inputs; try a smaller --lr)")
    return rec


def _plan(cfg: Any, world: Any, job: Any) -> tuple[int, bool]:
    """The buckets of a step and whether they overlap backward (collective for a split
    model: each part has its own plan; the most any part has)."""
    if cfg.ps_mode:
        return 1, False  # one push per server per step
    tensors = run_tensors(cfg) if world.group is None else job.model.tensors
    buckets = len(plan_buckets(tensors, np.dtype(cfg.dtype).itemsize, cfg.bucket_mb * 2**20))
    if world.group is not None:
        buckets = int(metrics.max_over_ranks(world.comm, np.array([buckets]))[0])
    # one bucket: nothing to overlap; ZeRO sends on the training thread
    return buckets, bool(cfg.overlap and buckets > 1 and cfg.strategy != "zero")


def _step_means(sums: np.ndarray, n_timed: float) -> dict[str, float]:
    """Means per timed step and shares of the step, from the workers' summed columns
    (step, compute, exposed comm, optimizer, total comm); the rest of the step is other."""
    step, compute, exposed, opt, total = sums
    per = (lambda s: s / n_timed) if n_timed else (lambda s: NAN)  # noqa: E731
    share = (lambda s: s / step) if n_timed and step > 0 else (lambda s: NAN)  # noqa: E731
    other = step - compute - exposed - opt
    return dict(
        step_time_mean_s=per(step), compute_s=per(compute), comm_s=per(exposed),
        comm_exposed_s=per(exposed), comm_total_s=per(total),
        # exposed also holds the hand-off from the comm thread, so it can exceed total: clamp
        overlap_fraction=max(0.0, 1 - exposed / total) if total > 0 else NAN,
        optimizer_s=per(opt), other_s=per(other), compute_share=share(compute),
        comm_share=share(exposed), optimizer_share=share(opt), other_share=share(other))


def _ps_fields(rec: RunRecord, cfg: Any, comm: Any, counts: dict | None, W: int,
               steps_by_worker: list[int]) -> None:
    """Fill the PS fields: mode, the servers' counts (pushes, staleness, lag) — collective."""
    c = counts or {}
    applied_here = c.get("pushes_applied", 0)
    row = np.array([float(counts is not None), applied_here, c.get("staleness_max", 0),
                    c.get("staleness_mean", 0.0) * applied_here, c.get("lag_max", 0),
                    c.get("lag_mean", 0.0) * applied_here, *c.get("pushes_by_worker", [0] * W)])
    s = metrics.gather_rows(comm, row)
    s = s[s[:, 0] > 0]
    applied = s[:, 1].sum()
    rec.ps_mode = cfg.ps_mode
    rec.staleness_bound = cfg.staleness if cfg.ps_mode == "ssp" else None
    rec.ps_momentum = None if cfg.ps_algorithm == "sync" else cfg.ps_momentum
    rec.steps_by_worker = steps_by_worker
    rec.pushes_by_server = [int(x) for x in s[:, 1]]
    rec.pushes_by_server_by_worker = [[int(x) for x in r[6:]] for r in s]
    rec.staleness_max = int(s[:, 2].max())
    rec.staleness_mean = float(s[:, 3].sum() / applied) if applied else 0.0
    rec.lag_max = int(s[:, 4].max())
    rec.lag_mean = float(s[:, 5].sum() / applied) if applied else 0.0
