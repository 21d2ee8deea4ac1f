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

__all__ = ["Link", "LinkSpec", "parse_link", "link_from_env", "LINK_FORMAT"]

_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE = {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
         "Kb/s": 1e3 / 8, "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_PART = re.compile(r"\s*" + _NUMBER + r"\s*([A-Za-zµ/]+)\s*")

LINK_FORMAT = ("LATENCY,BANDWIDTH such as 20us,1GB/s or 5us,100Gb/s (latency units ns, us, "
               "ms, s; bandwidth units B/s, KB/s, MB/s, GB/s, Gb/s; decimal: 1 GB/s = 1e9 B/s; "
               f"{RANGE_HELP['link']})")


@dataclass(frozen=True)
class Link:
    """One link class, the one link type of mpicomm: α per step, line rate, achieved share.

    What ``--inter-link`` / ``--intra-link`` parse to, what a named cluster profile holds
    (``mpicomm.costmodel.profiles``) and what the virtual clock and the predictor charge
    (``mpicomm.costmodel.cluster.Cluster``). A message of m bytes holds its interface
    ``alpha_s + m·beta`` (β = 1/(rate·efficiency)).

    Attributes:
        alpha_s: latency of one step (one message, one hop) on this link, seconds.
        bytes_per_s: line rate of ONE direction of one link (one NIC, one GPU's NVLink), B/s.
        efficiency: share of the line rate achieved (protocol overhead); β uses it.
        source: where the figures come from.
        text: the flag string it was parsed from (for tables and result files).
    """

    alpha_s: float
    bytes_per_s: float
    efficiency: float = 1.0
    source: str = ""
    text: str = ""

    def __post_init__(self) -> None:
        a, r, e = self.alpha_s, self.bytes_per_s, self.efficiency
        if not (_finite(a) and a >= 0 and _finite(r) and r > 0 and _finite(e) and 0 < e <= 1):
            raise ConfigError(f"link {self.text or self.source or ''}: need a finite latency "
                              f">= 0, a finite rate > 0 and 0 < efficiency <= 1, got {a!r}, "
                              f"{r!r}, {e!r}")

    @property
    def latency(self) -> float:
        """α, seconds per message (older name)."""
        return self.alpha_s

    @property
    def bandwidth(self) -> float:
        """Achieved bytes per second: rate·efficiency (1/β)."""
        return self.bytes_per_s * self.efficiency

    @property
    def beta(self) -> float:
        """Seconds per byte as achieved: 1/(rate·efficiency)."""
        return 1.0 / (self.bytes_per_s * self.efficiency)

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bandwidth

    def seconds(self, nbytes: int) -> float:
        """Time a message of ``nbytes`` holds the sender's interface: α + nbytes·β."""
        return self.alpha_s + nbytes * self.beta

    def __str__(self) -> str:
        if self.text:
            return self.text
        eff = "" if self.efficiency == 1 else f" x{self.efficiency:.2f}"
        return f"{self.alpha_s * 1e6:g}us,{self.bytes_per_s / 1e9:g}GB/s{eff}"


LinkSpec = Link  # older name: a parsed --inter-link / --intra-link


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _value(part: str, units: dict[str, float]) -> float | None:
    m = _PART.fullmatch(part)
    if m is None or m.group(2) not in units:
        return None
    return float(m.group(1)) * units[m.group(2)]


def parse_link(text: str | Link | None, what: str = "link") -> Link | None:
    """Parse ``"LATENCY,BANDWIDTH"``; None (or "" / "none") means no emulation.

    Raises:
        ConfigError: naming ``what`` (e.g. ``inter_link``), the string, and the
            expected form.
    """
    if text is None or isinstance(text, Link):
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
    return Link(latency, rate, text=stripped)


def link_from_env(value: str | LinkSpec | None, what: str, env: str) -> LinkSpec | None:
    """``value`` parsed, or environment variable ``env`` when ``value`` is None."""
    if value is None:
        raw = os.environ.get(env, "")
        return parse_link(raw, env) if raw.strip() else None
    return parse_link(value, what)
