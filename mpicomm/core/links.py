"""Emulated link specifications: ``"20us,1GB/s"`` -> latency and bandwidth.

A link is written ``LATENCY,BANDWIDTH``: a number with a time unit (ns, us, ms,
s), a comma, a number with a rate unit (B/s, KB/s, MB/s, GB/s, TB/s for bytes,
Kb/s, Mb/s, Gb/s, Tb/s for bits). Units are decimal, as network rates are:
1 GB/s = 1e9 bytes/s, 100 Gb/s = 12.5e9 bytes/s. Examples: ``20us,1GB/s``,
``5us,100Gb/s``, ``1.5ms,500MB/s``.

The parser is pure (no MPI) and lives in ``core`` so ``ReducerOptions`` can
refuse a bad string when the options are built, before any message and with
the same words on every rank. The emulation itself is ``mpicomm.p2p.links``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from mpicomm.core.bounds import BANDWIDTH_BPS, LATENCY_S, RANGE_HELP, within
from mpicomm.core.errors import ConfigError

__all__ = ["LinkSpec", "parse_link", "link_from_env", "LINK_FORMAT"]

_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE = {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
         "Kb/s": 1e3 / 8, "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_PART = re.compile(r"\s*" + _NUMBER + r"\s*([A-Za-zµ/]+)\s*")

LINK_FORMAT = ("LATENCY,BANDWIDTH such as 20us,1GB/s or 5us,100Gb/s (latency units ns, us, "
               "ms, s; bandwidth units B/s, KB/s, MB/s, GB/s, Gb/s; decimal: 1 GB/s = 1e9 B/s; "
               f"{RANGE_HELP['link']})")


@dataclass(frozen=True)
class LinkSpec:
    """One emulated link class: a message of m bytes holds the interface latency + m/bandwidth.

    Attributes:
        latency: seconds per message (α of the emulated link).
        bandwidth: bytes per second (1/β of the emulated link).
        text: the string it was parsed from (for tables and result files).
    """

    latency: float
    bandwidth: float
    text: str = ""

    def seconds(self, nbytes: int) -> float:
        """Time a message of ``nbytes`` holds the sender's interface: latency + nbytes/bandwidth."""
        return self.latency + nbytes / self.bandwidth

    def __str__(self) -> str:
        return self.text or f"{self.latency * 1e6:g}us,{self.bandwidth / 1e9:g}GB/s"


def _value(part: str, units: dict[str, float]) -> float | None:
    m = _PART.fullmatch(part)
    if m is None or m.group(2) not in units:
        return None
    return float(m.group(1)) * units[m.group(2)]


def parse_link(text: str | LinkSpec | None, what: str = "link") -> LinkSpec | None:
    """Parse ``"LATENCY,BANDWIDTH"``; None (or "" / "none") means no emulation.

    Raises:
        ConfigError: naming ``what`` (e.g. ``inter_link``), the string, and the
            expected form.
    """
    if text is None or isinstance(text, LinkSpec):
        return text
    if not isinstance(text, str):
        raise ConfigError(f"{what} must be a string {LINK_FORMAT}, got {text!r}")
    stripped = text.strip()
    if stripped.lower() in ("", "none", "off"):
        return None
    parts = stripped.split(",")
    latency = _value(parts[0], _TIME) if len(parts) == 2 else None
    rate = _value(parts[1], _RATE) if len(parts) == 2 else None
    if latency is None or rate is None:
        raise ConfigError(f"{what}={text!r}: expected {LINK_FORMAT}")
    if not (math.isfinite(latency) and math.isfinite(rate)) or rate <= 0:
        raise ConfigError(f"{what}={text!r}: bandwidth must be > 0 and both finite; "
                          f"expected {LINK_FORMAT}")
    if not (within(latency, LATENCY_S) and within(rate, BANDWIDTH_BPS)):  # results stay finite
        raise ConfigError(f"{what}={text!r}: outside the range of a link ({RANGE_HELP['link']}; "
                          "core/bounds.py), where times stay finite")
    return LinkSpec(latency, rate, stripped)


def link_from_env(value: str | LinkSpec | None, what: str, env: str) -> LinkSpec | None:
    """``value`` parsed, or environment variable ``env`` when ``value`` is None."""
    if value is None:
        raw = os.environ.get(env, "")
        return parse_link(raw, env) if raw.strip() else None
    return parse_link(value, what)
