"""``--tensorboard DIR``: the run's per-step scalars as a TensorBoard event file.

Written once, at the end of the run, by worker 0 from the per-step arrays the
loop already keeps (so the loop itself is untouched and pays nothing per step):

1. one run directory per job:
   ``DIR/<strategy>[-<compress>]-<W>w[-virtual]-<YYYYmmdd-HHMMSS>`` (``-virtual``: the
   times are the virtual clock's, not to be read beside a wall-clock run's)
   (``compare`` writes one per strategy under the same DIR, side by side in
   TensorBoard);
2. every step (x axis: the optimizer step, 1-based, continuing a resumed run):
   ``time/step_s``, ``time/compute_s``, ``time/comm_exposed_s``,
   ``time/comm_total_s``, ``time/optimizer_s`` (worker 0's clock),
   ``throughput/samples_per_s`` (global batch / worker 0's step time; async and
   ssp, where the workers do not step together: ``throughput/worker0_samples_per_s``,
   worker 0's rows / its step time),
   ``comm/overlap`` (1 − exposed/total; steps with no communication have none),
   ``train/loss`` (worker 0's batch; NaN and infinities written as they are, so a
   diverged run's curve shows where it broke), and ``bytes/{sent,inter_node,intra_node}_per_step``
   (worker 0's bytes handed to MPI by link class: the run's total / steps, the
   same at every step — a step's traffic is fixed by the bucket plan);
3. at the last step: ``eval/test_accuracy`` (held out), ``eval/train_accuracy``,
   ``eval/final_loss``, ``eval/scaling_efficiency`` (with ``--baseline``) and, for the
   parameter server, ``ps/staleness_max`` and ``ps/staleness_mean`` (the servers'
   counts over the run; the loop has no per-step staleness).

The writer is tensorboardX (``pip install 'mpicomm[tensorboard]'``), else
torch's ``SummaryWriter`` when torch and tensorboard are installed; without
either, ``require()`` refuses the flag in one line (exit 2) before any message.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from mpicomm.core.errors import ConfigError

__all__ = ["require", "run_dir", "write_run", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'mpicomm[tensorboard]' (tensorboardX)"
PER_STEP_TIMES = ("step_s", "compute_s", "comm_exposed_s", "optimizer_s", "comm_total_s")
AS_IS = ("train/loss",)  # written at every step, NaN and infinities included
_quiet = logging.getLogger("tensorboardX.x2num")


def _writer_class() -> Any:
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            return None
    return SummaryWriter


def require() -> None:
    """Raise ``ConfigError`` (one line, with the install hint) when no writer is installed."""
    if _writer_class() is None:
        raise ConfigError(f"--tensorboard needs tensorboardX (or torch with tensorboard): "
                          f"{INSTALL_HINT}")


def run_dir(root: str | Path, cfg: Any, record: dict) -> Path:
    """Create and return this job's run directory under ``root`` (never an existing one)."""
    label = str(record["strategy"]).replace(":", "-")
    if getattr(cfg, "compress", "none") != "none":
        label += "-" + cfg.compress.replace(":", "-")
    clocked = "-virtual" if record.get("clock") == "virtual" else ""  # its times are modelled
    base = Path(root) / (f"{label}-{record['workers']}w{clocked}-"
                         f"{time.strftime('%Y%m%d-%H%M%S')}")
    path, k = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            k += 1
            path = base.with_name(f"{base.name}-{k}")


def per_step_scalars(out: dict, record: dict, stats: Any,
                     on_its_own: bool = False) -> dict[str, np.ndarray]:
    """The per-step series of one worker: tag -> values (NaN where a step has none).

    ``on_its_own`` (async / ssp parameter server): the workers do not step together, so
    worker 0's step time says nothing of the others'; its own rate is
    ``throughput/worker0_samples_per_s`` (its rows / its step time) instead of the
    global batch over its step time.
    """
    times, losses = np.asarray(out["times"]), np.asarray(out["losses"])
    n = len(losses)
    series = {f"time/{name}": times[:n, j] for j, name in enumerate(PER_STEP_TIMES)}
    step_s, exposed, total = times[:n, 0], times[:n, 2], times[:n, 4]
    rows, tag = record["global_batch"], "throughput/samples_per_s"
    if on_its_own:
        rows, tag = rows // record["workers"], "throughput/worker0_samples_per_s"
    with np.errstate(divide="ignore", invalid="ignore"):
        series[tag] = np.where(step_s > 0, rows / step_s, np.nan)
        series["comm/overlap"] = np.where(total > 0, 1 - exposed / total, np.nan)
    series["train/loss"] = losses
    sent, inter = float(stats.bytes_sent), float(stats.inter_bytes_sent)
    for tag, value in (("sent", sent), ("inter_node", inter), ("intra_node", sent - inter)):
        series[f"bytes/{tag}_per_step"] = np.full(n, value / n if n else np.nan)
    return series


def final_scalars(record: dict) -> dict[str, float]:
    """Run-level values, written once at the last step (absent or None ones left out)."""
    keys = {"eval/test_accuracy": "test_accuracy", "eval/train_accuracy": "final_accuracy",
            "eval/final_loss": "final_loss", "eval/scaling_efficiency": "scaling_efficiency",
            "ps/staleness_max": "staleness_max", "ps/staleness_mean": "staleness_mean"}
    return {tag: float(record[k]) for tag, k in keys.items() if record.get(k) is not None}


def write_run(root: str | Path, cfg: Any, record: dict, out: dict, stats: Any,
              start_step: int = 0) -> Path:
    """Write worker 0's per-step scalars and the run's final ones; return the run directory.

    Args:
        root: the ``--tensorboard`` directory.
        cfg: the run's ``TrainConfig``.
        record: the run's record (``summarize``).
        out: the loop's per-step arrays: ``times`` (rows of ``loop.TIME_COLUMNS``), ``losses``.
        stats: worker 0's ``ReduceStats`` (bytes by link class).
        start_step: the first step of this run (a resumed run continues its curves).
    """
    writer_class = _writer_class()
    if writer_class is None:
        raise ConfigError(f"--tensorboard: {INSTALL_HINT}")
    path = run_dir(root, cfg, record)
    writer = writer_class(str(path))
    level = _quiet.level  # tensorboardX logs a warning per NaN value: one per diverged step
    _quiet.setLevel(logging.ERROR)
    try:
        series = per_step_scalars(out, record, stats, getattr(cfg, "ps_algorithm", None)
                                  not in (None, "sync"))
        n = len(out["losses"])
        for tag, values in series.items():
            # NaN means "none this step", except in a value of the run's own (a diverged
            # loss): that is written as it is, so the curve shows where the run broke
            steps = range(n) if tag in AS_IS else np.flatnonzero(np.isfinite(values))
            for i in steps:
                writer.add_scalar(tag, float(values[i]), start_step + int(i) + 1)
        for tag, value in final_scalars(record).items():
            writer.add_scalar(tag, value, start_step + max(n, 1))
    finally:
        writer.close()
        _quiet.setLevel(level)
    return path
