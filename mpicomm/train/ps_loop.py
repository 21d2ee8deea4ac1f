"""``train --strategy ps --ps-mode sync|async|ssp``: training with a real parameter server.

The last ``--servers`` ranks are servers (``mpicomm.ps``): each owns a key range
of the parameters and its momentum, and applies the training loop's own SGD
rule (``loop.SGD``) to it; the other ranks are workers. Steps:

1. roles and key ranges (``ps.layout``); a private communicator, a transport
   (bytes counted) and a stall-inspector channel whose participants are the workers;
2. set-up as the allreduce loop (the same data shard, model and seed per worker);
   a failure on any rank stops every rank before any PS message;
3. workers: per step, forward+backward (``--straggler``/``--jitter`` sleep here),
   push the gradient and pull the parameters (``PSWorker.push_pull``); sync runs
   ``--steps`` steps, async/ssp run until server 0 has applied steps × W pushes;
   servers: ``PSServer.serve`` until every worker is done, then send everyone the
   final parameters (so accuracy is the servers' model);
4. the record: the allreduce loop's columns plus ``staleness_max``/``_mean``,
   ``steps_by_worker``, ``pushes_by_server`` and the slow-rank report.

``--ps-mode ssp --staleness 0`` runs the sync algorithm (S = 0 is sync).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, stall, virtual
from mpicomm.ps import PSServer, PSWorker, layout
from mpicomm.ps.lookahead import LookAheadMomentum
from mpicomm.reducers.stats import ReduceStats
from mpicomm.train import loop as L
from mpicomm.train import metrics, ps_timeline, slow_rank
from mpicomm.train.model import MLP, num_params
from mpicomm.train.straggle import Delays
from mpicomm.train.summary import _scores, _traffic, history, warm_steps

__all__ = ["run_ps_training"]


class _Role:
    """What the record needs of a 'reducer' in a PS run: stats, description, close."""

    def __init__(self, comm: Any, stats: ReduceStats, lay: Any, label: str, W: int,
                 w: int | None, channel: Any) -> None:
        self.comm, self.stats, self.layout, self.label = comm, stats, lay, label
        self.is_worker, self.num_workers, self.worker_rank = w is not None, W, w
        self.stall_channel = channel

    def describe(self) -> dict:
        return {"strategy": self.label, "servers": self.layout.servers, "dedicated": True,
                "num_workers": self.num_workers}

    def close(self) -> None:
        self.stall_channel.close()
        self.comm.Free()


def run_ps_training(cfg: Any, comm: Any, *, verbose: bool = True,
                    keep: dict | None = None) -> dict[str, Any]:
    """Train with a parameter server in ``cfg.ps_mode``; return the run's record (all ranks).

    ``keep``: when given, a worker stores its final parameters under "params".
    """
    label, mode = f"ps:{cfg.ps_mode}", cfg.ps_algorithm
    try:
        lay = layout(comm.Get_size(), cfg.servers, num_params(cfg.layers))   # 1.
    except L.ConfigError as exc:  # the same on every rank, before any message
        if comm.Get_rank() == 0:
            print(f"mpicomm train: error: {exc}", flush=True)
        raise L.SetupError(str(exc)) from None
    pcomm, rank = comm.Dup(), comm.Get_rank()
    stats = ReduceStats()
    transport = make_transport(pcomm, node_map(pcomm, cfg.ranks_per_node), stats)
    W = len(lay.workers)
    w = lay.workers.index(rank) if rank in lay.workers else None
    role = _Role(pcomm, stats, lay, label, W, w, stall.attach(pcomm, lay.workers))
    say = print if (verbose and w == 0) else (lambda *a, **k: None)
    world = L.World(comm, role, w is not None, W, w, cfg.batch_size * W, np, say)
    job = _set_up(cfg, world, role)                                           # 2.
    say(f"{label}: {W} workers, {len(lay.servers)} server(s) | model "
        f"{job.model.num_params:,} params | batch {cfg.batch_size}/worker"
        + (f" | staleness bound {cfg.staleness}" if cfg.ps_mode == "ssp" else "")
        + (f" | resumed at step {job.start_step}" if cfg.resume else ""))
    budget = None if mode == "sync" else cfg.steps * W
    virtual.barrier(comm)  # one start (virtual clock: the latest): step ends share an origin
    if world.is_worker:                                                      # 3.
        out, counts = _work(cfg, world, job, role, transport, mode), None
    else:
        out, counts = None, _serve(cfg, lay, transport, mode, budget)
    record = _record(cfg, world, job, role, out, counts, label)              # 4.
    if keep is not None and world.is_worker:
        keep["params"] = job.model.params.copy()
    role.close()
    return record


def _set_up(cfg: Any, world: Any, role: _Role) -> Any:
    job, failure = L.Job(), None
    if world.is_worker:
        try:
            job = L._worker_state(cfg, world)
        except (L.DataError, L.CheckpointError, ValueError) as exc:
            failure = exc
    bad = metrics.first_failure(world.comm, failure is not None)
    if bad >= 0:
        if failure is not None and world.comm.Get_rank() == bad:
            print(f"mpicomm train: error: {failure}", flush=True)
        role.close()
        raise L.SetupError(f"set-up failed on rank {bad}")
    if not world.is_worker:
        job.model = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype, xp=np)
    return job


def _serve(cfg: Any, lay: Any, transport: Any, mode: str, budget: int | None) -> dict:
    s = lay.shard_of(transport.rank)
    lo, hi = lay.bounds[s], lay.bounds[s + 1]
    velocity = None
    if cfg.resume:  # the workers checked the file in set-up; a sync run only
        with np.load(cfg.checkpoint, allow_pickle=False) as ck:
            shard = ck["params"][lo:hi].astype(cfg.dtype)
            velocity = ck["momentum"][lo:hi].astype(cfg.dtype)
    else:
        shard = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype, xp=np).params[lo:hi].copy()

    def make_optimizer(p: np.ndarray, g: np.ndarray, v: np.ndarray) -> Any:
        sgd = L.SGD(np, p, g, v, [SimpleNamespace(lo=0, hi=p.size)], cfg.momentum,
                    cfg.weight_decay)  # the allreduce loop's update rule, on this shard
        return lambda lr: sgd.update(0, lr)

    ahead = None
    if mode != "sync" and cfg.ps_momentum == "lookahead":
        ahead = LookAheadMomentum(shard, len(lay.workers), cfg.momentum, cfg.weight_decay)
    return PSServer(transport, lay, shard, make_optimizer, mode, cfg.staleness, budget,
                    ahead, velocity).serve()


def _work(cfg: Any, world: Any, job: Any, role: _Role, transport: Any, mode: str) -> dict:
    client = PSWorker(transport, role.layout, role.stall_channel, role.label)
    delays = Delays(cfg, world.comm.Get_rank())
    model, shard, start = job.model, job.shard, job.start_step  # start > 0: a resumed sync run
    limit = cfg.steps if mode == "sync" else cfg.steps * world.workers  # async: stop from server 0
    base_lr = cfg.lr * (world.workers if cfg.scale_lr else 1)
    n_max = max(limit - start, 0)
    times, losses, ends = np.zeros((n_max, len(L.TIME_COLUMNS))), np.zeros(n_max), np.zeros(n_max)
    perf = clock.now
    origin, n, saving = perf(), 0, 0.0
    for step in range(start, limit):
        i = step - start
        t0 = perf()
        xb, yb = shard.next()
        tc = perf()
        delays.sleep()
        loss = model.loss_and_grads(xb, yb)
        t1 = perf()
        lr = base_lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else base_lr
        stop = client.push_pull(model.grads, model.params, step, lr)
        t2 = perf()
        times[i] = (t2 - t0, t1 - tc, t2 - t1, 0.0, t2 - t1)
        losses[i], ends[i] = float(loss), t2 - origin
        n = i + 1
        L._log(cfg, world, step, i, lr, losses, times, t2 - t0)
        if mode == "sync" and world.worker_rank == 0 and L._checkpoint_due(cfg, step):
            client.snapshot(job.velocity)  # the servers' momentum, between two steps
            L._save(cfg, world, job, step)
            saving += perf() - t2
        if stop:
            break
    client.finish(model.params)  # every worker ends with the servers' final parameters
    return {"times": times[:n], "losses": losses[:n], "ends": ends[:n], "n_run": n,
            "checkpoint_s": saving}


def _record(cfg: Any, world: Any, job: Any, role: _Role, out: dict | None, counts: dict | None,
            label: str) -> dict:
    comm, W, mode = world.comm, world.workers, cfg.ps_algorithm
    size = comm.Get_size()
    times = out["times"] if out else np.zeros((0, len(L.TIME_COLUMNS)))
    skip = warm_steps(len(times))
    timed = times[skip:]
    row = np.array([float(out is not None), len(times), len(timed), timed[:, 0].sum(),
                    *timed.sum(axis=0), np.median(timed[:, 0]) if len(timed) else 0.0])
    rows = metrics.gather_rows(comm, row)[np.arange(size)]
    wk = rows[rows[:, 0] > 0]
    steps_by_worker = [int(x) for x in wk[:, 1]]
    n_timed, wall = wk[:, 2].sum(), wk[:, 3].max()
    sums = wk[:, 4:9].sum(axis=0)
    nan = float("nan")  # nothing timed (a resumed run with no steps left): "-" in the table
    per = (lambda s: s / n_timed) if n_timed else (lambda s: nan)  # noqa: E731
    step, compute, exposed, _, total = sums
    share = (lambda s: s / step) if n_timed and step else (lambda s: nan)  # noqa: E731
    srv = _server_rows(comm, counts, W)
    timeline = ps_timeline.gather(comm, out, W)
    rec: dict[str, Any] = {
        "strategy": label, "ranks": size, "workers": W, "ps_mode": cfg.ps_mode,
        "staleness_bound": cfg.staleness if cfg.ps_mode == "ssp" else None,
        "ps_momentum": None if mode == "sync" else cfg.ps_momentum,
        "params": num_params(cfg.layers),
        "grad_bytes": num_params(cfg.layers) * np.dtype(cfg.dtype).itemsize,
        "global_batch": world.global_batch, "steps": int(max(steps_by_worker)),
        "steps_timed": int(n_timed // W),
        "samples_per_sec": cfg.batch_size * n_timed / wall if wall > 0 else float("nan"),
        "step_time_median_s": float(wk[:, 9].mean()) if n_timed else nan,
        "step_time_p90_s": float(wk[:, 9].max()) if n_timed else nan,
        "step_time_mean_s": per(step), "compute_s": per(compute), "comm_s": per(exposed),
        "comm_exposed_s": per(exposed), "comm_total_s": per(total), "optimizer_s": 0.0,
        "other_s": per(step - compute - exposed), "compute_share": share(compute),
        "comm_share": share(exposed), "optimizer_share": share(0.0),
        "other_share": share(step - compute - exposed),
        "step_times_s": timeline.step_series(mode),
        "steps_by_worker": steps_by_worker, **srv,
        "overlap": False, "accumulate": 1, "buckets": 1, "allreduce_calls_per_step": 1,
        "baseline_samples_per_sec": None, "scaling_efficiency": None,
        "resumed_from_step": job.start_step if cfg.resume else None,
        "checkpoint_s": out["checkpoint_s"] if out else 0.0, "reducer": role.describe(),
    }
    st = role.stats
    traffic = metrics.gather_rows(comm, np.array([st.bytes_sent, st.bytes_recv]))
    rounds = sum(steps_by_worker) // W  # a round: W pushes, one global batch
    rec.update(_traffic(traffic, rounds))
    losses = out["losses"] if out else np.zeros(0)
    rec.update(_scores(cfg, world, job, losses, len(losses)))
    step_s = out["times"][:, 0] if out else np.zeros(0)
    if mode == "sync":
        rec.update(history(comm, losses, step_s, world.is_worker))
    else:  # workers' steps are not simultaneous: windows of W pushes in time order
        rec.update(timeline.history())
    rec.update(slow_rank.report(comm, *role.stall_channel.take_log(), world.is_worker,
                                others_wait=mode != "async"))
    return rec


def _server_rows(comm: Any, counts: dict | None, W: int) -> dict:
    """Gather the servers' counts: pushes applied (total, per worker), staleness, lag."""
    c = counts or {}
    row = np.array([float(counts is not None), c.get("pushes_applied", 0),
                    c.get("staleness_max", 0), c.get("staleness_mean", 0.0) * c.get(
                        "pushes_applied", 0), c.get("lag_max", 0),
                    c.get("lag_mean", 0.0) * c.get("pushes_applied", 0),
                    *c.get("pushes_by_worker", [0] * W)])
    rows = metrics.gather_rows(comm, row)
    s = rows[rows[:, 0] > 0]
    applied = s[:, 1].sum()
    return {
        "pushes_by_server": [int(x) for x in s[:, 1]],
        "pushes_by_server_by_worker": [[int(x) for x in r[6:]] for r in s],
        "staleness_max": int(s[:, 2].max()),
        "staleness_mean": float(s[:, 3].sum() / applied) if applied else 0.0,
        "lag_max": int(s[:, 4].max()),
        "lag_mean": float(s[:, 5].sum() / applied) if applied else 0.0,
    }
