"""``python -m mpicomm train``: the one data-parallel SGD loop, identical for every strategy.

    mpiexec -n 4 python -m mpicomm train --strategy ring --steps 300 --json out.json

Top to bottom, in pipeline order (nanoGPT-style):

1. config   argparse → ``TrainConfig`` (frozen; invalid values refused on creation)
2. world    the reducer decides who trains (workers) and who only serves (PS servers)
3. data     this worker's rows of every global batch (``data.Shard``)
4. model    ``MLP``: params and grads in two flat buffers; one momentum buffer
5. resume   params, momentum, step and data position from ``--checkpoint``
6. loop     batch → forward+backward → ``reducer.allreduce(grads, "mean")`` → SGD step
7. summary  times and bytes over ranks, final loss/accuracy, table, ``--json``

The loop never calls MPI: gradients meet in the reducer, and the few
cross-rank sums of the summary go through ``mpicomm.train.metrics``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import time
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpicomm.core.backend import sync_device
from mpicomm.core.errors import ConfigError  # an invalid training configuration (re-exported)
from mpicomm.core.helptext import DefaultsFormatter
from mpicomm.core.options import HIERARCHICAL_VARIANTS
from mpicomm.core.units import jsonable  # NaN/inf -> null: strict JSON
from mpicomm.reducers import make_reducer, strategies
from mpicomm.train import metrics
from mpicomm.train.data import DataError, Shard, load_npz, synthetic
from mpicomm.train.model import MLP, num_params, parse_layers

__all__ = [
    "TrainConfig", "ConfigError", "CheckpointError", "SetupError",
    "add_arguments", "run", "run_training", "measure_baseline", "format_table", "write_json",
]

CHECKPOINT_FORMAT = "mpicomm-train-checkpoint-v1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not match this run."""


class SetupError(RuntimeError):
    """Set-up failed on some rank; every rank raises it, the failing one has printed why."""


# ------------------------------------------------------------------ 1. config
@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; validated on creation (``ConfigError``)."""

    strategy: str = "native"            # one of mpicomm.strategies()
    layers: tuple[int, ...] = (256, 512, 512, 10)  # features, hidden..., classes
    batch_size: int = 64                # rows per worker per step
    steps: int = 300                    # total optimizer steps (a resumed run continues to it)
    lr: float = 0.05                    # base learning rate
    momentum: float = 0.9               # SGD momentum (0 = plain SGD)
    weight_decay: float = 1e-4          # L2 added to every gradient (weights and biases)
    scale_lr: bool = False              # linear scaling rule: lr × workers
    warmup_steps: int = 0               # ramp lr linearly over this many steps
    seed: int = 0                       # model init, synthetic data, data order
    dtype: str = "float32"              # float32 | float64
    device: str = "cpu"                 # cpu (NumPy) | gpu (CuPy)
    data: str | None = None             # .npz with x, y; None = synthetic teacher task
    train_samples: int = 16384          # synthetic: training rows
    test_samples: int = 2048            # synthetic: held-out rows
    holdout: float = 0.1                # .npz without x_test: fraction held out
    eval_samples: int = 4096            # training rows scored for the final loss/accuracy
    log_every: int = 100                # progress line every K steps (0 = none)
    checkpoint: str | None = None       # checkpoint path (.npz)
    checkpoint_every: int = 0           # save every K steps and at the end (0 = only at the end)
    resume: bool = False                # continue from --checkpoint
    baseline: bool = False              # also time a 1-worker run for scaling efficiency
    json: str | None = None             # write results here
    ranks_per_node: int | None = None   # reducer: simulated node size (hierarchical)
    variant: str = "reduce_scatter"     # reducer: hierarchical variant
    servers: int = 1                    # reducer: parameter servers
    dedicated: bool = False             # reducer: PS servers on their own ranks
    validate: bool | None = None        # reducer: ranks' buffers checked on every call (True)
                                        # or the first (False); None: MPICOMM_VALIDATE, else True
    blas_threads: int = 1               # BLAS threads per rank (0 = leave the library default)

    def __post_init__(self) -> None:
        def bad(msg: str) -> None:
            raise ConfigError(msg)

        if self.strategy not in strategies():
            bad(f"unknown strategy {self.strategy!r}; valid strategies: {', '.join(strategies())}")
        try:
            object.__setattr__(self, "layers", parse_layers(self.layers))
        except ValueError as exc:
            bad(str(exc))
        for name in ("batch_size", "steps", "train_samples", "test_samples", "eval_samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                bad(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        for name in ("warmup_steps", "log_every", "checkpoint_every", "seed", "blas_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                bad(f"--{name.replace('_', '-')} must be an integer >= 0, got {value!r}")
        if not (self.lr > 0 and np.isfinite(self.lr)):
            bad(f"--lr must be a positive number, got {self.lr!r}")
        if not 0 <= self.momentum < 1:
            bad(f"--momentum must be in [0, 1), got {self.momentum!r}")
        if not (self.weight_decay >= 0 and np.isfinite(self.weight_decay)):
            bad(f"--weight-decay must be >= 0, got {self.weight_decay!r}")
        if self.dtype not in ("float32", "float64"):
            bad(f"--dtype must be float32 or float64, got {self.dtype!r}")
        if self.device not in ("cpu", "gpu"):
            bad(f"--device must be cpu or gpu, got {self.device!r}")
        if self.device == "gpu":  # missing CuPy: one line with the install hint, not a traceback
            from mpicomm.core.gpu import import_cupy

            import_cupy()
        if not 0 < self.holdout < 1:
            bad(f"--holdout must be in (0, 1), got {self.holdout!r}")
        if (self.resume or self.checkpoint_every) and not self.checkpoint:
            bad("--resume and --checkpoint-every need --checkpoint PATH")
        if self.variant not in HIERARCHICAL_VARIANTS:
            bad(f"--variant must be one of {HIERARCHICAL_VARIANTS}, got {self.variant!r}")
        if self.ranks_per_node is not None and self.ranks_per_node < 1:
            bad(f"--ranks-per-node must be >= 1, got {self.ranks_per_node}")
        if self.servers < 1:
            bad(f"--servers must be >= 1, got {self.servers}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainConfig:
        """Build the config from parsed flags (flag names = field names)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def reducer_options(self) -> dict[str, Any]:
        """Return the ``make_reducer`` keyword options of this run."""
        opts: dict[str, Any] = {"ranks_per_node": self.ranks_per_node, "variant": self.variant,
                                "servers": self.servers, "dedicated": self.dedicated}
        if self.validate is not None:  # None: the reducer's default (MPICOMM_VALIDATE, else on)
            opts["validate"] = self.validate
        return opts


_DefaultsFormatter = DefaultsFormatter  # every default shown once (core.helptext)


def add_arguments(p: argparse.ArgumentParser, *, single_run: bool = True) -> None:
    """Add the training flags (defaults from ``TrainConfig``) to ``p``.

    ``single_run=False`` (compare) leaves out --strategy, checkpointing and --baseline.
    """
    d = TrainConfig()
    p.formatter_class = _DefaultsFormatter
    if single_run:
        p.add_argument("--strategy", default=d.strategy,
                       help=f"gradient sync strategy: {', '.join(strategies())}")
    p.add_argument("--layers", default=",".join(map(str, d.layers)),
                   help="MLP widths: features,hidden...,classes")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="rows per worker per step")
    p.add_argument("--steps", type=int, default=d.steps, help="optimizer steps")
    p.add_argument("--lr", type=float, default=d.lr, help="learning rate")
    p.add_argument("--momentum", type=float, default=d.momentum, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="L2 weight decay")
    p.add_argument("--scale-lr", action="store_true", help="linear scaling rule: lr × workers")
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps, help="linear lr warm-up")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of init, data and data order")
    p.add_argument("--dtype", default=d.dtype, choices=["float32", "float64"])
    p.add_argument("--device", default=d.device, choices=["cpu", "gpu"],
                   help="cpu: NumPy; gpu: CuPy")
    p.add_argument("--data", default=None, metavar="NPZ",
                   help=".npz with arrays x (N, features), y (N,) [, x_test, y_test]; "
                   "default: synthetic teacher task")
    p.add_argument("--train-samples", type=int, default=d.train_samples,
                   help="synthetic training rows")
    p.add_argument("--test-samples", type=int, default=d.test_samples,
                   help="synthetic held-out rows")
    p.add_argument("--holdout", type=float, default=d.holdout,
                   help="fraction of an .npz held out when it has no x_test")
    p.add_argument("--eval-samples", type=int, default=d.eval_samples,
                   help="training rows scored for the final loss/accuracy")
    p.add_argument("--log-every", type=int, default=d.log_every, help="progress line every K steps")
    if single_run:
        p.add_argument("--checkpoint", default=None, metavar="PATH", help="checkpoint file")
        p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                       help="save every K steps (and at the end)")
        p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
        p.add_argument("--baseline", action="store_true",
                       help="also time a 1-worker run (rank 0 alone) for scaling efficiency")
    p.add_argument("--json", default=None, metavar="PATH", help="write results as JSON")
    p.add_argument("--ranks-per-node", type=int, default=None,
                   help="simulate nodes of K ranks (hierarchical; default: ask MPI)")
    p.add_argument("--variant", default=d.variant, choices=list(HIERARCHICAL_VARIANTS),
                   help="hierarchical variant")
    p.add_argument("--servers", type=int, default=d.servers, help="ps: number of servers")
    p.add_argument("--dedicated", action="store_true", help="ps: servers on their own ranks")
    p.add_argument("--validate", action=argparse.BooleanOptionalAction, default=None,
                   help="reducer checks buffer lengths/dtype/op agree on every call "
                   "(--no-validate: on its first call only; default: MPICOMM_VALIDATE, else on)")
    p.add_argument("--blas-threads", type=int, default=d.blas_threads,
                   help="BLAS threads per rank; ranks already fill the cores (0 = library default)")


def limit_blas_threads(n: int) -> bool:
    """Set the loaded OpenBLAS/MKL to ``n`` threads (best effort); return True if one was found.

    Ranks are the parallelism: with one rank per core, each BLAS spawning a
    thread per core oversubscribes the host (17x slower steps measured with 4
    ranks on 2 cores). The thread count is read from the environment only when
    the library loads, long before a command runs, so it is set through the
    library's own call, found among the loaded shared objects.
    """
    import ctypes
    import glob

    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:  # Linux: every loaded shared object
            paths = sorted({ln.split()[-1] for ln in f if "blas" in ln.lower() or "mkl" in ln})
    except OSError:
        pass
    paths += glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy*libs", "*blas*"))
    paths += glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*blas*"))
    names = [f"{pre}openblas_set_num_threads{suf}" for pre in ("", "scipy_") for suf in ("", "64_")]
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in [*names, "MKL_Set_Num_Threads"]:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return True
    return False


# ------------------------------------------------------------- checkpoints
def save_checkpoint(path: str, **arrays: Any) -> None:
    """Write ``arrays`` to ``path`` atomically: a temp file in the same folder, then os.replace."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:  # a file object, so np.savez does not append ".npz"
        np.savez(f, format=CHECKPOINT_FORMAT, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: str, cfg: TrainConfig, global_batch: int, data_source: str) -> dict:
    """Read a checkpoint and check it belongs to this run (model, dtype, seed, data, batch)."""
    if not os.path.exists(path):
        raise CheckpointError(f"--resume: checkpoint {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as f:
            ck = {k: f[k] for k in f.files}
    except Exception as exc:  # noqa: BLE001 - truncated, not a zip, pickled objects...
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not an mpicomm checkpoint "
            f"({type(exc).__name__}: {exc})"
        ) from None
    need = ("format", "layers", "dtype", "seed", "global_batch", "data_source", "step",
            "epoch", "cursor", "params", "momentum")
    missing = [k for k in need if k not in ck]
    if missing or str(ck["format"]) != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"checkpoint {path} is not an mpicomm training checkpoint "
            f"(missing {', '.join(missing) or 'nothing'}; format {ck.get('format')!s})"
        )
    layers = tuple(int(w) for w in ck["layers"])
    want = ",".join(map(str, cfg.layers))
    if layers != cfg.layers:
        raise CheckpointError(
            f"checkpoint {path} holds a model with --layers {','.join(map(str, layers))} "
            f"({num_params(layers)} params); this run has --layers {want} "
            f"({num_params(cfg.layers)} params)"
        )
    n = num_params(layers)
    if ck["params"].shape != (n,) or ck["momentum"].shape != (n,):
        raise CheckpointError(
            f"checkpoint {path} is corrupt: params {ck['params'].shape}, momentum "
            f"{ck['momentum'].shape}, expected ({n},) for --layers {want}"
        )
    for key, mine in (("dtype", cfg.dtype), ("seed", cfg.seed), ("global_batch", global_batch),
                      ("data_source", data_source)):
        theirs = ck[key].item()
        if theirs != mine:
            raise CheckpointError(
                f"checkpoint {path} was made with {key} {theirs!r}, this run has {mine!r}; "
                "resume with the same settings"
            )
    return ck


# -------------------------------------------------------------- the run
def run_training(cfg: TrainConfig, comm: Any = None, *, verbose: bool = True,
                 baseline_sps: float | None = None) -> dict[str, Any]:
    """Train with ``cfg.strategy`` on every rank of ``comm``; return the run's record (all ranks).

    Collective over ``comm`` (default ``MPI.COMM_WORLD``). Raises ``SetupError``
    on every rank when data, model or checkpoint set-up fails on any rank.
    """
    comm = metrics.world() if comm is None else comm

    # 2. world: the reducer knows who trains and who serves (a dedicated PS server).
    reducer = make_reducer(cfg.strategy, comm=comm, **cfg.reducer_options())
    P, w = reducer.num_workers, reducer.worker_rank
    is_worker = reducer.is_worker
    say = print if (verbose and is_worker and w == 0) else (lambda *a, **k: None)
    xp = importlib.import_module("cupy") if cfg.device == "gpu" else np
    G = cfg.batch_size * P  # global batch

    # 3.-5. data shard, model, optimizer state, resume (workers only). Set-up errors
    # are collected and shared, so every rank stops cleanly instead of waiting.
    failure: Exception | None = None
    start_step = 0
    if is_worker:
        try:
            features, classes = cfg.layers[0], cfg.layers[-1]
            if cfg.data:
                ds = load_npz(cfg.data, features, classes, holdout=cfg.holdout,
                              seed=cfg.seed, dtype=cfg.dtype)
            else:
                ds = synthetic(features, classes, cfg.train_samples, cfg.test_samples,
                               seed=cfg.seed, dtype=cfg.dtype)
            shard = Shard(ds.x_train, ds.y_train, batch=cfg.batch_size, worker_rank=w,
                          num_workers=P, seed=cfg.seed, xp=xp)
            model = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype, xp=xp)
            params, grads = model.params, model.grads
            velocity = xp.zeros_like(params)  # SGD momentum buffer
            if cfg.resume:
                ck = load_checkpoint(cfg.checkpoint, cfg, G, ds.source)
                params[...] = xp.asarray(ck["params"])
                velocity[...] = xp.asarray(ck["momentum"])
                start_step = int(ck["step"])
                shard.load_state(int(ck["epoch"]), int(ck["cursor"]))
        except (DataError, CheckpointError, ValueError) as exc:
            failure = exc
    bad = metrics.first_failure(comm, failure is not None)
    if bad >= 0:
        if failure is not None and comm.Get_rank() == bad:
            print(f"mpicomm train: error: {failure}", flush=True)
        if not is_worker:
            reducer.serve()  # a dedicated server takes every worker's close, as after a run
        reducer.close()  # free the reducer's communicators on the way out
        raise SetupError(f"set-up failed on rank {bad}")
    # every rank continues from the same step (dedicated servers read no checkpoint)
    start_step = int(metrics.max_over_ranks(comm, np.array([start_step]))[0])
    n_run = max(cfg.steps - start_step, 0)
    if is_worker:
        say(f"{cfg.strategy}: {comm.Get_size()} ranks, {P} workers | model "
            f"{'-'.join(map(str, cfg.layers))} ({model.num_params:,} params, "
            f"{grads.nbytes / 2**10:,.0f} KiB of grads) | batch {cfg.batch_size}/worker, {G} "
            f"global | {ds.source}" + (f" | resumed at step {start_step}" if cfg.resume else ""))

    # 6. the loop: per-step [step, compute, comm, optimizer] seconds; losses of every step.
    times = np.zeros((n_run, 4))
    losses = np.zeros(n_run)
    checkpoint_s = 0.0
    perf = time.perf_counter
    if not is_worker:
        reducer.serve()  # a dedicated server sums and hands back until every worker closes
    else:
        on_gpu = xp is not np
        mu, wd, base_lr = cfg.momentum, cfg.weight_decay, cfg.lr * (P if cfg.scale_lr else 1)
        t0 = perf()
        for i in range(n_run):
            step = start_step + i
            xb, yb = shard.next()
            t1 = perf()
            loss = model.forward(xb, yb)
            for _ in model.backward():  # grads land last layer first (overlap hook)
                pass
            if on_gpu:
                sync_device(grads)
            t2 = perf()
            reducer.allreduce(grads, op="mean")
            t3 = perf()
            # SGD with momentum and weight decay, in place; grads double as scratch:
            # v = mu·v + g + wd·p ;  p -= lr·v
            lr = base_lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else base_lr
            velocity *= mu
            velocity += grads
            if wd:
                xp.multiply(params, wd, out=grads)
                velocity += grads
            xp.multiply(velocity, lr, out=grads)
            params -= grads
            if on_gpu:
                sync_device(params)
            t4 = perf()
            losses[i] = float(loss)
            if cfg.log_every and (step + 1) % cfg.log_every == 0:
                k = min(cfg.log_every, i + 1)
                window = times[i - k + 1 : i, 0].sum() + (t4 - t0)
                say(f"{cfg.strategy} step {step + 1:5d}/{cfg.steps}  loss "
                    f"{losses[i - k + 1 : i + 1].mean():.4f}  lr {lr:.4g}  "
                    f"{G * k / window:,.0f} samples/s", flush=True)
            t5 = perf()
            times[i, 0], times[i, 1], times[i, 2], times[i, 3] = t5 - t0, t2 - t1, t3 - t2, t4 - t3
            every = cfg.checkpoint_every
            if cfg.checkpoint and w == 0 and (
                step + 1 == cfg.steps or (every and (step + 1) % every == 0)
            ):
                save_checkpoint(
                    cfg.checkpoint, params=_host(params), momentum=_host(velocity),
                    step=step + 1, **shard.state(), layers=np.array(cfg.layers), dtype=cfg.dtype,
                    seed=cfg.seed, global_batch=G, data_source=ds.source, strategy=cfg.strategy,
                )
                checkpoint_s += perf() - t5
                t5 = perf()
            t0 = t5
    reducer.close()  # workers: tell the servers we are done; everyone: free the communicator

    # 7. summary: aggregate over ranks (servers contribute zeros), score the model.
    skip = min(5, n_run // 5)  # the first steps warm caches and check buffer agreement
    timed = times[skip:] if is_worker else np.zeros((n_run - skip, 4))
    # step time of step i: the mean over workers (their step boundaries are rank-local, so a
    # per-step max would add up every rank's jitter and exceed the wall time)
    step_mean = metrics.sum_over_ranks(comm, timed[:, 0]) / P if len(timed) else np.zeros(1)
    sums = metrics.sum_over_ranks(comm, timed.sum(axis=0))  # step, compute, comm, optimizer
    wall_max = float(metrics.max_over_ranks(comm, np.array([timed[:, 0].sum()]))[0])
    st = reducer.stats
    traffic = metrics.gather_rows(comm, np.array([st.bytes_sent, st.bytes_recv]))  # per rank
    score = np.zeros(6)
    crc = -1.0
    if is_worker:
        n_eval = cfg.eval_samples
        splits = ((ds.x_train[:n_eval], ds.y_train[:n_eval]), (ds.x_test, ds.y_test))
        for j, (x, y) in enumerate(splits):
            lo, hi = w * len(x) // P, (w + 1) * len(x) // P
            loss_sum, correct = model.evaluate(xp.asarray(x[lo:hi]), xp.asarray(y[lo:hi]))
            score[3 * j : 3 * j + 3] = loss_sum, correct, hi - lo
        crc = float(zlib.crc32(memoryview(_host(params))))
    score = metrics.sum_over_ranks(comm, score)
    crcs = metrics.gather_rows(comm, np.array([crc]))[:, 0]
    worker_crcs = {c for c in crcs if c >= 0}
    last = losses[-min(len(losses), cfg.log_every or 10):] if is_worker and n_run else np.zeros(0)
    first = losses[: min(len(losses), 10)] if is_worker else np.zeros(0)
    loss_sums = metrics.sum_over_ranks(comm, np.array([last.sum(), last.size, first.sum(),
                                                       first.size]))
    n_timed = max(n_run - skip, 0)
    step_total = sums[0] if sums[0] > 0 else float("nan")
    per_step = lambda s: s / (P * n_timed) if n_timed else float("nan")  # noqa: E731
    grad_nbytes = num_params(cfg.layers) * np.dtype(cfg.dtype).itemsize
    sps = G * n_timed / wall_max if wall_max > 0 else float("nan")
    record = {
        "strategy": cfg.strategy,
        "ranks": comm.Get_size(),
        "workers": P,
        "params": num_params(cfg.layers),
        "grad_bytes": grad_nbytes,
        "global_batch": G,
        "steps": n_run,
        "steps_timed": n_timed,
        "samples_per_sec": sps,
        "step_time_median_s": float(np.median(step_mean)) if n_timed else float("nan"),
        "step_time_p90_s": float(np.percentile(step_mean, 90)) if n_timed else float("nan"),
        "step_times_s": step_mean.tolist() if n_timed else [],  # per timed step (verdicts)
        "step_time_mean_s": per_step(sums[0]),
        "compute_s": per_step(sums[1]),
        "comm_s": per_step(sums[2]),
        "optimizer_s": per_step(sums[3]),
        "other_s": per_step(sums[0] - sums[1] - sums[2] - sums[3]),
        "compute_share": sums[1] / step_total,
        "comm_share": sums[2] / step_total,
        "optimizer_share": sums[3] / step_total,
        "other_share": (sums[0] - sums[1] - sums[2] - sums[3]) / step_total,
        "bytes_per_step": float(traffic[:, 0].max()) / n_run if n_run else 0.0,
        "bytes_per_step_mean": float(traffic[:, 0].mean()) / n_run if n_run else 0.0,
        "bytes_recv_per_step": float(traffic[:, 1].max()) / n_run if n_run else 0.0,
        "bytes_per_step_by_rank": [float(b) / n_run if n_run else 0.0 for b in traffic[:, 0]],
        "final_loss": score[0] / score[2],
        "final_accuracy": score[1] / score[2],
        "test_accuracy": score[4] / score[5],
        "train_loss_first": loss_sums[2] / loss_sums[3] if loss_sums[3] else float("nan"),
        "train_loss_last": loss_sums[0] / loss_sums[1] if loss_sums[1] else float("nan"),
        "baseline_samples_per_sec": baseline_sps,
        "scaling_efficiency": sps / (P * baseline_sps) if baseline_sps else None,
        "params_in_sync": len(worker_crcs) == 1,
        "param_crc32": int(next(iter(worker_crcs))) if len(worker_crcs) == 1 else None,
        "resumed_from_step": start_step if cfg.resume else None,
        "checkpoint_s": checkpoint_s,
        "reducer": reducer.describe(),
    }
    if not record["params_in_sync"]:
        say(f"WARNING: {cfg.strategy}: workers ended with different parameters (crc32 {crcs})")
    return record


def _host(a: Any) -> np.ndarray:
    """Return a NumPy array for ``a`` (a copy from the GPU; ``a`` itself on the host)."""
    return a if isinstance(a, np.ndarray) else a.get()


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
                                   checkpoint_every=0, resume=False, json=None, dedicated=False)
        try:
            sps = run_training(solo, metrics.solo_comm(), verbose=False)["samples_per_sec"]
        except SetupError:  # rank 0 has printed why; the others must hear of it, not wait
            failed = True
    metrics.quiet_barrier(comm)
    if metrics.first_failure(comm, failed) >= 0:
        raise SetupError("set-up of the 1-worker baseline failed on rank 0")
    return float(metrics.max_over_ranks(comm, np.array([sps]))[0])


# ------------------------------------------------------------ output
COLUMNS = [  # header, record key, format
    ("strategy", "strategy", "{}"),
    ("ranks", "ranks", "{}"),
    ("workers", "workers", "{}"),               # ranks that train (dedicated servers do not)
    ("samples/s", "samples_per_sec", "{:,.0f}"),
    ("±", "samples_per_sec_spread", "%"),       # (max - min) / median over repeats
    ("step ms", "step_time_median_s", "ms"),     # median over steps (step: mean over workers)
    ("p90", "step_time_p90_s", "ms"),
    ("compute", "compute_share", "%"),          # shares of the step time
    ("comm", "comm_share", "%"),
    ("opt", "optimizer_share", "%"),
    ("other", "other_share", "%"),
    ("comm ms", "comm_s", "ms"),                # measured comm per step
    ("model ms", "predicted_comm_s", "ms"),     # costmodel.predict (compare only)
    ("KB/step", "bytes_per_step", "kb"),         # sent by the busiest rank
    ("loss", "final_loss", "{:.4f}"),
    ("train", "final_accuracy", "%"),
    ("test", "test_accuracy", "%"),
    ("eff", "scaling_efficiency", "eff"),
]


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if fmt == "ms":
        return f"{value * 1e3:.2f}"
    if fmt == "%":
        return f"{100 * value:.1f}%"
    if fmt == "kb":
        return f"{value / 1e3:,.0f}"
    if fmt == "eff":
        return f"{value:.2f}"
    return fmt.format(value)


def format_table(records: list[dict]) -> str:
    """Return the aligned results table (one row per record; columns no record has are left out)."""
    cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in records)]
    rows = [[h for h, _, _ in cols]]
    rows += [[_cell(r.get(k), f) for _, k, f in cols] for r in records]
    widths = [max(len(row[j]) for row in rows) for j in range(len(cols))]
    lines = ["  ".join(c.ljust(wd) if j == 0 else c.rjust(wd) for j, (c, wd) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_json(path: str, document: dict) -> None:
    """Write ``document`` as JSON to ``path`` atomically (temp file + os.replace)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(jsonable(document), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def document(command: str, cfg: TrainConfig, records: list[dict], topology: dict,
             **extra: Any) -> dict:
    """Return the JSON document of a run: config, versions, topology, results."""
    from mpicomm.core.environment import environment

    return {"command": command, "config": dataclasses.asdict(cfg), "environment": environment(),
            "topology": topology, "results": records, **extra}


def run(args: argparse.Namespace) -> int:
    """Run ``python -m mpicomm train`` on every rank; rank 0 prints and writes the JSON."""
    from mpicomm.core.topology import Topology

    comm = metrics.world()
    try:
        cfg = TrainConfig.from_args(args)
    except ConfigError as exc:  # identical on every rank: no rank is left waiting
        if comm.Get_rank() == 0:
            print(f"mpicomm train: error: {exc}", flush=True)
        return 2
    if cfg.blas_threads:
        limit_blas_threads(cfg.blas_threads)
    topo = Topology(comm, ranks_per_node=cfg.ranks_per_node)
    topology = topo.describe()
    topo.free()
    try:
        baseline = measure_baseline(cfg, comm) if cfg.baseline else None
        record = run_training(cfg, comm, baseline_sps=baseline)
    except SetupError:
        return 2
    if comm.Get_rank() == 0:
        if not record["steps"]:
            print(f"nothing to train: the checkpoint is at step {record['resumed_from_step']} "
                  f"of --steps {cfg.steps}")
        print(format_table([record]))
        if record["steps_timed"]:
            print(f"framework overhead (step time outside compute+comm+optimizer): "
                  f"{100 * record['other_share']:.1f}%")
        if cfg.json:
            write_json(cfg.json, document("train", cfg, [record], topology))
            print(f"wrote {cfg.json}")
    return 0
