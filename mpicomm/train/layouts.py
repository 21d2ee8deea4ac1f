"""``compare --layouts dp,zero,pp2,tp2``: parallelism layouts side by side, the same columns.

    mpiexec -n 4 python -m mpicomm compare --layouts dp,zero,zero2,pp2,tp2,dp2xpp2 \\
        --micro-batches 4 --no-baseline

A layout names how the run's ranks share the model (every other flag is the
same for all of them, and the same seed, data and model):

    dp       data parallelism: the loop with a ring all-reduce
    zero     ZeRO-1 (``zero2``: ZeRO-2): the loop with ``engine.ZeroEngine``
    ppK      K pipeline stages (``--micro-batches``, ``--schedule``); ranks / K replicas
    tpK      K tensor-parallel shards; ranks / K replicas

(a replica of K ranks reads K × ``--batch-size`` rows, so every layout trains
on the same global batch: the same steps, the same losses)
    dpAxppK  the same as ppK, checked: the job must have A·K ranks (also dpAxtpK)

Each layout runs once per round (``--repeats``; the table keeps the median
round) through ``loop.run_training``. Columns: samples/s, step time, exposed
communication, bytes sent per step (busiest rank), and memory per rank:
parameters, optimizer state (momentum), activations kept for backward. The
data-parallel layouts keep B·Σ widths[1:] activations (the model's layer
outputs at the per-rank batch B); pipelines report their peak held micro-batches,
tensor shards their local layer outputs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

import numpy as np

from mpicomm.train import loop as T

__all__ = ["check_layout_flags", "layout_config", "with_memory", "format_layouts",
           "LAYOUT_COLUMNS"]

_MODEL = re.compile(r"^(?:dp(\d+)x)?(pp|tp)(\d+)$")

LAYOUT_COLUMNS = [  # header, record key, unit
    ("layout", "layout", ""), ("ranks", "ranks", ""), ("samples/s", "samples_per_sec", "n"),
    ("step ms", "step_time_median_s", "ms"), ("comm ms", "comm_exposed_s", "ms"),
    ("KB/step", "bytes_per_step", "kb"), ("params KB", "param_bytes", "kb"),
    ("opt KB", "optimizer_state_bytes", "kb"), ("act KB", "activation_bytes", "kb"),
    ("loss", "train_loss_last", "loss"),
]


# flags the layout names set (each layout overrides them): given beside --layouts they would
# be dropped without a word
_SET_BY_NAME = (("--pipeline-stages", "pipeline_stages", "ppK, dpAxppK"),
                ("--tensor-parallel", "tensor_parallel", "tpK, dpAxtpK"),
                ("--zero-stage", "zero_stage", "zero, zero2"))


# options of reducers other than the ring, which every layout reduces with
_OTHER_REDUCERS = (("--servers", "servers"), ("--dedicated", "dedicated"),
                   ("--variant", "variant"), ("--crossover-bytes", "crossover_bytes"))


def check_layout_flags(cfg: T.TrainConfig, names: list[str], *,
                       given: Collection[str] = ()) -> None:
    """Raise ``ConfigError`` for a flag ``--layouts`` would ignore (no MPI).

    The layout names set the stages, shards and ZeRO stage, so those flags are refused;
    ``--micro-batches`` and ``--schedule`` shape pipeline layouts only, so they need one;
    every layout reduces with the ring, so other reducers' options are refused. ``given``:
    the flags the command line set (typed at their default, refused as well).
    """
    for flag, key, spelled in _SET_BY_NAME:
        if getattr(cfg, key) != 1 or key in given:
            raise T.ConfigError(f"{flag} {getattr(cfg, key)} has no effect with --layouts: the "
                                f"layout names set it ({spelled})")
    default = T.TrainConfig()
    for flag, key in _OTHER_REDUCERS:
        if getattr(cfg, key) != getattr(default, key) or key in given:
            raise T.ConfigError(f"{flag} has no effect with --layouts: every layout reduces "
                                "with the ring (docs/parallelism.md)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # one name's runs would be pooled and printed on two identical rows
        raise T.ConfigError(f"--layouts names {', '.join(twice)} more than once; --repeats runs "
                            "a layout several times")
    pipelines = any((m := _MODEL.match(n)) is not None and m.group(2) == "pp" for n in names)
    if not pipelines and (cfg.micro_batches != 1 or cfg.schedule != "1f1b"):
        raise T.ConfigError("--micro-batches and --schedule shape pipeline layouts (ppK, "
                            "dpAxppK), which --layouts does not name")


def layout_config(cfg: T.TrainConfig, name: str, ranks: int) -> T.TrainConfig:
    """Return the run's config for layout ``name`` on ``ranks`` ranks (``ConfigError`` for a
    name that cannot be; the run's flags: ``train.checks.check``)."""
    plain = dict(pipeline_stages=1, tensor_parallel=1, micro_batches=1, schedule="1f1b",
                 zero_stage=1)
    if name == "dp":
        return dataclasses.replace(cfg, strategy="ring", **plain)
    if name in ("zero", "zero1", "zero2"):
        return dataclasses.replace(cfg, **{**plain, "strategy": "zero",
                                           "zero_stage": 2 if name == "zero2" else 1})
    m = _MODEL.match(name)
    if m is None:
        raise T.ConfigError(f"--layouts: unknown layout {name!r}; valid: dp, zero, zero2, ppK, "
                            "tpK, dpAxppK, dpAxtpK")
    replicas, kind, k = m.group(1), m.group(2), int(m.group(3))
    if k < 2:  # one stage or shard per replica is data parallelism, under another name
        raise T.ConfigError(f"--layouts {name}: {kind}K needs K >= 2 ({kind}{k} is dp)")
    if replicas is not None and int(replicas) * k != ranks:
        raise T.ConfigError(f"--layouts {name}: {replicas} x {k} ranks, the job has {ranks}")
    extra = {"pipeline_stages": k, "micro_batches": cfg.micro_batches,
             "schedule": cfg.schedule} if kind == "pp" else {"tensor_parallel": k}
    # the same global batch as data parallelism: a replica of K ranks takes K ranks' rows
    return dataclasses.replace(cfg, strategy="ring", **{**plain, **extra},
                               batch_size=cfg.batch_size * k)


def with_memory(cfg: T.TrainConfig, rec: dict) -> dict:
    """Fill the memory columns a data-parallel record lacks (parameters, activations)."""
    out = dict(rec)
    b = np.dtype(cfg.dtype).itemsize
    out.setdefault("param_bytes", rec.get("grad_bytes"))
    out.setdefault("activation_bytes", cfg.batch_size * sum(cfg.layers[1:]) * b)
    return out


_FORMATS = {"ms": lambda v: f"{v * 1e3:.2f}", "kb": lambda v: f"{v / 1e3:,.1f}",
            "n": "{:,.0f}".format, "loss": "{:.4f}".format, "": str}


def _cell(value: object, unit: str) -> str:
    missing = value is None or (isinstance(value, float) and not np.isfinite(value))
    return "-" if missing else _FORMATS[unit](value)


def format_layouts(records: list[dict]) -> str:
    """The side-by-side table: one row per layout, the same columns."""
    rows = [[h for h, _, _ in LAYOUT_COLUMNS]]
    rows += [[_cell(r.get(k), u) for _, k, u in LAYOUT_COLUMNS] for r in records]
    widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
