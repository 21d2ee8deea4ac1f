"""The one clock every timing in mpicomm reads: wall time by default, or a virtual clock.

    from mpicomm.core import clock
    t0 = clock.now(); work(); seconds = clock.now() - t0

``now()`` returns seconds from ``time.perf_counter`` unless a different source is
installed with ``set_source``. The virtual clock (``VirtualClock``, installed by
``mpicomm.p2p.virtual.install``) gives every thread its own timeline:

- compute is charged by the device model (``charge_cpu`` False, the default that
  ``mpicomm.core.flops.use`` installs for a modelled ``--accelerator``): only what
  ``core.flops`` reports (matmuls, elementwise kernels, reductions) is charged, through
  ``charge``; the thread's CPU time is not read at all;
- with ``--accelerator host`` (``charge_cpu`` True) compute is charged as the thread's
  CPU time (``time.thread_time``) times ``scale`` (``--compute-scale``), per *segment*:
  the compute between two boundaries (an MPI call's ``enter``, a ``now()`` outside
  MPI) is charged the least CPU time any segment with the same key took so far (key: the call sites
  and sizes of both boundaries, and how many boundaries in a row had this site:
  the k-th of a loop's boundaries ends different work than the first).
  Interference from other processes (cache refills, migrations: +12% median,
  up to +46% for a matmul loop on 2 loaded cores) only ever adds CPU time, and a
  rank of the modelled cluster has its core to itself, so the least time seen is
  the best estimate of the uncontended cost and the run's times do not move with
  the host's load (after SimGrid/SMPI's sampled compute blocks, ``SMPI_SAMPLE_*``).
  Under ``--links-from`` a calibration's ``cpu_share`` (wall seconds per CPU second of a
  rank while every rank computes: 2 for 4 ranks on 2 cores) multiplies it as well
  (``cpu_share``): the hosts the calibration measured share their cores that way;
  A segment is charged its CPU time less ``boundary_cost()``, what the clock itself
  puts into every segment (one read's worth of the CPU clock, a system call of ~0.6 us
  on a VM, and the clock's calls around it), as Python's ``profile`` subtracts its
  calibrated ``bias`` per event: the instrument's cost is not the program's;
- ``enter()`` / ``leave(t)`` bracket an MPI call: the CPU time spent inside it
  (MPICH busy-polls) is not charged, and the timeline moves to ``t`` (the modelled
  arrival of what the call waited for) when that is later;
- ``sleep(s)`` charges ``s`` seconds (an injected straggler's delay);
- ``advance_to(t)`` moves this thread's timeline to ``t`` when later (a thread
  that waited for another thread's result);
- ``fold`` (``--fold F``, 1 by default): the run's buffers hold 1/F of each gradient
  tensor's elements (SimGrid/SMPI's shared-malloc idea), and what is charged by the size
  of a buffer is charged F times: a message's bytes (``core.flops.wire_nbytes``) and an
  elementwise kernel over a buffer (``core.flops.charge``). The one factor, read there.

Training, engines, reducers and traces all read ``now()``, so a run's metrics are
in one clock, which the record names (``name()``). See docs/virtual_clock.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

__all__ = ["now", "stamp", "set_source", "reset", "name", "sleep", "virtual", "VirtualClock",
           "boundary_cost", "fold"]

_source: Callable[[], float] = time.perf_counter
_name = "wall"
_virtual: VirtualClock | None = None


def now() -> float:
    """Return the current time in seconds of the installed clock (wall: ``perf_counter``).

    ``set_source`` rebinds this name to the source itself, so a read is one call
    (read it as ``clock.now()``, never keep the function across a clock change)."""
    return _source()


def stamp(hint: int) -> float:
    """``now()``, with ``hint`` (a small int: a layer's index) in the key of the compute
    segment it ends under the virtual clock. Use it where one line of code marks the end
    of different work each time (a trace event per layer): with ``now()`` those segments
    would share a key and all be charged the cheapest one's CPU time."""
    if _virtual is None:
        return _source()
    return _virtual.stamp(hint)


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


def fold() -> int:
    """The installed virtual clock's ``fold`` (module docstring): 1 under the wall clock."""
    return 1 if _virtual is None else _virtual.fold


def sleep(seconds: float) -> None:
    """Wait ``seconds`` as compute would: sleep, and under the virtual clock also charge them.

    The real sleep stays under the virtual clock so the order in which an
    asynchronous server sees messages (real arrival order) follows the delay."""
    if seconds > 0:
        time.sleep(seconds)
        if _virtual is not None:
            _virtual.charge(seconds)


REPEATS = 255  # boundaries in a row at one site told apart (beyond: one key, bounded memory)
SITE_FRAMES = 5  # call-site frames above a boundary that name it (enough to tell a reducer's steps)
BOUNDARY_SAMPLES = 2000  # empty segments behind ``boundary_cost`` (~3 ms)
_boundary_cost: float | None = None


def boundary_cost() -> float:
    """CPU seconds the clock itself puts into every compute segment: the least CPU time of
    a segment with nothing in it (two ``now()`` back to back, on a clock that subtracts
    nothing), measured once per process.

    A segment runs from the CPU-clock read that ends one boundary to the read in the next
    one, so besides the program's code it holds one read's worth of the system call (its
    tail and the next one's head: ~0.6 us on a VM, where ``CLOCK_THREAD_CPUTIME_ID`` is
    a real system call) and the clock's calls around it, which the program without the
    clock never spends (as ``profile`` subtracts its calibrated bias per event)."""
    global _boundary_cost
    if _boundary_cost is None:
        probe, best = VirtualClock(1.0, least=False, overhead=0.0), float("inf")
        now = probe.now
        for _ in range(BOUNDARY_SAMPLES):
            a = now()
            b = now()
            if b - a < best:
                best = b - a
        _boundary_cost = best if best > 0.0 else 0.0
    return _boundary_cost


def _site(hint: int, depth: int) -> tuple:
    """The key of a segment boundary: ``hint`` (a size) and the code lines of the callers."""
    f = sys._getframe(depth)
    key: list = [hint]
    for _ in range(SITE_FRAMES):
        if f is None:
            break
        key.append((f.f_code, f.f_lineno))
        f = f.f_back
    return tuple(key)


class _Timeline(threading.local):
    """One thread's virtual time: ``vt`` at CPU time ``cpu``; ``depth`` > 0 inside MPI;
    ``site`` the key of the boundary that began the current compute segment."""

    def __init__(self) -> None:
        self.vt = 0.0
        self.cpu = time.thread_time()
        self.depth = 0
        self.site: tuple = ()
        self.repeat = 0  # boundaries in a row at the same site (a loop of submits, say)


class VirtualClock:
    """Per-thread virtual timelines (module docstring). ``scale`` multiplies CPU time;
    ``least=False`` charges every segment its own CPU time (no per-key minimum);
    ``overhead``: CPU seconds of the clock's own taken off every segment (default
    ``boundary_cost()``). ``charge_cpu``: False under the device model (only ``charge``
    adds compute; ``core.flops`` sets it). ``fold``: what a buffer's size charges is
    charged this many times (module docstring; ``mpicomm.p2p.virtual.set_fold`` sets it)."""

    fold = 1

    def __init__(self, scale: float = 1.0, least: bool = True,
                 overhead: float | None = None) -> None:
        if not scale > 0:
            raise ValueError(f"compute scale must be > 0, got {scale!r}")
        self.scale = float(scale)
        self.cpu_share = 1.0  # wall per CPU second of a rank on its host (``--links-from``)
        self.least = least
        self.overhead = boundary_cost() if overhead is None else float(overhead)
        self._t = _Timeline()
        self._best: dict[tuple, float] = {}  # segment key -> least CPU seconds seen
        self._charge_cpu = True

    @property
    def charge_cpu(self) -> bool:
        """True: compute is the threads' CPU time (host); False: only ``charge`` (device)."""
        return self._charge_cpu

    @charge_cpu.setter
    def charge_cpu(self, on: bool) -> None:
        if on and not self._charge_cpu:
            self._t.cpu = time.thread_time()  # this thread's next segment starts now
        self._charge_cpu = bool(on)

    def _settle(self, t: _Timeline, hint: int) -> None:
        """Charge the segment that ends here (its key's least CPU time) and start the next.

        The CPU clock is read before the key is built: the clock's own bookkeeping (the
        call sites, the table of least times: ~4 us a boundary) is not the program's
        compute; ``now`` reads it again after, so the next segment starts clean too."""
        c = time.thread_time()
        site = _site(hint, 3)
        spent = c - t.cpu - self.overhead  # less the clock's own share (``boundary_cost``)
        if spent < 0.0:
            spent = 0.0
        if self.least:
            t.repeat = min(t.repeat + 1, REPEATS) if site == t.site else 0
            key = (t.site, site, t.repeat)
            best = self._best.get(key)
            if best is None or spent < best:
                self._best[key] = best = spent
            spent = best
        t.vt += spent * self.scale * self.cpu_share
        t.cpu = c
        t.site = site

    def now(self) -> float:
        """This thread's virtual time; outside MPI this ends a compute segment (it is charged)."""
        t = self._t
        if not t.depth and self._charge_cpu:
            self._settle(t, -1)
            t.cpu = time.thread_time()
        return t.vt

    def stamp(self, hint: int) -> float:
        """``now()`` whose segment key holds ``hint`` (module ``stamp``)."""
        t = self._t
        if not t.depth and self._charge_cpu:
            self._settle(t, -3 - hint)
            t.cpu = time.thread_time()
        return t.vt

    def enter(self, hint: int = 0) -> float:
        """Settle the compute so far and stop charging CPU time (an MPI call begins).

        ``hint``: a size naming the call (bytes), part of the segment's key."""
        t = self._t
        if not t.depth and self._charge_cpu:
            self._settle(t, hint)
        t.depth += 1
        return t.vt

    def leave(self, until: float = 0.0) -> float:
        """End an MPI call: move to ``until`` when later, charge CPU time again from here."""
        t = self._t
        if until > t.vt:
            t.vt = until
        t.depth -= 1
        if not t.depth and self._charge_cpu:
            t.cpu = time.thread_time()
        return t.vt

    def advance_to(self, until: float) -> None:
        """Move this thread's timeline to ``until`` when it is later."""
        t = self._t
        if not t.depth and self._charge_cpu:
            self._settle(t, -2)
        if until > t.vt:
            t.vt = until
        if not t.depth and self._charge_cpu:
            t.cpu = time.thread_time()

    def charge(self, seconds: float) -> None:
        """Add ``seconds`` to this thread's timeline (a modelled or injected delay)."""
        self._t.vt += seconds


reset()  # from here on ``now`` is the source itself (``perf_counter``): one call per read
