"""The range of every rate, scale and delay a user gives, so every result stays finite.

A value outside its range is refused in one line naming the flag, the value and the range
(``--help`` quotes the same ranges). The ranges are wide enough for any machine that exists
and narrow enough that a product of them cannot overflow a double or round to zero:

| quantity | range | why the ends |
|---|---|---|
| link latency | 0 .. 10 s | 10 s: beyond any network (a satellite hop is 0.6 s) |
| link bandwidth | 1 B/s .. 1 PB/s | 500x an NVLink 5 GPU's 1.8 TB/s; 1 B/s: times finite |
| seconds per byte (β, γ of a table) | 0 .. 1 s/B | the inverse of 1 B/s |
| message size of a table | 1 B .. 1 PiB | |
| --compute-scale | 1e-6 .. 1e6 | a million times faster or slower than this host's CPU |
| --flop-rate | 1 MFLOP/s .. 1 EFLOP/s | an H200's dense FP8 is 2e15 FLOP/s |
| --straggler / --jitter delay | 0 .. 60,000 ms a step | a minute a step (slept for real) |
"""

from __future__ import annotations

import math
from typing import Any

from mpicomm.core.errors import ConfigError

__all__ = ["LATENCY_S", "BANDWIDTH_BPS", "SECONDS_PER_BYTE", "TABLE_BYTES", "COMPUTE_SCALE",
           "FLOP_RATE", "DELAY_MS", "within", "check_within", "RANGE_HELP"]

LATENCY_S = (0.0, 10.0)
BANDWIDTH_BPS = (1.0, 1e15)
SECONDS_PER_BYTE = (0.0, 1.0)
TABLE_BYTES = (1, 2**50)
COMPUTE_SCALE = (1e-6, 1e6)
FLOP_RATE = (1e6, 1e18)
DELAY_MS = (0.0, 60_000.0)

RANGE_HELP = {  # quoted by --help
    "link": "latency 0-10 s, bandwidth 1 B/s-1 PB/s",
    "compute_scale": "1e-6 to 1e6",
    "flop_rate": "1e6 to 1e18 FLOP/s",
    "delay": "0 to 60000 ms",
}


def within(value: Any, bounds: tuple[float, float]) -> bool:
    """True when ``value`` is a finite real number (not a bool) inside ``bounds``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and bounds[0] <= value <= bounds[1]


def check_within(what: str, value: Any, bounds: tuple[float, float], unit: str = "") -> None:
    """Raise ``ConfigError`` (one line naming ``what``) unless ``value`` is inside ``bounds``."""
    if not within(value, bounds):
        lo, hi = bounds
        raise ConfigError(f"{what} {value!r}{unit} is outside its range {lo:g}{unit} to "
                          f"{hi:g}{unit}, where results stay finite")
