"""The timeline seam: one recorder per process, or none (tracing off costs one ``is None`` test).

Every layer that wants to appear on the timeline asks ``active()`` and, when a
recorder is set, hands it complete events (name, category, start, end, thread,
arguments). The p2p layer records each message (peer, bytes); the sync engine
records buckets and waits; the training loop records forward, backward per layer
and the optimizer. Writing the events out (a Chrome-trace JSON that Perfetto and
chrome://tracing open) is the application's business, not this module's.

Times are ``mpicomm.core.clock.now()`` seconds (wall ``perf_counter``, or the virtual
clock's time of the recording thread); the writer aligns the ranks' clocks.

    rec = Recorder()
    set_active(rec)
    ...
    t0 = clock.now(); work(); rec.complete("work", "compute", t0, clock.now())
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpicomm.core import clock

__all__ = ["Event", "Recorder", "active", "set_active", "flush_active"]


@dataclass(slots=True)
class Event:
    """One complete event: ``name`` lasted from ``start`` to ``end`` (seconds) on ``thread``."""

    name: str
    cat: str
    start: float
    end: float
    thread: str
    args: dict[str, Any] | None = None


@dataclass
class Recorder:
    """Collects events from every thread of this process (appends are atomic under the GIL).

    Attributes:
        events: the events recorded so far, in the order they ended.
        enabled: False pauses recording (e.g. outside ``--trace-steps``) without
            removing the recorder.
        flush: the writer's flush, for ``flush_active`` (None: nothing to write to).
        steps: ``[A, B)`` for a process that has no steps of its own (a parameter
            server): it records while the step it serves, told by ``at_step``, is inside.
    """

    events: list[Event] = field(default_factory=list)
    enabled: bool = True
    flush: Callable[[], None] | None = None  # writes the events out (set by the application)
    steps: tuple[int, int] | None = None  # a process without steps of its own: see at_step

    def complete(self, name: str, cat: str, start: float, end: float,
                 thread: str | None = None, **args: Any) -> None:
        """Record one event; ``thread`` defaults to the calling thread's name."""
        if self.enabled:
            if thread is None:
                thread = threading.current_thread().name
            self.events.append(Event(name, cat, start, end, thread, args or None))

    def at_step(self, step: int) -> None:
        """The step this process now works for (a server: the push it received); with
        ``steps`` set, record only inside them (``--trace-steps``) and write the events out
        on leaving them, as the workers do (a later failure loses nothing). Else nothing."""
        if self.steps is not None:
            inside = self.steps[0] <= step < self.steps[1]
            if self.enabled and not inside and self.flush is not None:
                self.flush()
            self.enabled = inside


_active: Recorder | None = None


def active() -> Recorder | None:
    """Return the recorder in use, or None when tracing is off."""
    return _active


def set_active(recorder: Recorder | None) -> None:
    """Install ``recorder`` for this process (None turns tracing off)."""
    global _active
    _active = recorder


def flush_active() -> None:
    """Write out the active recorder's events now, before this process ends the job.

    For a path that aborts the job from a library layer (the stall inspector's
    ``MPI.Abort``): what this rank recorded reaches the trace file instead of dying
    with it. Never raises: the abort must go on whatever the file system says.
    """
    rec = _active
    if rec is not None and rec.flush is not None:
        try:
            rec.flush()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def backward_layer(rec: Recorder, layer: int, t: float) -> float:
    """Record "backward layer ``layer``" from ``t`` to now on the training thread; return now.

    The engines call it as backward yields each layer: one line ending every layer's work,
    so its clock read carries the layer's index (``clock.stamp``), or the virtual clock
    would charge every layer the cheapest one's CPU time."""
    now = clock.stamp(layer)
    rec.complete(f"backward layer {layer}", "backward", t, now, thread="training")
    return now
