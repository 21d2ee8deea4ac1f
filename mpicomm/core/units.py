"""Numbers for people and for files: the one byte formatter, finite cells, strict JSON.

Every table and reading in mpicomm formats sizes with ``fmt_bytes`` and guards
its numbers with ``finite``/``fmt_num``, so a rank count of one, a zero-time
link or an empty sample prints ``-`` instead of ``inf``, ``nan`` or a
300-digit number; ``jsonable`` makes a result document strict JSON (no
``Infinity``/``NaN``: they become ``null``).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from mpicomm.core.links import Link

__all__ = ["fmt_bytes", "fmt_us", "finite", "fmt_num", "jsonable", "MISSING", "parse_bytes",
           "SizeError"]

MISSING = "-"  # the cell of a value that was not measured or is not finite
_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_DECIMAL = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))


def finite(x: Any) -> float | None:
    """Return ``x`` as a float when it is a finite number, else None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_bytes(nbytes: Any, *, binary: bool = True, digits: int = 3) -> str:
    """Format a byte count: ``64 MiB``, ``1.5 KiB``, ``8 B`` (``binary=False``: ``2.4 MB``).

    Exact multiples of a unit print without decimals; others with ``digits``
    significant digits. Non-finite or negative counts print ``-``.
    """
    v = finite(nbytes)
    if v is None or v < 0:
        return MISSING
    for unit, k in _BINARY if binary else _DECIMAL:
        if v >= k:
            q = v / k
            return f"{int(q)} {unit}" if q == int(q) else f"{q:.{digits}g} {unit}"
    return f"{v:.0f} B"


def fmt_us(us: float) -> str:
    """Format a time given in µs with 3 significant digits: ``998 us``, ``1.23 ms``, ``1 s``.

    Rounded first, so 999.96 µs is ``1 ms``, never ``1e+03 us``."""
    us = float(f"{us:.3g}")
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else \
        f"{us:.3g} us"


def fmt_num(x: Any, spec: str = ".3g", scale: float = 1.0) -> str:
    """Format ``x * scale`` with ``spec``; ``-`` when it is missing, infinite or absurd (> 1e15)."""
    v = finite(x)
    if v is None or abs(v * scale) > 1e15:
        return MISSING
    return format(v * scale, spec)


def jsonable(value: Any) -> Any:
    """Return ``value`` with NumPy scalars as Python ones, tuples as lists, NaN/inf as None,
    a ``Link`` as its text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        try:
            value = value.item()  # NumPy scalar (a 0-d array too)
        except (ValueError, TypeError):
            value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Link):  # a profile's link in the options: as its flag would read
        return str(value)
    return value


class SizeError(ValueError, argparse.ArgumentTypeError):
    """Not a size: a ``ValueError`` that argparse prints as a usage error."""


def parse_bytes(text: str | int) -> int:
    """Parse ``8``, ``4K``, ``64M``, ``1G`` (powers of 1024) into bytes; ``SizeError`` if not."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = str(text).strip().upper().removesuffix("B")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise SizeError(f"not a size: {text!r} (e.g. 8, 4K, 64M)") from None
