"""The one seam where compute reports what it does: flops, bytes and kernels.

    flops.use(device, "fp16")             # the device model (cli / make_reducer install it)
    flops.matmul(xp, x, W, out)           # a product: 2·m·k·n flops, its operands' bytes
    flops.charge(values=3 * n)            # an elementwise kernel: n-value add (2 reads, 1 write)
    flops.add(n); flops.scale(n)          # the reducers' local sums and op="mean" scalings

**The device model** (the default under the virtual clock; ``--accelerator NAME``): every
call above is charged on this thread's virtual timeline as the device's roofline,
``max(flops / rate, bytes / memory bandwidth) + kernels · launch`` (``costmodel.device``),
times ``--compute-scale``; ``values`` are floating-point values moved through memory,
each ``--precision``'s width (4 bytes fp32, 2 fp16/bf16), ``nbytes`` exact bytes (codec
payloads). The host's CPU time is **not** charged (``VirtualClock.charge_cpu = False``):
Python between kernels costs nothing, as SimGrid charges only declared computations, so
a run's times are the model's on any host, under any load, with any MPI. What is not
reported here is free.

**The host** (``--accelerator host``): the clock charges this thread's CPU time as before,
and these calls charge nothing. **``--flop-rate R``**, under either: every matmul is charged
exactly 2·m·k·n / R instead (the product runs inside ``enter``/``leave``, as an MPI call;
not multiplied by ``--compute-scale``), as before devices existed.

**``--fold F``** (``VirtualClock.fold``): the run's buffers hold 1/F of each gradient
tensor, so ``charge`` multiplies a kernel's FLOPs and bytes by F (not its launches: the
unfolded run launches as many kernels) and ``wire_nbytes`` a message's bytes; a model
layer's compute, which no fold shrinks, is charged with ``folded=False``. These two are
the only places the fold is applied.

Under the wall clock nothing here charges anything, and ``use`` refuses a device, a
precision or a rate (they could not take effect).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.bounds import FLOP_RATE, within
from mpicomm.core.errors import ConfigError

__all__ = ["use", "check_rate", "flop_rate", "matmul", "charge", "add", "scale", "active",
           "describe", "wire_nbytes", "PRECISIONS", "reset", "gamma", "launch", "width",
           "matmul_cost"]

PRECISIONS = ("fp32", "fp16", "bf16")
_WIDTH = {"fp32": 4, "fp16": 2, "bf16": 2}

_device: Any = None        # the modelled device (``costmodel.device.Device``), None: host/wall
_precision = "fp32"
_width = 4                 # bytes per value at ``_precision``
_rate: float | None = None  # --flop-rate
_CONTROL = np.dtype(np.int64)  # control messages: never folded (``wire_nbytes``)


def check_rate(flop_rate: float) -> None:
    """Raise ``ConfigError`` unless ``flop_rate`` is a number of FLOP/s in ``FLOP_RATE``
    (core/bounds.py: results stay finite)."""
    if not within(flop_rate, FLOP_RATE):
        raise ConfigError(f"--flop-rate must be a number of FLOP/s from {FLOP_RATE[0]:g} to "
                          f"{FLOP_RATE[1]:g}, got {flop_rate!r}")


def use(device: Any = None, precision: str = "fp32", flop_rate: float | None = None) -> None:
    """Install the compute model: ``device`` (a ``costmodel.device.Device``; None or ``host``:
    this host's CPU time), ``precision`` and ``flop_rate`` (a FLOP/s override).

    Raises ``ConfigError`` in one line for an unknown precision, one the device has no
    arithmetic for, a rate that is not a number > 0, or any of them under the wall clock."""
    global _device, _precision, _width, _rate
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if flop_rate is not None:
        check_rate(flop_rate)
    vc = clock.virtual()
    if vc is None:
        given = [f for f, on in (("--flop-rate", flop_rate is not None),
                                 ("--precision", precision != "fp32"),
                                 ("--accelerator", device is not None)) if on]
        if given:
            raise ConfigError(f"{', '.join(given)}: virtual-clock only, and this run uses the "
                              "wall clock; add --clock virtual")
    if device is not None:
        device.check_precision(precision)
    modelled = device is not None and not device.cpu_time and vc is not None
    _device = device if modelled else None
    _precision, _width = precision, _WIDTH[precision]
    _rate = None if flop_rate is None else float(flop_rate)
    if vc is not None:
        vc.charge_cpu = not modelled


def flop_rate() -> float | None:
    """The ``--flop-rate`` in force (None: the device's own rate, or no model)."""
    return _rate


def reset() -> None:
    """Back to nothing charged here (the wall clock's state)."""
    global _device, _precision, _width, _rate
    _device, _precision, _width, _rate = None, "fp32", 4, None


def active() -> bool:
    """True when the device model charges compute (not the host's CPU time)."""
    return _device is not None


def describe() -> dict | None:
    """The installed device's figures (None: host CPU time or wall clock)."""
    if _device is None:
        return None
    out = _device.describe(_precision)
    if _rate is not None:
        out["flop_rate"], out["flop_rate_from"] = _rate, "--flop-rate"
    return out


def charge(flops: float = 0.0, values: int = 0, kernels: int = 1, nbytes: int = 0,
           folded: bool = True) -> None:
    """Charge ``kernels`` kernels doing ``flops`` and moving ``values`` floating-point
    values (at the precision's width) plus ``nbytes`` exact bytes; device model only.

    ``folded``: the kernel runs over a (folded) buffer, so its FLOPs and bytes are charged
    ``--fold`` times (module docstring); False for a model layer's compute."""
    if _device is None:
        return
    vc = clock.virtual()
    if vc is not None:
        f = vc.fold if folded else 1
        vc.charge(vc.scale * _device.seconds(f * flops, f * (values * _width + nbytes),
                                             kernels, _precision, _rate))


def add(n: int, kernels: int = 1) -> None:
    """Charge ``a += b`` of ``n`` values (a reduction's local sum): 2 reads and 1 write."""
    if _device is not None:
        charge(n, 3 * n, kernels)


def scale(n: int) -> None:
    """Charge ``a *= s`` of ``n`` values (op="mean"): 1 read and 1 write."""
    if _device is not None:
        charge(n, 2 * n, 1)


def gamma() -> float | None:
    """Seconds per byte of a reduction's add on the device (no launch), times
    ``--compute-scale``: the α-β-γ model's γ per byte of the buffer (an add moves 3 bytes per
    byte: 2 reads, 1 write), which the clock charges for MPI's own collectives (native's
    ``Allreduce``, the leaders' ``Reduce``). None without the device model."""
    if _device is None:
        return None
    vc = clock.virtual()
    return (1.0 if vc is None else vc.scale) * 3.0 / _device.memory_bytes_per_s


def launch() -> float:
    """Seconds of one kernel's launch on the device, times ``--compute-scale``: what the
    clock charges each local add beyond its bytes (``add``), which the predictor's
    step-by-step forms read as ``Cluster.launch_s``. 0 without the device model (the
    host's CPU time, or the wall clock)."""
    if _device is None:
        return 0.0
    vc = clock.virtual()
    return (1.0 if vc is None else vc.scale) * _device.launch_s


def width() -> int:
    """Bytes a floating-point value takes at the installed ``--precision`` (4, or 2)."""
    return _width


def wire_nbytes(buf: Any) -> int:
    """The bytes a message of ``buf`` is charged on a link: a floating-point payload at the
    precision's width (fp16/bf16 gradients travel as 2 bytes a value), other bytes as they are;
    times ``--fold`` (module docstring) unless ``buf`` is int64, the fixed-size control
    messages (the agreement's keys, a server's headers), which no fold shrinks."""
    f = clock.fold()
    if f != 1 and buf.dtype == _CONTROL:
        f = 1
    if _width == 4 or buf.dtype.kind != "f":
        return f * buf.nbytes
    return f * buf.size * _width


def matmul_cost(m: int, k: int, n: int) -> tuple[float, int, int]:
    """(FLOPs, values, kernels) of one (m×k)·(k×n) product: 2·m·k·n FLOPs, both operands read
    and the result written (m·k + k·n + m·n values), one kernel. ``matmul`` charges it; the
    workloads' kernel lists (``workloads.kernels``) count it, so the predictor does too."""
    return 2.0 * m * k * n, m * k + k * n + m * n, 1


def matmul(xp: Any, a: Any, b: Any, out: Any) -> Any:
    """``xp.matmul(a, b, out=out)`` of 2-D arrays, charged 2·m·k·n flops and its operands'
    values under the device model; with ``--flop-rate R`` exactly 2·m·k·n / R (not scaled
    by ``--compute-scale``, no roofline: the product's own model, under either compute model)."""
    if _device is not None and _rate is None:
        charge(*matmul_cost(a.shape[0], a.shape[1], b.shape[1]))
        return xp.matmul(a, b, out=out)
    vc = clock.virtual() if _rate is not None else None
    if vc is None:
        return xp.matmul(a, b, out=out)
    t = vc.enter()  # the compute before it is settled; the product's CPU time is not charged
    try:
        return np.matmul(a, b, out=out)
    finally:
        vc.leave(t + 2.0 * a.shape[0] * a.shape[1] * b.shape[1] / _rate)
