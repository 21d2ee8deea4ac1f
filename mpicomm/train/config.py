"""``TrainConfig``: every training flag, once — the command-line flags are generated from it.

Each field is one line: ``name: type = default  # help``. ``add_arguments`` reads
the type and default from the dataclass and the help from the trailing comment
(continued on comment-only lines below it), so a new flag is one new field:

    inter_link: str | None = None       # reducer: emulated inter-node link LATENCY,BANDWIDTH

Flags: ``--name-with-dashes``; ``bool = False`` gives ``--name``; ``bool = True`` or
``bool | None`` gives ``--name/--no-name``; ``tuple`` fields take comma lists.
Values are checked on creation (``ConfigError``), never by argparse, so a bad
value gives the same clear message from the command line and from Python.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpicomm.core.errors import ConfigError  # an invalid training configuration (re-exported)
from mpicomm.core.helptext import DefaultsFormatter
from mpicomm.core.links import parse_link
from mpicomm.core.options import HIERARCHICAL_VARIANTS, parse_compress
from mpicomm.reducers import strategies
from mpicomm.train.model import parse_layers

__all__ = ["TrainConfig", "ConfigError", "add_arguments", "SINGLE_RUN_ONLY"]

# flags of one training run that compare (several runs) leaves out
SINGLE_RUN_ONLY = ("strategy", "checkpoint", "checkpoint_every", "resume", "baseline")


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; validated on creation (``ConfigError``)."""

    strategy: str = "native"            # gradient sync strategy (mpicomm.strategies())
    layers: tuple[int, ...] = (256, 512, 512, 10)  # MLP widths features,hidden...,classes;
                                        # WxN repeats a width (256,64x48,10)
    batch_size: int = 64                # rows per worker per micro-batch
    steps: int = 300                    # total optimizer steps (a resumed run continues to it)
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
    holdout: float = 0.1                # .npz without x_test: fraction held out
    eval_samples: int = 4096            # training rows scored for the final loss/accuracy
    log_every: int = 100                # progress line every K steps (0 = none)
    checkpoint: str | None = None       # checkpoint path (.npz)
    checkpoint_every: int = 0           # save every K steps and at the end (0 = only at the end)
    resume: bool = False                # continue from --checkpoint
    baseline: bool = False              # also time a 1-worker run (rank 0 alone) for scaling
                                        # efficiency
    json: str | None = None             # write results as JSON here
    ranks_per_node: int | None = None   # reducer: simulated node size (hierarchical; default:
                                        # ask MPI)
    variant: str = "reduce_scatter"     # reducer: hierarchical variant (reduce_scatter | leader)
    servers: int = 1                    # reducer: parameter servers (ps)
    dedicated: bool = False             # reducer: PS servers on their own ranks
    validate: bool | None = None        # reducer: ranks' buffers checked on every call (True)
                                        # or the first (False); None: MPICOMM_VALIDATE, else True
    blas_threads: int = 1               # BLAS threads per rank (0 = leave the library default)
    inter_link: str | None = None       # reducer: emulated inter-node link LATENCY,BANDWIDTH
                                        # e.g. 20us,1GB/s (docs/links.md)
    intra_link: str | None = None       # reducer: emulated intra-node link LATENCY,BANDWIDTH
    bucket_mb: float = 25.0             # engine: bucket size in MB (MiB), as DDP; 0 = one
                                        # allreduce per weight and per bias
    overlap: bool = True                # engine: reduce full buckets during backward
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
                                        # (repeatable)
    jitter: float = 0.0                 # MS: seeded random 0..MS ms delay per step, every worker
    compress: str = "none"              # reducer: gradient compression on the wire: none | fp16
                                        # | int8 | topk:RATIO[:noef] (docs/compression.md)
    clock: str | None = None            # wall | virtual (compute = CPU time, messages by the
                                        # link model; docs/virtual_clock.md); default: virtual
                                        # with emulated nodes (--ranks-per-node and a link)
    compute_scale: float = 1.0          # virtual clock: multiplies the compute's CPU time

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def ps_algorithm(self) -> str | None:
        """The parameter-server algorithm run: ``ps_mode``, except that ssp with S = 0 is sync."""
        return "sync" if self.ps_mode == "ssp" and self.staleness == 0 else self.ps_mode

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainConfig:
        """Build the config from parsed flags (flag names = field names)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def reducer_options(self) -> dict[str, Any]:
        """Return the ``make_reducer`` keyword options of this run."""
        opts: dict[str, Any] = {"ranks_per_node": self.ranks_per_node, "variant": self.variant,
                                "servers": self.servers, "dedicated": self.dedicated,
                                "compress": self.compress, "compute_scale": self.compute_scale}
        if self.clock is not None:
            opts["clock"] = self.clock
        if self.validate is not None:  # None: the reducer's default (MPICOMM_VALIDATE, else on)
            opts["validate"] = self.validate
        for name in ("inter_link", "intra_link"):  # None: MPICOMM_*_LINK, else not emulated
            if getattr(self, name) is not None:
                opts[name] = getattr(self, name)
        return opts

    def trace_window(self) -> tuple[int, int]:
        """Return the steps ``[a, b)`` to trace (everything when --trace-steps is not set)."""
        if not self.trace_steps:
            return 0, 2**62
        a, b = self.trace_steps.split(":")
        return int(a or 0), int(b) if b else 2**62


def _validate(cfg: TrainConfig) -> None:
    """Raise ``ConfigError`` for the first invalid field of ``cfg``."""
    def bad(msg: str) -> None:
        raise ConfigError(msg)

    if cfg.strategy not in strategies():
        bad(f"unknown strategy {cfg.strategy!r}; valid strategies: {', '.join(strategies())}")
    try:
        object.__setattr__(cfg, "layers", parse_layers(cfg.layers))
    except ValueError as exc:
        bad(str(exc))
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
    if cfg.dtype not in ("float32", "float64"):
        bad(f"--dtype must be float32 or float64, got {cfg.dtype!r}")
    if cfg.device not in ("cpu", "gpu"):
        bad(f"--device must be cpu or gpu, got {cfg.device!r}")
    if cfg.device == "gpu":  # missing CuPy: one line with the install hint, not a traceback
        from mpicomm.core.gpu import import_cupy

        import_cupy()
    if not 0 < cfg.holdout < 1:
        bad(f"--holdout must be in (0, 1), got {cfg.holdout!r}")
    if (cfg.resume or cfg.checkpoint_every) and not cfg.checkpoint:
        bad("--resume and --checkpoint-every need --checkpoint PATH")
    if cfg.variant not in HIERARCHICAL_VARIANTS:
        bad(f"--variant must be one of {HIERARCHICAL_VARIANTS}, got {cfg.variant!r}")
    if cfg.ranks_per_node is not None and cfg.ranks_per_node < 1:
        bad(f"--ranks-per-node must be >= 1, got {cfg.ranks_per_node}")
    if cfg.servers < 1:
        bad(f"--servers must be >= 1, got {cfg.servers}")
    for name in ("inter_link", "intra_link"):  # a bad link string: ConfigError, no message
        parse_link(getattr(cfg, name), f"--{name.replace('_', '-')}")
    if not (isinstance(cfg.bucket_mb, (int, float)) and np.isfinite(cfg.bucket_mb)
            and cfg.bucket_mb >= 0):
        bad(f"--bucket-mb must be a number >= 0, got {cfg.bucket_mb!r}")
    try:
        parse_compress(cfg.compress)
    except ConfigError as exc:
        bad(f"--compress: {exc}")
    if cfg.trace_steps is not None:
        a, sep, b = str(cfg.trace_steps).partition(":")
        if not sep or not all(x.strip().isdigit() or x == "" for x in (a, b)) or (
                a and b and int(a) >= int(b)):
            bad(f"--trace-steps must be A:B with 0 <= A < B (steps A..B-1), "
                f"got {cfg.trace_steps!r}")
        if not cfg.trace:
            bad("--trace-steps needs --trace PATH")
    _validate_ps_and_delays(cfg, bad)


def _validate_ps_and_delays(cfg: TrainConfig, bad: Any) -> None:
    """--ps-mode, --staleness, --straggler, --jitter (normalises straggler to RANK:MS strings)."""
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
        if cfg.accumulate != 1 or cfg.device != "cpu":
            bad("--ps-mode runs on the CPU with --accumulate 1")
    if isinstance(cfg.staleness, bool) or not isinstance(cfg.staleness, int) or cfg.staleness < 0:
        bad(f"--staleness must be an integer >= 0, got {cfg.staleness!r}")
    if cfg.staleness and cfg.ps_mode != "ssp":
        bad("--staleness needs --ps-mode ssp")
    if cfg.ps_momentum not in ("lookahead", "shared"):
        bad(f"--ps-momentum must be lookahead or shared, got {cfg.ps_momentum!r}")
    items = [cfg.straggler] if isinstance(cfg.straggler, str) else list(cfg.straggler or ())
    parts = [x.strip() for item in items for x in str(item).split(",") if x.strip()]
    for part in parts:
        rank, sep, ms = part.partition(":")
        try:
            ok = sep and int(rank) >= 0 and float(ms) >= 0 and np.isfinite(float(ms))
        except ValueError:
            ok = False
        if not ok:
            bad(f"--straggler must be RANK:MS with RANK >= 0 and MS >= 0, got {part!r}")
    object.__setattr__(cfg, "straggler", tuple(parts))
    if not (isinstance(cfg.jitter, (int, float)) and np.isfinite(cfg.jitter) and cfg.jitter >= 0):
        bad(f"--jitter must be a number of milliseconds >= 0, got {cfg.jitter!r}")


# ------------------------------------------------------------ flags, generated
def field_help(cls: type = TrainConfig) -> dict[str, str]:
    """Return each field's help: its trailing comment, joined with comment-only lines below."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (frozen app): flags without help
        return {}
    line_of = {node.target.id: node.lineno for node in ast.parse(source).body[0].body
               if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    owner = {line: name for name, line in line_of.items()}
    helps: dict[str, list[str]] = {}
    current = None
    code_lines = set()
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for tok in tokens:
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT):
            code_lines.add(tok.start[0])
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        if line in owner:
            current = owner[line]
        elif line in code_lines:  # a comment after other code ends the field's help
            current = None
            continue
        if current is not None:
            helps.setdefault(current, []).append(tok.string.lstrip("#").strip())
    return {name: " ".join(parts) for name, parts in helps.items()}


_DefaultsFormatter = DefaultsFormatter  # every default shown once (core.helptext)


def _base_type(hint: Any) -> tuple[Any, bool]:
    """Return (the type without None, whether None is allowed)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def add_arguments(p: argparse.ArgumentParser, *, single_run: bool = True,
                  cls: type = TrainConfig) -> None:
    """Add one flag per ``TrainConfig`` field to ``p`` (defaults, types and help from it).

    ``single_run=False`` (compare) leaves out ``SINGLE_RUN_ONLY``.
    """
    p.formatter_class = _DefaultsFormatter
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        if not single_run and f.name in SINGLE_RUN_ONLY:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind, optional = _base_type(hints[f.name])
        help_text = helps.get(f.name, "").replace("%", "%%")  # argparse formats help with %
        if kind is bool:
            action = "store_true" if f.default is False else argparse.BooleanOptionalAction
            p.add_argument(flag, action=action, default=f.default, help=help_text)
        elif kind == tuple[str, ...]:  # repeatable flag, parsed by the config
            p.add_argument(flag, action="append", default=None, help=help_text)
        elif typing.get_origin(kind) is tuple:  # comma list, parsed by the config
            p.add_argument(flag, default=",".join(map(str, f.default)), help=help_text)
        else:
            p.add_argument(flag, type=kind, default=f.default, help=help_text,
                           metavar=f.name.upper() if optional else None)
