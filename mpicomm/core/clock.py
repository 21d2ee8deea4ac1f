"""The one clock every timing in mpicomm reads: wall time by default, or a virtual clock.

    from mpicomm.core import clock
    t0 = clock.now(); work(); seconds = clock.now() - t0

``now()`` returns seconds from ``time.perf_counter`` unless a different source is
installed with ``set_source``. The virtual clock (``VirtualClock``, installed by
``mpicomm.p2p.virtual.install``) gives every thread its own timeline:

- compute is charged as the thread's CPU time (``time.thread_time``) times
  ``scale`` (``--compute-scale``);
- ``enter()`` / ``leave(t)`` bracket an MPI call: the CPU time spent inside it
  (MPICH busy-polls) is not charged, and the timeline moves to ``t`` (the modelled
  arrival of what the call waited for) when that is later;
- ``sleep(s)`` charges ``s`` seconds (an injected straggler's delay);
- ``advance_to(t)`` moves this thread's timeline to ``t`` when later (a thread
  that waited for another thread's result).

Training, engines, reducers and traces all read ``now()``, so a run's metrics are
in one clock, which the record names (``name()``). See docs/virtual_clock.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["now", "set_source", "reset", "name", "sleep", "virtual", "VirtualClock"]

_source: Callable[[], float] = time.perf_counter
_name = "wall"
_virtual: VirtualClock | None = None


def now() -> float:
    """Return the current time in seconds of the installed clock (wall: ``perf_counter``).

    ``set_source`` rebinds this name to the source itself, so a read is one call
    (read it as ``clock.now()``, never keep the function across a clock change)."""
    return _source()


def set_source(source: Callable[[], float], label: str) -> None:
    """Install ``source`` as the clock every ``now()`` reads; ``label`` names it in records.

    A ``VirtualClock``'s ``now`` makes ``virtual()`` return that clock."""
    global _source, _name, _virtual, now
    _source, _name = source, label
    now = source
    owner = getattr(source, "__self__", None)
    _virtual = owner if isinstance(owner, VirtualClock) else None


def reset() -> None:
    """Go back to the wall clock."""
    set_source(time.perf_counter, "wall")


def name() -> str:
    """Return the installed clock's name: ``"wall"`` or ``"virtual"``."""
    return _name


def virtual() -> VirtualClock | None:
    """Return the installed virtual clock, or None under the wall clock."""
    return _virtual


def sleep(seconds: float) -> None:
    """Wait ``seconds`` as compute would: sleep, and under the virtual clock also charge them.

    The real sleep stays under the virtual clock so the order in which an
    asynchronous server sees messages (real arrival order) follows the delay."""
    if seconds > 0:
        time.sleep(seconds)
        if _virtual is not None:
            _virtual.charge(seconds)


class _Timeline(threading.local):
    """One thread's virtual time: ``vt`` at CPU time ``cpu``; ``depth`` > 0 inside MPI."""

    def __init__(self) -> None:
        self.vt = 0.0
        self.cpu = time.thread_time()
        self.depth = 0


class VirtualClock:
    """Per-thread virtual timelines (module docstring). ``scale`` multiplies CPU time."""

    def __init__(self, scale: float = 1.0) -> None:
        if not scale > 0:
            raise ValueError(f"compute scale must be > 0, got {scale!r}")
        self.scale = float(scale)
        self._t = _Timeline()

    def now(self) -> float:
        """This thread's virtual time: its last settled time plus the CPU time since, scaled."""
        t = self._t
        if t.depth:
            return t.vt
        return t.vt + (time.thread_time() - t.cpu) * self.scale

    def enter(self) -> float:
        """Settle the compute so far and stop charging CPU time (an MPI call begins)."""
        t = self._t
        if not t.depth:
            c = time.thread_time()
            t.vt += (c - t.cpu) * self.scale
            t.cpu = c
        t.depth += 1
        return t.vt

    def leave(self, until: float = 0.0) -> float:
        """End an MPI call: move to ``until`` when later, charge CPU time again from here."""
        t = self._t
        if until > t.vt:
            t.vt = until
        t.depth -= 1
        if not t.depth:
            t.cpu = time.thread_time()
        return t.vt

    def advance_to(self, until: float) -> None:
        """Move this thread's timeline to ``until`` when it is later."""
        self.enter()
        self.leave(until)

    def charge(self, seconds: float) -> None:
        """Add ``seconds`` to this thread's timeline (a modelled or injected delay)."""
        self._t.vt += seconds


reset()  # from here on ``now`` is the source itself (``perf_counter``): one call per read
