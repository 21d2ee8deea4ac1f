"""The one clock every timing in mpicomm reads: wall time by default, or a virtual clock.

    from mpicomm.core import clock
    t0 = clock.now(); work(); seconds = clock.now() - t0

``now()`` returns seconds from ``time.perf_counter`` unless a different source is
installed with ``set_source`` (the virtual clock of ``mpicomm.p2p`` installs its
own: compute charged as thread CPU time, messages by the cluster model). Training,
engines, reducers and traces all read this one function, so a run's metrics are in
one clock, which the record names (``name()``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["now", "set_source", "reset", "name"]

_source: Callable[[], float] = time.perf_counter
_name = "wall"


def now() -> float:
    """Return the current time in seconds of the installed clock (wall: ``perf_counter``)."""
    return _source()


def set_source(source: Callable[[], float], label: str) -> None:
    """Install ``source`` as the clock every ``now()`` reads; ``label`` names it in records."""
    global _source, _name
    _source, _name = source, label


def reset() -> None:
    """Go back to the wall clock."""
    set_source(time.perf_counter, "wall")


def name() -> str:
    """Return the installed clock's name: ``"wall"`` or ``"virtual"``."""
    return _name
