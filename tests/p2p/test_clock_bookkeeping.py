"""The virtual clock does not charge its own bookkeeping as the program's compute.

Building a boundary's key (its call sites) and keeping the table of least times cost
~4 us a boundary on a VM; charged, they doubled a 2-rank allreduce's virtual time at
4 KiB, which the wall clock never sees (experiments/virtual_vs_wall.py).
"""

import time

from mpicomm.core import clock as clock_mod
from mpicomm.core.clock import VirtualClock

SLOW = 0.002  # seconds of CPU time the key's construction is made to take


def _spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_building_a_boundarys_key_is_not_charged(monkeypatch):
    real = clock_mod._site

    def slow_site(hint, depth):
        _spin(SLOW)
        return real(hint, depth + 1)

    monkeypatch.setattr(clock_mod, "_site", slow_site)
    for least in (False, True):
        c = VirtualClock(1.0, least=least)
        t0 = c.now()
        t1 = c.now()  # nothing between: only the clock's own work
        c.enter(8)
        c.leave()
        t2 = c.now()
        _spin(SLOW)  # the program's compute is still charged
        t3 = c.now()
        assert t1 - t0 < SLOW / 2, (least, t1 - t0)
        assert t2 - t1 < SLOW / 2, (least, t2 - t1)
        assert t3 - t2 >= SLOW, (least, t3 - t2)
