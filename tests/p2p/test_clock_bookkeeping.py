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
    clock_mod.boundary_cost()  # measured (once) before the keys are made slow
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


class _CPU:
    """A CPU clock whose every read costs ``cost`` seconds of CPU time, half before its
    sample and half after (a system call), and which moves on only by reads and ``work``."""

    def __init__(self, cost: float) -> None:
        self.t, self.cost = 1.0, cost

    def __call__(self) -> float:
        self.t += self.cost / 2
        sample = self.t
        self.t += self.cost / 2
        return sample

    def work(self, seconds: float) -> None:
        self.t += seconds


def test_the_cpu_clocks_own_reads_are_not_charged(monkeypatch):
    cost, work = 0.6e-6, 5e-6
    cpu = _CPU(cost)
    monkeypatch.setattr(time, "thread_time", cpu)
    monkeypatch.setattr(clock_mod, "_boundary_cost", None)  # measured again, on this CPU clock
    assert abs(clock_mod.boundary_cost() - cost) < 1e-12
    for least in (False, True):
        c = VirtualClock(1.0, least=least)
        for _ in range(3):
            t0 = c.now()
            t1 = c.now()  # an empty segment: one read's worth of CPU time, the clock's
            c.enter(64)
            cpu.work(1e-3)  # inside MPI: never charged
            c.leave()
            cpu.work(work)  # the program's compute: charged, all of it
            t2 = c.now()
            assert abs(t1 - t0) < 1e-12, (least, t1 - t0)
            assert abs(t2 - t1 - work) < 1e-12, (least, t2 - t1)


def test_boundary_cost_is_measured_once_and_is_a_real_reads_cost():
    first = clock_mod.boundary_cost()
    assert 0 < first < 1e-3  # a read of the CPU clock: well under a millisecond
    assert clock_mod.boundary_cost() == first
    assert VirtualClock(1.0).overhead == first
    assert VirtualClock(1.0, overhead=0.0).overhead == 0.0


def _charged(mark) -> list[float]:
    """Charges of segments that alternate between a big and a small piece of work, each ended
    by one line (``mark``) followed by another boundary (a bucket handed over, say)."""
    c = VirtualClock(1.0)
    charged, prev = [], c.now()
    for _ in range(3):
        for i, work in enumerate((0.004, 0.0004)):
            _spin(work)
            t = mark(c, i)
            charged.append(t - prev)
            prev = c.now()  # the other boundary: the sites alternate
    return charged


def test_one_line_ending_different_work_is_told_apart_by_its_hint():
    """Per-layer trace events (one line for every layer, between bucket hand-overs) shared a
    segment key: every layer's backward was charged the cheapest layer's CPU time, so a traced
    virtual run was 4x faster in backward than the same run untraced."""
    same = _charged(lambda c, i: c.now())
    told = _charged(lambda c, i: c.stamp(i))
    assert max(same[2::2]) < 0.002, same  # now(): the big work charged the small one's time
    assert min(told[::2]) >= 0.0035, told  # stamp(i): each its own
    assert max(told[1::2]) < 0.002, told
