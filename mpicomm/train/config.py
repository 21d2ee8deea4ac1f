"""``TrainConfig``: every training flag, once — the command-line flags are generated from it.

The config HOLDS the reducer options: it inherits their fields from
``core.options.ReducerFields`` (declared once, beside ``ReducerOptions``), and
``reducer`` is the checked, parsed ``ReducerOptions`` of the run (links parsed
into ``LinkSpec``, ``compress`` normalised), passed down to ``make_reducer``.

Each field is one line: ``name: type = default  # help``; ``cli.flags.add_flags``
reads the type and default from the dataclass and the help from the trailing
comment (continued on comment-only lines below it), so a new flag is one new field:

    staleness: int = 0                  # ps ssp: a worker runs at most S steps ahead

Flags: ``--name-with-dashes``; ``bool = False`` gives ``--name``; ``bool = True`` or
``bool | None`` gives ``--name/--no-name``; ``tuple`` fields take comma lists.
Values are checked on creation (``ConfigError``; a wrong type or an unknown name:
``ConfigTypeError``), never by argparse, so a bad value gives the same clear
message from the command line and from Python. The record is built once and never
written after: ``TrainConfig.__init__`` puts each value in its normal form first
(``"8,4"`` -> ``(8, 4)``, stragglers one ``RANK:MS`` each, ``"1M"`` -> bytes, the digits'
widths), then the dataclass sets the fields, and the checks only read them.
The flags themselves, and the parsed flags back to a record, live in ``cli/config.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpicomm.core import flops, nvtx
from mpicomm.core.bounds import DELAY_MS, within
from mpicomm.core.errors import (
    ConfigError,  # an invalid training configuration (re-exported)
    ConfigTypeError,
)
from mpicomm.core.flags import check_types
from mpicomm.core.links import parse_link
from mpicomm.core.options import (
    CUDA_AWARE_ON_CPU,
    HIERARCHICAL_VARIANTS,
    ReducerFields,
    ReducerOptions,
    check_strategy_options,
)
from mpicomm.core.units import parse_bytes
from mpicomm.nn import parse_layers
from mpicomm.reducers import strategies
from mpicomm.train import tensorboard
from mpicomm.train.data import DEFAULT_HOLDOUT, DIGITS, DIGITS_LAYERS
from mpicomm.workloads import check_model

__all__ = ["TrainConfig", "TrainFields", "ConfigError", "SINGLE_RUN_ONLY", "check_world",
           "check_data_flags", "check_strategy_options", "ONE_RANK_NOTE", "field_fingerprints"]

# flags of one training run that compare (several runs) leaves out
SINGLE_RUN_ONLY = ("strategy", "checkpoint", "checkpoint_every", "resume", "baseline")


DEFAULT_LAYERS = (256, 512, 512, 10)  # --layers when not given (digits: data.DIGITS_LAYERS)


@dataclass(frozen=True)
class TrainFields(ReducerFields):
    """Every training flag, one field each (``TrainConfig`` is the record built from them).

    The reducer options (``ranks_per_node``, ``variant``, ``servers``, ``dedicated``,
    ``validate``, ``cuda_aware``, ``crossover_bytes``, ``inter_link``, ``intra_link``,
    ``compress``) are inherited from ``ReducerFields``: one record, no second spelling.
    """

    strategy: str = "native"            # gradient sync strategy (mpicomm.strategies())
    model: str | None = None            # a real model's tensors and compute instead of the MLP:
                                        # resnet50, vgg16, bert-large, ... (virtual clock;
                                        # docs/workloads.md)
    single_rate: float | None = None    # --model, virtual clock: a measured one-device rate
                                        # (samples/s) charges each layer instead of the device
                                        # model, batch/rate a step shared out by FLOPs, as
                                        # model --predict --single-rate (docs/workloads.md)
    fold: int | None = field(default=None, metadata={"flag_type": str})  # --model, virtual
                                        # clock: each rank holds 1/F of every gradient tensor,
                                        # charged its full size (auto, the default: the
                                        # smallest power of 2 that keeps the job's folded
                                        # state under 2 GiB; docs/workloads.md)
    layers: tuple[int, ...] = DEFAULT_LAYERS  # MLP widths features,hidden...,classes;
                                        # WxN repeats a width (256,64x48,10); with --data
                                        # digits the default is 64,128,10
    batch_size: int = 64                # rows per worker per micro-batch
    steps: int = 300                    # total optimizer steps (a resumed run continues to it;
                                        # --model: 6 unless given, every step is the same)
    lr: float = 0.05                    # base learning rate
    momentum: float = 0.9               # SGD momentum (0 = plain SGD)
    weight_decay: float = 1e-4          # L2 added to every gradient (weights and biases)
    scale_lr: bool = False              # linear scaling rule: lr × workers
    warmup_steps: int = 0               # ramp lr linearly over this many steps
    seed: int = 0                       # model init, synthetic data, data order
    dtype: str = "float32"              # float32 | float64
    device: str = "cpu"                 # cpu (NumPy) | gpu (CuPy)
    data: str | None = None             # .npz (x, y [, x_test, y_test]) or 'digits'; default:
                                        # synthetic teacher task
    train_samples: int = 16384          # synthetic: training rows
    test_samples: int = 2048            # synthetic: held-out rows
    holdout: float = DEFAULT_HOLDOUT    # .npz without x_test: fraction held out
    eval_samples: int = 4096            # training rows scored for the final loss/accuracy
    log_every: int = 100                # progress line every K steps (0 = none)
    checkpoint: str | None = None       # checkpoint path (.npz)
    checkpoint_every: int = 0           # save every K steps and at the end (0 = only at the end)
    resume: bool = False                # continue from --checkpoint
    baseline: bool = False              # also time a 1-worker run (rank 0 alone) for scaling
                                        # efficiency
    json: str | None = None             # write results as JSON here
    wide: bool = False                  # every column of the table (default: the columns
                                        # that fit 100 characters)
    legend: bool = False                # what each column of the table means
    blas_threads: int = 1               # BLAS threads per rank (0 = leave the library default)
    bucket_mb: float = 25.0             # engine: bucket size in MiB (DDP's bucket_cap_mb); 0 = one
                                        # allreduce per weight and per bias
    overlap: bool = True                # engine: reduce full buckets during backward
    overlap_forward: bool = False       # engine: also hide the buckets still reducing when
                                        # backward ends behind the next forward, first layer
                                        # first (ByteScheduler's priority; docs/engine.md)
    accumulate: int = 1                 # engine: micro-batches per optimizer step (reduce once)
    trace: str | None = None            # Chrome-trace JSON of every rank (Perfetto)
    trace_steps: str | None = None      # record only steps A:B (0-based, B excluded)
    ps_mode: str | None = None          # --strategy ps as a real parameter server: sync | async |
                                        # ssp (servers own parameters and optimizer; docs/ps.md)
    staleness: int = 0                  # ps ssp: a worker runs at most S steps ahead (0 = sync)
    ps_momentum: str = "lookahead"      # ps async/ssp servers: lookahead (a velocity per worker,
                                        # pulls answered where the parameters head: DANA) |
                                        # shared (one velocity; stale pushes oscillate)
    straggler: tuple[str, ...] = ()     # RANK:MS: that rank sleeps MS ms in every step's compute
                                        # (repeatable; MS 0 to 60000)
    jitter: float = 0.0                 # MS: seeded random 0..MS ms delay per step, every worker
                                        # (0 to 60000)
    nvtx: bool = False                  # NVTX ranges (steps, buckets, collectives) for Nsight
                                        # Systems; needs mpicomm[nvtx] (docs/observability.md)
    tensorboard: str | None = None      # DIR: per-step scalars for TensorBoard, one run
                                        # directory per job under DIR (docs/observability.md)
    zero_stage: int = 1                 # --strategy zero: 1 shards the optimizer state, 2 also
                                        # the reduced gradients (docs/parallelism.md)
    pipeline_stages: int = 1            # P: the MLP's layers split over P stages (ranks = data
                                        # parallel x P; docs/parallelism.md)
    micro_batches: int = 1              # pipeline: M micro-batches per step (--batch-size / M rows)
    schedule: str = "1f1b"              # pipeline: gpipe | 1f1b
    tensor_parallel: int = 1            # T: Megatron-style column/row-parallel layer pairs over T
                                        # ranks (ranks = data parallel x T)
    flop_rate: float | None = None      # virtual clock: charge every matmul of the model
                                        # 2·m·k·n flops at this rate (FLOP/s, 1e6 to 1e18,
                                        # e.g. 7e10)
                                        # instead of its CPU time (docs/virtual_clock.md)



class TrainConfig(TrainFields):
    """Everything a training run depends on: built once, checked on creation (``ConfigError``).

    Keyword arguments only, one per ``TrainFields`` field. Each value is put in its
    normal form before the frozen fields are set (``_normal_values``), then checked
    (``_validate``), so nothing writes a field afterwards; ``dataclasses.replace`` builds a
    new record the same way.
    """

    def __init__(self, **values: Any) -> None:
        super().__init__(**_normal_values(values))  # the fields, set once
        _validate(self)  # then only read

    @property
    def ps_algorithm(self) -> str | None:
        """The parameter-server algorithm run: ``ps_mode``, except that ssp with S = 0 is sync."""
        return "sync" if self.ps_mode == "ssp" and self.staleness == 0 else self.ps_mode

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build the config from ``values``, refusing unknown names with the valid ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ConfigTypeError(f"unknown training option{'s' if len(unknown) > 1 else ''} "
                                  f"{', '.join(map(repr, unknown))}; valid: {', '.join(names)}")
        return cls(**values)

    @functools.cached_property
    def reducer(self) -> ReducerOptions:
        """The run's reducer options, checked and parsed once (links as ``LinkSpec``): built
        by the checks on creation, so a bad codec or link is refused there, and
        kept (a derived value, not a field: the fields stay as built)."""
        return _reducer_options(self)

    def reducer_options(self) -> dict[str, Any]:
        """Return the ``make_reducer`` keyword options of this run (typed: links parsed).

        Options left at None (``validate``, ``cuda_aware``, ``crossover_bytes``, the
        links, ``clock``) are left out, so the reducer applies its own default.
        """
        return {f.name: getattr(self.reducer, f.name) for f in dataclasses.fields(ReducerFields)
                if getattr(self, f.name) is not None}  # one list: the fields declared once

    def trace_window(self) -> tuple[int, int]:
        """Return the steps ``[a, b)`` to trace (everything when --trace-steps is not set)."""
        if not self.trace_steps:
            return 0, 2**62
        a, b = self.trace_steps.split(":")
        return int(a or 0), int(b) if b else 2**62


def _refuse(msg: str) -> None:
    raise ConfigError(msg)


def _validate(cfg: TrainConfig) -> None:
    """Raise ``ConfigError`` for the first invalid field of ``cfg``."""
    bad = _refuse
    check_types(cfg)  # a wrong type: one line naming the flag, before any comparison
    valid = [*strategies(), "zero"]  # zero: sharded data parallelism (engine.zero)
    if cfg.strategy not in valid:
        bad(f"unknown strategy {cfg.strategy!r}; valid strategies: {', '.join(valid)}")
    if cfg.model is not None:
        check_model(cfg.model)  # an unknown name: one line listing the valid ones
    if cfg.fold is not None and (isinstance(cfg.fold, bool) or not isinstance(cfg.fold, int)
                                 or cfg.fold < 1):
        bad(f"--fold must be a positive integer or auto, got {cfg.fold!r}")
    try:
        parse_layers(cfg.layers)  # normal already when it parses (``_normal_values``)
    except ValueError as exc:
        bad(str(exc))
    _check_numbers(cfg, bad)
    if cfg.dtype not in ("float32", "float64"):
        bad(f"--dtype must be float32 or float64, got {cfg.dtype!r}")
    if cfg.device not in ("cpu", "gpu"):
        bad(f"--device must be cpu or gpu, got {cfg.device!r}")
    if cfg.cuda_aware is not None and cfg.device != "gpu":
        bad(CUDA_AWARE_ON_CPU)
    if cfg.device == "gpu":  # missing CuPy: one line with the install hint, not a traceback
        from mpicomm.core.gpu import import_cupy

        import_cupy()
    if not 0 < cfg.holdout < 1:
        bad(f"--holdout must be in (0, 1), got {cfg.holdout!r}")
    check_data_flags(cfg)
    if (cfg.resume or cfg.checkpoint_every) and not cfg.checkpoint:
        bad("--resume and --checkpoint-every need --checkpoint PATH")
    if cfg.variant not in HIERARCHICAL_VARIANTS:
        bad(f"--variant must be one of {HIERARCHICAL_VARIANTS}, got {cfg.variant!r}")
    if cfg.ranks_per_node is not None and cfg.ranks_per_node < 1:
        bad(f"--ranks-per-node must be >= 1, got {cfg.ranks_per_node}")
    if cfg.servers < 1:
        bad(f"--servers must be >= 1, got {cfg.servers}")
    _ = cfg.reducer  # the reducer options, checked and parsed once: a bad link or codec refused
    if not (isinstance(cfg.bucket_mb, (int, float)) and np.isfinite(cfg.bucket_mb)
            and cfg.bucket_mb >= 0):
        bad(f"--bucket-mb must be a number >= 0, got {cfg.bucket_mb!r}")
    if cfg.flop_rate is not None:
        flops.check_rate(cfg.flop_rate)  # ConfigError, as every check here raises
    if cfg.trace_steps is not None:
        a, sep, b = str(cfg.trace_steps).partition(":")
        if not sep or not all(x.strip().isdigit() or x == "" for x in (a, b)) or (
                b and int(a or 0) >= int(b)):  # ":0" too: steps 0..-1 are none
            bad(f"--trace-steps must be A:B with 0 <= A < B (steps A..B-1), "
                f"got {cfg.trace_steps!r}")
        if not cfg.trace:
            bad("--trace-steps needs --trace PATH")
    _check_trace_window_in_run(cfg)
    _validate_ps_and_delays(cfg, bad)
    _check_overlap_forward(cfg, bad)
    if cfg.nvtx:  # the package missing: one line and exit 2, before any message
        nvtx.require()
    if cfg.tensorboard:
        tensorboard.require()


def _check_numbers(cfg: TrainConfig, bad: Any) -> None:
    """Counts, the learning rate, momentum and weight decay within their ranges."""
    for name in ("batch_size", "steps", "train_samples", "test_samples", "eval_samples",
                 "accumulate"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            bad(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    for name in ("warmup_steps", "log_every", "checkpoint_every", "seed", "blas_threads"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            bad(f"--{name.replace('_', '-')} must be an integer >= 0, got {value!r}")
    if not (cfg.lr > 0 and np.isfinite(cfg.lr)):
        bad(f"--lr must be a positive number, got {cfg.lr!r}")
    if not 0 <= cfg.momentum < 1:
        bad(f"--momentum must be in [0, 1), got {cfg.momentum!r}")
    if not (cfg.weight_decay >= 0 and np.isfinite(cfg.weight_decay)):
        bad(f"--weight-decay must be >= 0, got {cfg.weight_decay!r}")


def _reducer_options(cfg: TrainConfig) -> ReducerOptions:
    """The reducer fields checked as ``ReducerOptions`` (links parsed into ``LinkSpec``).

    The environment defaults (``MPICOMM_RANKS_PER_NODE``, ``MPICOMM_VALIDATE``, ...)
    are read here too, so a bad one is refused before the run.
    """
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(ReducerFields)}
    for name in ("inter_link", "intra_link"):  # a bad link string: ConfigError naming the flag
        spec = parse_link(values[name], f"--{name.replace('_', '-')}")
        if spec is not None:
            values[name] = spec
    try:
        return ReducerOptions(**values)
    except ConfigError as exc:  # name the flag of a bad codec, as the other checks do
        if "compress" not in str(exc):
            raise
        raise ConfigError(f"--compress: {exc}") from None


def _check_trace_window_in_run(cfg: TrainConfig) -> None:
    """--trace-steps A:B must start before --steps (else the trace is empty)."""
    start = cfg.trace_window()[0] if cfg.trace_steps else 0
    if start >= cfg.steps:
        raise ConfigError(f"--trace-steps {cfg.trace_steps}: the run ends at step {cfg.steps}, "
                          f"so nothing would be traced; use A < {cfg.steps}")


def check_data_flags(cfg: TrainConfig, given: Collection[str] = ()) -> None:
    """The sizes of the synthetic task and the held-out fraction of a data set apply to one
    source each: a flag for the other is refused, never ignored. ``given``: the flags the
    command line set (``cli.flags.given_dests``), so one typed at its default counts too; a
    config built in Python has none, and its values alone tell (checked on creation)."""
    bad = _refuse
    field = TrainConfig.__dataclass_fields__
    if cfg.data is None and (cfg.holdout != DEFAULT_HOLDOUT or "holdout" in given):
        bad(f"--holdout {cfg.holdout} sets the held-out fraction of --data (digits, or a file "
            "without x_test); the synthetic task holds out --test-samples rows")
    sizes = [f"--{name.replace('_', '-')}" for name in ("train_samples", "test_samples")
             if cfg.data is not None
             and (getattr(cfg, name) != field[name].default or name in given)]
    if sizes:
        bad(f"{' and '.join(sizes)} size the synthetic task; with --data {cfg.data} the data "
            "set decides (docs/data.md)")


def _check_overlap_forward(cfg: TrainConfig, bad: Any) -> None:
    """--overlap-forward needs the sync engine's communication thread on every rank."""
    if not cfg.overlap_forward:
        return
    refused = [("--no-overlap", not cfg.overlap, "there is no communication thread to run "
                "the reductions behind the forward"),
               ("--ps-mode", cfg.ps_mode is not None, "the servers apply the update; a worker "
                "pulls the whole model before its forward"),
               ("--strategy zero", cfg.strategy == "zero", "its buckets are reduced on the "
                "training thread"),
               ("--dedicated", cfg.dedicated, "every rank must be a worker, which agrees on the "
                "order of the buckets")]
    for flag, refuse, why in refused:
        if refuse:
            bad(f"--overlap-forward cannot take effect with {flag}: {why}")


def _normal_values(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each field in its normal form, before the record is built: ``--layers``
    text as widths (with ``--data digits`` and no ``--layers``, ``data.DIGITS_LAYERS``: 64
    inputs, 10 classes), ``--straggler`` as one ``RANK:MS`` string each, ``--crossover-bytes``
    "1M" as bytes. A value that does not parse stays as given: the checks refuse it."""
    out = dict(values)
    try:
        layers = parse_layers(out.get("layers", DEFAULT_LAYERS))
    except (TypeError, ValueError):
        layers = None
    if layers is not None:
        out["layers"] = DIGITS_LAYERS if (out.get("data") == DIGITS
                                          and layers == DEFAULT_LAYERS) else layers
    straggler = out.get("straggler", ())
    if straggler is None or isinstance(straggler, (str, list, tuple)):
        items = [straggler] if isinstance(straggler, str) else list(straggler or ())
        out["straggler"] = tuple(x.strip() for item in items for x in str(item).split(",")
                                 if x.strip())
    fold = out.get("fold")
    if isinstance(fold, str):  # --fold F or auto (None), as text from the command line
        text = fold.strip().lower()
        out["fold"] = None if text == "auto" else int(text) if text.isdigit() else fold
    if isinstance(out.get("crossover_bytes"), str):  # "1M" from Python, as on the command line
        try:
            out["crossover_bytes"] = parse_bytes(out["crossover_bytes"])
        except ValueError:
            pass  # ReducerOptions refuses it, naming the option
    return out


def _validate_ps_and_delays(cfg: TrainConfig, bad: Any) -> None:
    """--ps-mode, --staleness, --straggler, --jitter."""
    if cfg.ps_mode is not None:
        if cfg.ps_mode not in ("sync", "async", "ssp"):
            bad(f"--ps-mode must be sync, async or ssp, got {cfg.ps_mode!r}")
        if cfg.strategy != "ps":
            bad(f"--ps-mode needs --strategy ps, got {cfg.strategy!r}")
        if (cfg.checkpoint or cfg.resume) and cfg.ps_algorithm != "sync":
            bad(f"--ps-mode {cfg.ps_mode}: checkpoint/resume covers sync runs only (async and "
                "ssp workers stop at different steps with different data positions, and the "
                "look-ahead rule keeps a velocity per worker: no consistent cut to save); use "
                "--ps-mode sync or run without --checkpoint")
        if cfg.device != "cpu":
            bad("--ps-mode runs on the CPU (the servers' optimizer is NumPy)")
    if isinstance(cfg.staleness, bool) or not isinstance(cfg.staleness, int) or cfg.staleness < 0:
        bad(f"--staleness must be an integer >= 0, got {cfg.staleness!r}")
    if cfg.staleness and cfg.ps_mode != "ssp":
        bad("--staleness needs --ps-mode ssp")
    if cfg.ps_momentum not in ("lookahead", "shared"):
        bad(f"--ps-momentum must be lookahead or shared, got {cfg.ps_momentum!r}")
    if not isinstance(cfg.straggler, tuple):
        bad(f"--straggler must be RANK:MS strings, got {cfg.straggler!r}")
    for part in cfg.straggler:
        rank, sep, ms = part.partition(":")
        try:
            ok = sep and int(rank) >= 0 and within(float(ms), DELAY_MS)
        except ValueError:
            ok = False
        if not ok:
            bad(f"--straggler must be RANK:MS with RANK >= 0 and MS from 0 to "
                f"{DELAY_MS[1]:g} (a minute a step, slept for real), got {part!r}")
    if not within(cfg.jitter, DELAY_MS):
        bad(f"--jitter must be a number of milliseconds from 0 to {DELAY_MS[1]:g}, got "
            f"{cfg.jitter!r}")


# --------------------------------------------------- checks needing the job's size
ONE_RANK_NOTE = ("note: this is a 1-rank run (started without mpiexec?): no gradient is "
                 "exchanged; launch more ranks with `mpiexec -n 4 python -m mpicomm train ...`")


def check_world(cfg: TrainConfig, ranks: int) -> None:
    """Raise ``ConfigError`` for a flag that cannot take effect on a job of ``ranks`` ranks.

    Called on every rank with the same arguments, before any message, so every
    rank refuses alike.
    """
    _check_straggler_ranks(cfg, ranks)
    _check_ranks_per_node(cfg, ranks)
    _check_rows_per_step(cfg, ranks)
    _check_one_rank(cfg, ranks)
    _check_memory(cfg)


def _check_one_rank(cfg: TrainConfig, ranks: int) -> None:
    """A 1-rank job sends no message: --compress and the emulated links cannot take effect
    (compression would still round the one rank's gradients, changing the run for nothing)."""
    if ranks != 1:
        return
    if cfg.compress != "none":
        raise ConfigError(f"--compress {cfg.compress}: a 1-rank job sends no gradient, so there "
                          "is nothing to compress; launch 2 or more ranks (mpiexec -n 2 ...)")
    for flag, spec in (("--inter-link", cfg.inter_link), ("--intra-link", cfg.intra_link)):
        if spec:
            raise ConfigError(f"{flag} {spec}: a 1-rank job sends no message over any link; "
                              "launch 2 or more ranks (mpiexec -n 2 ...)")


def _check_straggler_ranks(cfg: TrainConfig, ranks: int) -> None:
    """--straggler RANK:MS must name a rank of this job."""
    workers = workers_of(cfg, ranks)  # dedicated servers are the last ranks: they run no step
    for part in cfg.straggler:
        rank = int(part.partition(":")[0])
        if rank >= ranks:
            raise ConfigError(f"--straggler {part}: rank {rank} is not in this job of {ranks} "
                              f"ranks (ranks 0..{ranks - 1})")
        if rank >= workers:
            raise ConfigError(f"--straggler {part}: rank {rank} is a dedicated parameter server "
                              f"and runs no steps; name a worker (ranks 0..{workers - 1})")


def _check_ranks_per_node(cfg: TrainConfig, ranks: int) -> None:
    """--ranks-per-node K must cut the job into equal simulated nodes."""
    k = cfg.ranks_per_node
    if k is not None and ranks % k:
        fits = [d for d in range(1, ranks + 1) if ranks % d == 0]
        raise ConfigError(f"--ranks-per-node {k} does not cut {ranks} ranks into equal nodes; "
                          f"use one of {', '.join(map(str, fits))}")


def _check_memory(cfg: TrainConfig) -> None:
    """The model and the synthetic rows must fit this host (``--layers 200000,200000,10`` was
    killed by the kernel with no word): ``memory_need`` per rank, times the ranks the launcher
    put here, against the memory available; no verdict where that is unknown."""
    from mpicomm.core.memory import available_memory, ranks_on_this_host
    from mpicomm.core.units import fmt_bytes

    available = available_memory()
    need, what = memory_need(cfg)
    local = ranks_on_this_host()
    if available is not None and need * local > available:
        raise ConfigError(f"--layers {','.join(map(str, cfg.layers))}: {what} need at least "
                          f"{fmt_bytes(need * local)} on this host ({fmt_bytes(need)} a rank x "
                          f"{local} rank(s)), more than its {fmt_bytes(available)} available; "
                          "give smaller --layers (or fewer --train-samples)")


def memory_need(cfg: TrainConfig) -> tuple[int, str]:
    """A floor under the busiest rank's memory, in bytes, and what it counts: its parameters
    and their gradients (2 x the parameters over P pipeline stages x T tensor ranks: a stage
    holds at least 1/P; ZeRO shards only what comes beyond), and the synthetic set every rank
    holds whole ((train + test rows) x features, float32)."""
    from mpicomm.core.units import fmt_bytes
    from mpicomm.nn import num_params

    split = max(1, cfg.pipeline_stages) * max(1, cfg.tensor_parallel)
    params = num_params(cfg.layers) * np.dtype(cfg.dtype).itemsize // split
    rows = (cfg.train_samples + cfg.test_samples) * cfg.layers[0] * 4 if cfg.data is None else 0
    what = f"2 x {fmt_bytes(params)} of parameters" + (
        f" and {fmt_bytes(rows)} of synthetic rows" if rows else "")
    return 2 * params + rows, what


def workers_of(cfg: TrainConfig, ranks: int) -> int:
    """Return the training workers of a ``ranks``-rank job: all but dedicated PS servers
    (``--dedicated``, and always with ``--ps-mode``)."""
    dedicated = cfg.strategy == "ps" and bool(cfg.dedicated or cfg.ps_mode) and ranks > cfg.servers
    return ranks - cfg.servers if dedicated else ranks


def _check_rows_per_step(cfg: TrainConfig, ranks: int) -> None:
    """The synthetic set must hold one optimizer step's rows (the ``Shard`` rule, known early)."""
    if cfg.data is not None or cfg.model is not None:  # a file or digits: the shard checks
        return                                          # once the rows are known; --model: none
    from mpicomm.train.data import DataError, check_rows_per_step

    try:
        check_rows_per_step(cfg.train_samples, cfg.batch_size, workers_of(cfg, ranks),
                            cfg.accumulate)
    except DataError as exc:
        raise ConfigError(str(exc)) from None


# written by rank 0 alone: a job may name it on rank 0's command only
RANK_LOCAL_FIELDS = ("json",)


def field_fingerprints(cfg: TrainConfig) -> tuple[list[str], np.ndarray]:
    """Return the flags every rank of a job must give alike and a CRC-32 of each one's value.

    ``train.loop`` gathers the CRCs over the ranks: an MPMD launch whose ranks differ
    in, say, ``--accumulate`` or ``--batch-size`` averages gradients of different
    batches (no buffer differs, so no reducer notices) and is refused instead.
    """
    names = [f.name for f in dataclasses.fields(cfg) if f.name not in RANK_LOCAL_FIELDS]
    crcs = [zlib.crc32(repr(getattr(cfg, n)).encode()) for n in names]
    return names, np.array(crcs, dtype=np.float64)

