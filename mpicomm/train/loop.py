"""The one SGD loop, identical for every strategy, engine and layout (``cli/train.py`` runs it).

``run_training(cfg, comm)`` is a short list of named steps, in pipeline order:

1. config   a checked ``TrainConfig`` (``train.config``, ``train.checks.check``), given
2. world    the reducer, the parameter-server group (``--ps-mode``) or a split model's
            replicas × parts (``--pipeline-stages``, ``--tensor-parallel``: the group's
            reducer over the part's replicas) decides who trains and who only serves
3. set-up   this worker's data shard, its model (the ``nn.MLP``, a stage or shard of it:
            ``parallel.parts``, or a real model's workload, ``--model``:
            ``train.workload_setup``; flat params/grads each way), SGD momentum, resume
            from ``--checkpoint`` (the whole model's); a failure on any rank stops all
4. engine   an ``engine.Engine``: ``GradEngine`` (buckets, overlap with backward,
            accumulation, the loop's SGD), ``PSEngine`` (push, the servers' SGD, pull) or
            ``ZeroEngine``; a parameter server gets its key range and optimizer here
5. loop     per step: K micro-batches forward+backward (buckets leave as they fill)
            → each reduced bucket's SGD update → checkpoint; the same lines for every
            engine (PS and ZeRO yield no bucket: they applied the update);
            ``--overlap-forward``: the buckets the engine defers are applied by the next
            forward, each just before its first layer (``ForwardUpdates``)
6. record   times and bytes over ranks, final loss/accuracy (``train.record``), and a
            split model's columns (``train.parallel_setup``)

The loop never calls MPI: gradients meet in the reducer or the servers, through
the engine, and the few cross-rank sums of the record go through ``train.metrics``.
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpicomm.core import clock, nvtx, trace
from mpicomm.core.backend import sync_device
from mpicomm.core.gpu import use_local_device
from mpicomm.core.topology import spans_world
from mpicomm.costmodel import device
from mpicomm.engine import Engine, GradEngine, plan_buckets
from mpicomm.engine.async_reducer import require_thread_multiple
from mpicomm.nn import MLP
from mpicomm.p2p import set_fold
from mpicomm.reducers import make_reducer
from mpicomm.train import (
    metrics,
    parallel_setup,
    ps_setup,
    tensorboard,
    workload_setup,
    zero_setup,
)
from mpicomm.train.blas import limit_blas_threads
from mpicomm.train.checkpoint import (
    PS_SERVER_PARAMS,
    CheckpointError,
    codec_state_arrays,
    load_checkpoint,
    rebucket_residuals,
    require_feedback,
    restore_codec_state,
    save_checkpoint,
)
from mpicomm.train.config import ConfigError, TrainConfig, field_fingerprints
from mpicomm.train.data import DataError, Shard, load_dataset
from mpicomm.train.record import build_record
from mpicomm.train.report import document, format_table, write_json
from mpicomm.train.sgd import SGD
from mpicomm.train.straggle import Delays
from mpicomm.train.trace_writer import TraceFile

__all__ = [
    "TrainConfig", "ConfigError", "CheckpointError", "SetupError", "run_training",
    "measure_baseline", "format_table", "write_json", "document", "limit_blas_threads", "SGD",
]


class SetupError(RuntimeError):
    """Set-up failed on some rank; every rank raises it, the failing one has printed why."""


# ------------------------------------------------------------------ the run
def run_training(cfg: TrainConfig, comm: Any = None, *, verbose: bool = True,
                 baseline_sps: float | None = None, keep: dict | None = None) -> dict[str, Any]:
    """Train with ``cfg.strategy`` on every rank of ``comm``; return the run's record (all ranks).

    Collective over ``comm`` (default ``MPI.COMM_WORLD``). Raises ``ConfigError``
    on every rank, before any message, for a flag the run cannot honour, and
    ``SetupError`` on every rank when data, model or checkpoint set-up fails on
    any rank. ``keep``: a worker stores its final parameters under "params" (the whole
    model's, on the host; a split model's parts gather them: pass ``keep`` on every rank).
    """
    comm = metrics.world() if comm is None else comm
    device.install(cfg.accelerator, cfg.precision, cfg.flop_rate)  # refused on the wall clock
    set_fold(workload_setup.run_fold(cfg, metrics.world().Get_size()))  # the job's, not comm's
    check_same_flags(cfg, comm)  # an MPMD launch with other flags on some ranks: refused
    if cfg.nvtx:
        nvtx.enable()  # Nsight ranges: steps, buckets, collectives (core/nvtx.py)
    world = make_world(cfg, comm, verbose)                      # 2.
    tracer = TraceFile.open(cfg.trace, comm, label=_label(cfg)) if cfg.trace else None
    job = set_up(cfg, world, tracer)                            # 3.
    engine = make_engine(cfg, world, job)                       # 4.
    try:
        times = train_steps(cfg, world, job, engine, tracer)    # 5.
        if engine is not None:
            engine.close()  # a PS engine: done, and every worker pulls the final model
    except BaseException:
        if tracer is not None:  # the file stays valid JSON with what this rank recorded
            tracer.close()
        raise  # the command-line guard aborts the job; nothing here may wait on a peer
    if keep is not None and world.is_worker:
        keep["params"] = job.model.gather(_host(job.model.params)).copy()
    if world.group is None:
        world.close()  # workers: tell the servers we are done; everyone: free the comm
    if tracer is not None:
        tracer.close()
    record = build_record(cfg, world, job, times, baseline_sps).as_dict()   # 6.
    if world.group is not None:  # a split model: the family's columns, then free its comms
        record.update(parallel_setup.record_fields(cfg, world.comm, world.group, job.model,
                                                   times["times"], job.velocity))
        world.close()
    if cfg.tensorboard and world.reports and world.worker_rank == 0:  # it has the loss
        tensorboard.write_run(cfg.tensorboard, cfg, record, times, world.reducer.stats,
                              job.start_step)
    return record


# ---------------------------------------------------------------- 2. world
@dataclass
class World:
    """Who this rank is in the run: its reducer, role, the workers and the global batch."""

    comm: Any
    reducer: Any
    is_worker: bool
    workers: int              # P: the divisor of the mean
    worker_rank: int | None   # w
    global_batch: int         # rows per optimizer step: batch × workers × accumulate
    xp: Any                   # numpy or cupy
    say: Any                  # print on worker 0 when verbose, else nothing
    max_steps: int = 0        # steps a worker may run (async PS: until the servers say stop)
    workers_comm: Any = None  # the workers alone (--checkpoint-every: they wait for the save)
    label: str = ""           # the run's name: the strategy, ps:MODE, pp2:1f1b, dp2xtp2, ...
    group: Any = None         # a split model: the replicas × parts (parallel.groups)
    reports: bool = True      # this rank reports its replica's loss and step times
    writes: bool = False      # this rank writes the run's files (checkpoint, TensorBoard)
    agree_comm: Any = None    # the ranks whose engines agree on one plan (--overlap-forward)

    @property
    def parts(self) -> int:
        """Ranks per replica: 1, or the stages or shards of a split model."""
        return 1 if self.group is None else self.group.parts

    def bytes_moved(self) -> tuple[int, int]:
        """(sent, received) bytes of this rank: the reducer's and the parts' messages."""
        st = self.reducer.stats
        if self.group is None:
            return st.bytes_sent, st.bytes_recv
        return (st.bytes_sent + self.group.counts.bytes_sent,
                st.bytes_recv + self.group.counts.bytes_recv)

    def close(self) -> None:
        """Free the reducer (workers: tell the servers we are done), the group's comms."""
        if self.group is not None:
            self.group.close()
        else:
            self.reducer.close()
        if self.workers_comm is not None:
            metrics.free(self.workers_comm, unless=self.comm)


def make_world(cfg: TrainConfig, comm: Any, verbose: bool) -> World:
    """Create the reducer, the PS group or the split model's group (collective) and this
    rank's role.

    Raises ``ConfigError`` on every rank before any message: overlap without
    threads, a flag the parameter server cannot honour, too few ranks for it.
    """
    if cfg.device == "gpu":  # each rank of a node its own GPU, before any device memory
        use_local_device(importlib.import_module("cupy"), comm)
    group, steps = None, cfg.steps
    if cfg.ps_mode:
        reducer = ps_setup.make_ps_group(cfg, comm)
        if cfg.ps_algorithm != "sync":  # workers run until server 0 has applied steps × W
            steps *= reducer.num_workers
    else:
        _check_threads(cfg)
        zero_setup.check_zero_flags(cfg, single_run=False)  # train: checked in run()
        strategy = zero_setup.reducer_strategy(cfg)
        if parallel_setup.is_model_parallel(cfg):  # replicas × parts; reduce over replicas
            group = parallel_setup.make_group(cfg, comm, strategy)
            reducer = group.reducer
        else:
            reducer = make_reducer(strategy, comm=comm, **cfg.reducer_options())
    P, w = reducer.num_workers, reducer.worker_rank
    part, last = (0, 0) if group is None else (group.part, group.parts - 1)
    # the loss is the last stage's; a tensor shard's is every shard's (shard 0 reports it)
    reports = reducer.is_worker and part == (last if cfg.pipeline_stages > 1 else 0)
    say = print if (verbose and reports and w == 0) else (lambda *a, **k: None)
    xp = importlib.import_module("cupy") if cfg.device == "gpu" else np
    # --checkpoint-every: every worker waits for worker 0's save, which is then checkpoint time
    # on each, not the next step's (the others' first message would wait for worker 0)
    ranks = P if group is None else comm.Get_size()
    saves = metrics.workers_only(comm, reducer.is_worker, ranks) if cfg.checkpoint_every \
        else None
    name = parallel_setup.label(cfg, group) if group is not None else _label(cfg)
    agree = comm if group is None else group.replicas_comm
    return World(comm, reducer, reducer.is_worker, P, w, cfg.batch_size * P * cfg.accumulate,
                 xp, say, steps, saves, name, group, reports,
                 reducer.is_worker and w == 0 and part == 0, agree)


def _check_threads(cfg: TrainConfig) -> None:
    """--overlap with several buckets needs MPI_THREAD_MULTIPLE: the same answer on every
    rank (the whole model's plan), before any message. ZeRO sends on the training thread."""
    plan = plan_buckets(workload_setup.run_tensors(cfg), np.dtype(cfg.dtype).itemsize,
                        cfg.bucket_mb * 2**20)
    if cfg.overlap and len(plan) > 1 and cfg.strategy != zero_setup.ZERO:
        try:
            require_thread_multiple()
        except RuntimeError as exc:
            raise ConfigError(str(exc)) from None


def check_same_flags(cfg: TrainConfig, comm: Any) -> None:
    """Raise ``ConfigError`` on every rank unless every rank runs with the same flags
    (one small Allgather of a CRC per flag; ``--json`` may be rank 0's alone)."""
    names, crcs = field_fingerprints(cfg)
    rows = metrics.gather_rows(comm, crcs)
    differ = rows != rows[0]
    if differ.any():
        flags = ", ".join("--" + names[j].replace("_", "-") for j in np.flatnonzero(differ.any(0)))
        ranks = ", ".join(map(str, np.flatnonzero(differ.any(1))))
        exc = ConfigError(f"the ranks were started with different flags: {flags} differ between "
                          f"rank 0 and rank(s) {ranks}; every rank of a job runs the same command")
        exc.on_every_rank = spans_world(comm)  # every rank raises it: no MPI_Abort
        raise exc


# --------------------------------------------------------------- 3. set-up
@dataclass
class Job:
    """A worker's training state (servers: all None but ``start_step``)."""

    start_step: int = 0
    ds: Any = None
    shard: Any = None
    model: Any = None
    velocity: Any = None   # SGD momentum buffer, same layout as params
    delays: Any = None     # --straggler / --jitter sleeps (train.straggle.Delays)
    codec_state: Any = None  # codec error-feedback arrays read from the checkpoint
    data_crc: int = 0        # the data's fingerprint, saved in and checked against checkpoints


def set_up(cfg: TrainConfig, world: World, tracer: TraceFile | None) -> Job:
    """Build data, model and optimizer state, resume; collective: any failure stops all ranks."""
    job, failure = Job(), None
    if world.is_worker:
        try:
            job = _worker_state(cfg, world)
        except (DataError, CheckpointError, ValueError) as exc:
            failure = exc
    comm, reducer = world.comm, world.reducer
    bad = metrics.first_failure(comm, failure is not None)
    if bad >= 0:
        if failure is not None and comm.Get_rank() == bad:
            print(f"mpicomm train: error: {failure}", flush=True)
        if not world.is_worker:
            reducer.serve()  # a dedicated server takes every worker's close, as after a run
        world.close()  # free the reducer's communicators on the way out
        if tracer is not None:
            tracer.close()
        raise SetupError(f"set-up failed on rank {bad}")
    # every rank continues from the same step (dedicated servers read no checkpoint)
    job.start_step = int(metrics.max_over_ranks(comm, np.array([job.start_step]))[0])
    if world.is_worker:
        world.say(
            f"{world.label}: {comm.Get_size()} ranks, {world.workers} workers"
            + (f" x {world.parts} parts" if world.group is not None else "") + " | model "
            f"{cfg.model or _layers_text(cfg.layers)} ({_size_text(cfg, job.model)})"
            f" | batch {cfg.batch_size}/worker"
            + (f" × {cfg.accumulate} micro-batches" if cfg.accumulate > 1 else "")
            + f", {world.global_batch} global | {job.ds.source}"
            + (f" | resumed at step {job.start_step}" if cfg.resume else ""))
    return job


def _worker_state(cfg: TrainConfig, world: World) -> Job:
    xp = world.xp
    ds = workload_setup.no_data(cfg, world.workers) if cfg.model else load_dataset(cfg)
    shard = Shard(ds.x_train, ds.y_train, batch=cfg.batch_size, worker_rank=world.worker_rank,
                  num_workers=world.workers, seed=cfg.seed, xp=xp, accumulate=cfg.accumulate)
    if world.group is not None:  # a stage or a shard: the loop's model all the same
        model = parallel_setup.make_part(cfg, world.group)
    elif cfg.model:  # a real model's tensors, its compute charged by the device model
        model = workload_setup.make_model(cfg, world.worker_rank, xp, clock.fold())
    else:
        model = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype, xp=xp)
    job = Job(0, ds, shard, model, xp.zeros_like(model.params),
              Delays(cfg, world.comm.Get_rank()))
    if cfg.checkpoint:
        job.data_crc = ds.fingerprint()
    if cfg.resume:
        ck = load_checkpoint(cfg.checkpoint, cfg, world.global_batch, ds.source, job.data_crc,
                             shard.steps_per_epoch)
        model.scatter(ck["params"], model.params)  # the whole model's: this part's share
        model.scatter(ck["momentum"], job.velocity)
        job.start_step = int(ck["step"])
        _check_trace_window_after(cfg, job.start_step)
        shard.load_state(int(ck["epoch"]), int(ck["cursor"]))
        job.codec_state = _residuals(cfg, world, ck, model)
    return job


def _check_trace_window_after(cfg: TrainConfig, start: int) -> None:
    """--trace-steps A:B must end after the step a resumed run starts at (else nothing is
    traced); ``ValueError`` is a set-up failure: one line, exit 2 on every rank."""
    end = cfg.trace_window()[1]
    if cfg.trace_steps and end <= start:
        raise ValueError(f"--trace-steps {cfg.trace_steps}: the run resumes at step {start}, "
                         f"so nothing would be traced; use B > {start}")


def _residuals(cfg: TrainConfig, world: World, ck: dict, model: Any) -> dict | None:
    """This rank's top-k residuals from checkpoint ``ck``, laid out for this run's buckets."""
    comm = world.comm
    state = restore_codec_state(ck, comm.Get_rank(), comm.Get_size())
    if state is None:
        return None
    require_feedback(cfg.compress, cfg.checkpoint)  # not int8, not topk:RATIO:noef
    buckets = plan_buckets(model.tensors, model.grads.itemsize, cfg.bucket_mb * 2**20)
    return rebucket_residuals(state, buckets, model.num_params)  # --bucket-mb may differ


def _size_text(cfg: TrainConfig, model: Any) -> str:
    """The model's parameters and gradient bytes; folded (``--fold F``): the full ones, and
    what a rank holds."""
    f = clock.fold()
    if f == 1:
        return f"{model.num_params:,} params, {model.grads.nbytes / 2**10:,.0f} KiB of grads"
    n = workload_setup.run_num_params(cfg)
    return (f"{n:,} params, {n * model.grads.itemsize / 2**10:,.0f} KiB of grads; folded {f}: "
            f"{model.grads.nbytes / 2**10:,.0f} KiB held a rank, charged in full")


def _label(cfg: TrainConfig) -> str:
    """The run's name in progress lines: the strategy, ``ps:MODE`` for a parameter server."""
    return f"ps:{cfg.ps_mode}" if cfg.ps_mode else cfg.strategy


def _layers_text(layers: tuple[int, ...]) -> str:
    text = "-".join(map(str, layers))
    return text if len(text) <= 40 else f"{layers[0]}-...({len(layers) - 2} hidden)...-{layers[-1]}"


# --------------------------------------------------------------- 4. engine
def make_engine(cfg: TrainConfig, world: World, job: Job) -> Engine | None:
    """Return the worker's sync engine (None on a server, which gets its shard here)."""
    if cfg.ps_mode:  # a worker's PSEngine; a server gets its shard and optimizer
        return ps_setup.make_ps_engine(cfg, world.reducer, job.model)
    if cfg.strategy == zero_setup.ZERO:  # shards: reduce-scatter, own update, all-gather
        return zero_setup.make_zero_engine(cfg, world, job)
    if not world.is_worker:
        return None
    m = job.model
    engine = GradEngine(world.reducer, m.grads, m.tensors, m.spans,
                        bucket_bytes=cfg.bucket_mb * 2**20, overlap=cfg.overlap,
                        accumulate=cfg.accumulate, overlap_forward=cfg.overlap_forward,
                        agree_comm=world.agree_comm,  # every rank a worker (no --dedicated)
                        full_tensors=workload_setup.full_tensors(cfg, clock.fold()))
    if job.codec_state is not None and hasattr(world.reducer, "load_codec_state"):
        world.reducer.load_codec_state(job.codec_state)  # error feedback, as saved
    return engine


# ------------------------------------------------------------------ 5. loop
# model_comm: waits for the other parts of a split model (in comm_exposed and comm_total too);
# span: a pipeline stage's schedule (the bubble's reference); both 0 for the unsplit model
TIME_COLUMNS = ("step", "compute", "comm_exposed", "optimizer", "comm_total", "model_comm",
                "span")


def train_steps(cfg: TrainConfig, world: World, job: Job, engine: Engine,
                tracer: TraceFile | None) -> dict[str, Any]:
    """Run the steps; return per-step seconds (``TIME_COLUMNS``), step ends, losses, saving time."""
    n_max = max(world.max_steps - job.start_step, 0)
    out = {"times": np.zeros((n_max, len(TIME_COLUMNS))), "losses": np.zeros(n_max),
           "ends": np.zeros(n_max), "checkpoint_s": 0.0, "n_run": 0}
    metrics.barrier(world.comm)  # one start: the workers' step ends share an origin
    if not world.is_worker:
        if tracer is not None:  # a server has no steps: it records the pushes of the traced
            window = tracer.recorder.steps = cfg.trace_window()  # ones (ps.server: at_step)
            tracer.recorder.enabled = window[0] <= job.start_step < window[1]
        world.reducer.serve()  # a dedicated server sums and hands back until every worker closes
        return _ran(out, 0)
    model, times, losses = job.model, out["times"], out["losses"]
    sgd = SGD(world.xp, model.params, model.grads, job.velocity, engine.buckets, cfg.momentum,
              cfg.weight_decay, charged=cfg.single_rate is None)  # a rate holds the update
    base_lr = cfg.lr * (world.workers if cfg.scale_lr else 1)
    window = cfg.trace_window()
    ahead = ForwardUpdates(engine, sgd) if engine.overlap_forward else None
    perf = clock.now
    origin = t0 = perf()
    for i in range(n_max):
        step = job.start_step + i
        nvtx.push(f"step {step}")  # closed at the step's end (--nvtx; a no-op otherwise)
        rec = _trace_step(tracer, step, window)
        lr = base_lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else base_lr
        engine.start_step(step, lr)
        fb = _forward_backward(cfg, job, engine, rec, ahead)                    # 5a.
        loss, compute, in_backward, ahead_s, parts_s = fb
        t2 = perf()
        defer = ahead is not None and ahead.may_defer(i, n_max, _checkpoint_due(cfg, step), lr)
        for bucket in engine.reduced(defer=defer):                              # 5b.
            t = perf() if rec is not None else 0.0
            sgd.update(bucket.index, lr)
            if rec is not None:  # stamp: every bucket's SGD ends on this line
                rec.complete(f"optimizer bucket {bucket.index}", "optimizer", t,
                             clock.stamp(bucket.index), thread="training")
        if world.xp is not np:
            sync_device(model.params)
        t4 = perf()
        total, exposed = engine.take_times()
        losses[i] = float(loss)
        _log(cfg, world, step, i, lr, losses, times, t4 - t0)
        t5 = perf()
        times[i] = (t5 - t0, compute, exposed + parts_s,
                    t4 - t2 - (exposed - in_backward) + ahead_s, total + parts_s, parts_s,
                    model.take_span())
        out["ends"][i] = t5 - origin
        if rec is not None:
            rec.complete(f"step {step}", "step", t0, t5, thread="training")
        if _checkpoint_due(cfg, step):                                           # 5c.
            _checkpoint(cfg, world, job, engine, step)
            out["checkpoint_s"] += perf() - t5
            t5 = perf()
        nvtx.pop()
        t0 = t5
        if engine.stopped:  # async PS: server 0 has applied the run's pushes
            return _ran(out, i + 1)
    return _ran(out, n_max)


def _checkpoint(cfg: TrainConfig, world: World, job: Job, engine: Engine, step: int) -> None:
    """Save the run after ``step``: worker 0 writes (each part of replica 0 joins the gather
    of a split model); with --checkpoint-every every worker waits for the save."""
    codec = codec_state_arrays(world.reducer, world.comm)  # every rank's residuals
    if world.worker_rank == 0:
        engine.sync_state(job.velocity)  # a PS engine: the servers' momentum
        exact = engine.server_params  # a compressed PS: the servers' own too
        _save(cfg, world, job, step, codec if exact is None else {**codec, PS_SERVER_PARAMS: exact})
    if world.workers_comm is not None:  # the save is every worker's checkpoint time
        metrics.barrier(world.workers_comm)


def _ran(out: dict, n: int) -> dict:
    """Cut the per-step arrays of ``out`` to the ``n`` steps run."""
    for key in ("times", "losses", "ends"):
        out[key] = out[key][:n]
    out["n_run"] = n
    return out


class ForwardUpdates:
    """``--overlap-forward``: the SGD of the buckets the engine deferred, run by the next
    forward just before the first layer each holds (``GradEngine.ready_for``)."""

    def __init__(self, engine: Engine, sgd: SGD) -> None:
        self.engine, self.sgd, self.lr, self.seconds = engine, sgd, 0.0, 0.0

    def may_defer(self, i: int, n: int, checkpoint: bool, lr: float) -> bool:
        """Whether step ``i`` of ``n`` may leave its tail to the next forward (not the last
        step, nor one whose parameters are saved); keep its ``lr`` for that update."""
        self.lr = lr
        return i < n - 1 and not checkpoint

    def __call__(self, layer: int) -> None:
        rec = trace.active()
        for bucket in self.engine.ready_for(layer):
            t = clock.now()
            self.sgd.update(bucket.index, self.lr)
            t1 = clock.stamp(bucket.index)  # every bucket's SGD ends on this line
            self.seconds += t1 - t
            if rec is not None:
                rec.complete(f"optimizer bucket {bucket.index}", "optimizer", t, t1,
                             thread="training")


def _forward_backward(cfg: TrainConfig, job: Job, engine: Engine, rec: Any,
                      ahead: ForwardUpdates | None) -> tuple[float, float, float, float, float]:
    """Run the step's micro-batches; return (summed mean loss / K, compute seconds, seconds of
    communication the engine spent inside forward and backward, which are not compute,
    seconds of the previous step's SGD run inside the first forward, ``--overlap-forward``,
    and seconds a split model's part waited for the other parts, not compute either)."""
    perf = clock.now
    loss, compute, in_backward, parts, K = 0.0, 0.0, 0.0, 0.0, cfg.accumulate
    updated = ahead.seconds if ahead is not None else 0.0
    for k in range(K):
        xb, yb = job.shard.next()
        t = perf()
        if k == 0 and job.delays is not None:
            job.delays.sleep()  # --straggler / --jitter: counted as compute
        sent = engine.comm_exposed_s  # waits in forward (deferred buckets) and in backward
        loss += float(job.model.forward(xb, yb, ahead if k == 0 else None))  # (ZeRO-2): comm
        if rec is not None:
            rec.complete("forward", "forward", t, perf(), thread="training")
        engine.backward(job.model.backward(), last=k == K - 1)
        if engine.on_gpu:
            sync_device(job.model.grads)
        waited = engine.comm_exposed_s - sent
        in_backward += waited
        part_s = job.model.take_comm()  # a stage's or a shard's waits for the other parts
        parts += part_s
        compute += perf() - t - waited - part_s
    ahead_s = ahead.seconds - updated if ahead is not None else 0.0
    return loss / K, compute - ahead_s, in_backward, ahead_s, parts


def _trace_step(tracer: TraceFile | None, step: int, window: tuple[int, int]) -> Any:
    """Switch recording on inside ``--trace-steps``; return the recorder, or None."""
    if tracer is None:
        return None
    inside = window[0] <= step < window[1]
    if tracer.recorder.enabled and not inside:
        tracer.flush()  # the window just ended: write it out now
    tracer.recorder.enabled = inside
    return tracer.recorder if inside else None


def _log(cfg: TrainConfig, world: World, step: int, i: int, lr: float, losses: np.ndarray,
         times: np.ndarray, current: float) -> None:
    if cfg.log_every and (step + 1) % cfg.log_every == 0:
        k = min(cfg.log_every, i + 1)
        window = times[i - k + 1 : i, 0].sum() + current
        if world.max_steps == cfg.steps:  # the workers step together: the global batch
            where = f"step {step + 1:5d}/{cfg.steps}"
            rate = f"{world.global_batch * k / window:,.0f}"
        else:  # async / ssp: worker 0's own pushes and rate (the others run at theirs)
            where = f"worker 0 push {step + 1:5d} ({world.max_steps} by all workers in the run)"
            rate = f"worker 0: {world.global_batch // world.workers * k / window:,.0f}"
        world.say(f"{world.label} {where}  loss {losses[i - k + 1 : i + 1].mean():.4f}  "
                  f"lr {lr:.4g}  {rate} samples/s", flush=True)


def _checkpoint_due(cfg: TrainConfig, step: int) -> bool:
    every = cfg.checkpoint_every
    due = step + 1 == cfg.steps or bool(every and (step + 1) % every == 0)
    return bool(cfg.checkpoint) and due


def _save(cfg: TrainConfig, world: World, job: Job, step: int,
          codec: dict[str, np.ndarray]) -> None:
    """Save the whole model (a split one's parts gathered: collective over them) on the
    writing rank; any layout resumes it."""
    model = job.model
    params, momentum = model.gather(_host(model.params)), model.gather(_host(job.velocity))
    if not world.writes:
        return
    save_checkpoint(
        cfg.checkpoint, params=params, momentum=momentum,
        step=step + 1, **job.shard.state(), layers=np.array(cfg.layers), dtype=cfg.dtype,
        seed=cfg.seed, global_batch=world.global_batch, data_source=job.ds.source,
        data_crc32=np.int64(job.data_crc), strategy=cfg.strategy, **codec,
    )


def _host(a: Any) -> np.ndarray:
    """Return a NumPy array for ``a`` (a copy from the GPU; ``a`` itself on the host)."""
    return a if isinstance(a, np.ndarray) else a.get()


# ------------------------------------------------------------- baseline
def measure_baseline(cfg: TrainConfig, comm: Any = None) -> float:
    """Time the same run on 1 worker (rank 0 alone, same per-worker batch); return its samples/s.

    The other ranks sleep in a quiet barrier meanwhile, so rank 0 has a core to itself.
    Collective over ``comm``: if the baseline's set-up fails on rank 0 (which prints
    why), every rank raises ``SetupError``.
    """
    comm = metrics.world() if comm is None else comm
    sps, failed = 0.0, False
    if comm.Get_rank() == 0:
        solo = dataclasses.replace(cfg, strategy="native", baseline=False, checkpoint=None,
                                   pipeline_stages=1, tensor_parallel=1, micro_batches=1,
                                   schedule="1f1b",  # the whole model on one rank
                                   checkpoint_every=0, resume=False, json=None, dedicated=False,
                                   trace=None, trace_steps=None, ps_mode=None, staleness=0,
                                   tensorboard=None, zero_stage=1,  # native, not zero
                                   compress="none")  # one rank: nothing on the wire
        try:
            sps = run_training(solo, metrics.solo_comm(), verbose=False)["samples_per_sec"]
        except SetupError:  # rank 0 has printed why; the others must hear of it, not wait
            failed = True
    metrics.quiet_barrier(comm)
    if metrics.first_failure(comm, failed) >= 0:
        raise SetupError("set-up of the 1-worker baseline failed on rank 0")
    return float(metrics.max_over_ranks(comm, np.array([sps]))[0])
