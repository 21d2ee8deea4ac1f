"""Files a run reads by path, checked before use.

1. ``check_link_table(path, params)``: a ``--links-from`` calibration (``mpicomm model
   --json``'s ``params``) charges messages only if each table is a measurement: at least
   two sizes, strictly increasing, each within ``bounds.TABLE_BYTES``; α finite and > 0;
   β (seconds per byte beyond α; 0 where a small message took α alone) and γ finite,
   ≥ 0 and within ``bounds.SECONDS_PER_BYTE``; one value per size. Else ``ConfigError``,
   one line naming the file and the field.
2. ``digest(path)`` and ``check_same_everywhere(comm, paths)``: every rank hashes the
   files it will read (``--data``, ``--links-from``, ``--resume``'s checkpoint) and one
   small ``Allgather`` of the digests, at set-up, compares them; a rank that reads other
   bytes (another working folder, another copy on another node) is refused on every rank
   (``ConfigError`` naming the file and the ranks), before any of them is used.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from mpicomm.core import bounds
from mpicomm.core.errors import ConfigError

__all__ = ["check_link_table", "digest", "check_same_everywhere", "DIGEST_BYTES"]


# ------------------------------------------------------------- 1. --links-from tables
def _bad(path: str, field: str, why: str) -> ConfigError:
    return ConfigError(f"--links-from {path}: {field} {why}; measure the links again with "
                       "`mpicomm model --json`")


def _numbers(path: str, field: str, values: Any, lo: float, hi: float,
             above_lo: bool = False) -> list[float]:
    """``values`` as floats, each finite within [lo, hi] (> lo with ``above_lo``)."""
    if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise _bad(path, field, f"is {values!r:.60}, expected a list of numbers")
    for i, v in enumerate(values):
        if not (math.isfinite(v) and lo <= v <= hi) or (above_lo and v <= lo):
            sign = ">" if above_lo else ">="
            raise _bad(path, f"{field}[{i}]", f"is {v!r}, expected a finite number {sign} "
                                              f"{lo:g} and <= {hi:g}")
    return [float(v) for v in values]


def _sizes(path: str, field: str, values: Any) -> list[float]:
    sizes = _numbers(path, field, values, *bounds.TABLE_BYTES)
    if len(sizes) < 2:
        raise _bad(path, field, f"has {len(sizes)} size(s), expected at least two")
    for i in range(1, len(sizes)):
        if sizes[i] <= sizes[i - 1]:
            raise _bad(path, f"{field}[{i}]", f"is {values[i]!r} after {values[i - 1]!r}, "
                                              "expected sizes strictly increasing")
    return sizes


def _alpha(path: str, field: str, value: Any) -> None:
    _numbers(path, field, [value], 0.0, bounds.LATENCY_S[1], above_lo=True)


def _per_size(path: str, field: str, values: Any, n: int) -> None:
    per_byte = _numbers(path, field, values, *bounds.SECONDS_PER_BYTE)
    if len(per_byte) != n:
        raise _bad(path, field, f"has {len(per_byte)} values for {n} sizes")


def check_link_table(path: str, params: Any) -> None:
    """Raise ``ConfigError`` unless ``params`` (a calibration's) holds measured tables (1.)."""
    if not isinstance(params, dict):
        raise _bad(path, "params", "is not an object")
    n_gamma = len(_sizes(path, "gamma_sizes", params.get("gamma_sizes")))
    _per_size(path, "gamma", params.get("gamma"), n_gamma)
    for key in ("intra", "inter"):
        link = params.get(key)
        if not isinstance(link, dict):
            raise _bad(path, key, "is missing")
        n = len(_sizes(path, f"{key}.sizes", link.get("sizes")))
        tables = [(f"{key}", link)]
        if isinstance(link.get("cold"), dict):
            tables.append((f"{key}.cold", link["cold"]))
        for name, table in tables:
            _alpha(path, f"{name}.alpha", table.get("alpha"))
            _per_size(path, f"{name}.beta", table.get("beta"), n)
            if table.get("alpha_x") is not None or table.get("beta_x") is not None:
                _alpha(path, f"{name}.alpha_x", table.get("alpha_x"))
                _per_size(path, f"{name}.beta_x", table.get("beta_x"), n)
    fresh = (params.get("extra") or {}).get("fresh_s_per_byte")
    if fresh is not None:
        _numbers(path, "extra.fresh_s_per_byte", [fresh], *bounds.SECONDS_PER_BYTE)


# ------------------------------------------------------------- 2. the same bytes everywhere
DIGEST_BYTES = 16  # of BLAKE2b: a collision between two copies is not a concern at 2^-64


def digest(path: str) -> bytes:
    """The BLAKE2b digest of the file at ``path`` (``DIGEST_BYTES`` of zeros when missing:
    each reader says why on its own)."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return bytes(DIGEST_BYTES)
    return h.digest()


def check_same_everywhere(comm: Any, paths: dict[str, str | None]) -> None:
    """Raise ``ConfigError`` on every rank of ``comm`` when a file of ``paths`` (flag -> path,
    None when not given) holds other bytes on some rank (2.). Every rank passes the same
    flags in the same order, so the message has one size everywhere. Collective: one
    ``Allgather`` of ``len(paths) × DIGEST_BYTES`` bytes."""
    names = list(paths)
    if not names or comm.Get_size() == 1:
        return
    parts = [digest(paths[k]) if paths[k] else bytes(DIGEST_BYTES) for k in names]
    mine = np.frombuffer(b"".join(parts), dtype=np.uint8)
    every = np.empty((comm.Get_size(), mine.size), dtype=np.uint8)
    comm.Allgather(mine, every)
    for i, name in enumerate(names):
        cut = every[:, i * DIGEST_BYTES:(i + 1) * DIGEST_BYTES]
        differ = np.flatnonzero((cut != cut[0]).any(axis=1))
        if differ.size:
            ranks = ", ".join(map(str, differ))
            raise ConfigError(
                f"--{name.replace('_', '-')} {paths[name]}: rank(s) {ranks} read other bytes "
                f"than rank 0 (another working folder, or another copy on another node); every "
                "rank must read the same file: give a path on a shared file system")
