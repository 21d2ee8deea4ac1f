"""The models' matrix products, charged by their flops under the virtual clock (``--flop-rate``).

    flops.use(7e10)                       # train/compare --flop-rate 7e10 (virtual clock only)
    flops.matmul(xp, x, W, out)           # every linear layer's product: x·W, xᵀ·dy, dy·Wᵀ

By default a product is ``xp.matmul`` and, under the virtual clock, costs its CPU
time like any compute. With a rate installed, it is still computed (the real
numbers move and are checked), but the clock charges it 2·m·k·n flops at that
rate instead of the CPU time it took (``VirtualClock.enter``/``leave`` around it,
as around an MPI call): the run's compute is its model's, exactly, on any host
and under any load, and the rest (SGD, ReLU, Python, the reductions' additions)
stays CPU time × ``--compute-scale``. As SimGrid charges a host's compute by flops
at the host's speed; a GPU's rate (about 4e14 for an H100's dense bf16 at 40%)
makes the compute-to-communication ratio the cluster's rather than this CPU's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.bounds import FLOP_RATE, within
from mpicomm.core.errors import ConfigError

__all__ = ["use", "check_rate", "matmul"]

_rate: float | None = None


def check_rate(flop_rate: float) -> None:
    """Raise ``ConfigError`` unless ``flop_rate`` is a number of FLOP/s in ``FLOP_RATE``
    (core/bounds.py: results stay finite)."""
    if not within(flop_rate, FLOP_RATE):
        raise ConfigError(f"--flop-rate must be a number of FLOP/s from {FLOP_RATE[0]:g} to "
                          f"{FLOP_RATE[1]:g}, got {flop_rate!r}")


def use(flop_rate: float | None) -> None:
    """Charge products at ``flop_rate`` FLOP/s from now on (None: their CPU time).

    Raises ``ConfigError`` for a rate that is not a number > 0, or a rate without the
    virtual clock (the wall clock cannot charge a modelled time)."""
    global _rate
    if flop_rate is not None:
        check_rate(flop_rate)
        if clock.virtual() is None:
            raise ConfigError("--flop-rate: virtual-clock only, and this run uses the wall clock; "
                              "add --clock virtual")
    _rate = None if flop_rate is None else float(flop_rate)


def matmul(xp: Any, a: Any, b: Any, out: Any) -> Any:
    """``xp.matmul(a, b, out=out)`` of 2-D arrays; charged 2·m·k·n / rate with a rate installed."""
    vc = clock.virtual() if _rate is not None else None
    if vc is None:
        return xp.matmul(a, b, out=out)
    t = vc.enter()  # the compute before it is settled; the product's CPU time is not charged
    try:
        return np.matmul(a, b, out=out)
    finally:
        vc.leave(t + 2.0 * a.shape[0] * a.shape[1] * b.shape[1] / _rate)
