"""Rank script: the hot path (a plan per agreed layout) keeps every guarantee of the checked path.

For each strategy given (default: native, ring, tree), against a twin reducer with
``validate=True`` (which never plans, so every call takes the checked path):

1. a layout's second call takes the plan (``_checked_allreduce`` is not called), a new
   layout or op does not; results are bitwise equal to the twin's and the stats
   (bytes, messages, calls) equal too, in float32 and float64, sum and mean, lengths
   with uneven segments;
2. on a planned layout that the hot path has taken: a non-contiguous, a read-only or a 2-D
   buffer of that size and an unknown op are refused (or, 2-D, reduced) exactly as before —
   before any message (no byte counted, the next call sums right);
2b. the hot path's cache (length -> the last call's dtype object, op string and plan)
   never serves a stale plan: the same length in another dtype or with another op takes
   the checked path and sums right; an equal dtype that is another object takes the plan;
3. on a planned layout: a second concurrent call and a call while an AsyncReducer owns
   the reducer are refused; after ``close()`` a call is refused;
4. NaN and inf travel through the plan as through MPI (NaN stays NaN, inf stays inf);
5. with tracing on, the ring's plan sends through the transport (its messages are on
   the timeline) and counts them once; with emulated links and under the virtual clock
   (1. again) it always does;
6. the stall inspector's per-call log has one entry per call on the hot path;
7. a subclass of ``native`` or ``ring`` that overrides ``_allreduce`` is called on a
   planned layout too (the strategies' direct plans are theirs alone).

Usage: ``check_hot_path.py [STRATEGY ...]``
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
from mpicomm.core import trace
from mpicomm.core.options import ReducerOptions
from mpicomm.engine.async_reducer import AsyncReducer
from mpicomm.reducers.native import NativeReducer
from mpicomm.reducers.ring import RingReducer

comm = MPI.COMM_WORLD
p, me = comm.Get_size(), comm.Get_rank()
problems: list[str] = []
TRAFFIC = ("bytes_sent", "bytes_recv", "inter_bytes_sent", "inter_bytes_recv",
           "messages_sent", "messages_recv", "calls")


def counting(r):
    """Count the reducer's checked-path calls from here on."""
    seen = []
    inner = r._checked_allreduce

    def wrapped(buf, op, key):
        seen.append((buf.size, op))
        inner(buf, op, key)

    r._checked_allreduce = wrapped
    return seen


def same_as_checked(name: str, **options) -> None:
    """1. plans taken, results and stats equal to the always-checked twin's."""
    fast = mpicomm.make_reducer(name, **options)
    twin = mpicomm.make_reducer(name, validate=True, **options)
    checked = counting(fast)
    rng = np.random.default_rng([11, me])
    for dtype in (np.float32, np.float64):
        for n in (1, p + 1, 257, 1001):
            for op in ("sum", "mean"):
                for call in range(3):
                    x = rng.standard_normal(n).astype(dtype)
                    y = x.copy()
                    fast.allreduce(x, op=op)
                    twin.allreduce(y, op=op)
                    if not np.array_equal(x, y):
                        problems.append(f"{name} {dtype.__name__} n={n} {op} call {call}: "
                                        "hot path differs from the checked path")
    layouts = 2 * 4 * 2
    if len(checked) != layouts:
        problems.append(f"{name}: {len(checked)} checked calls for {layouts} layouts "
                        f"(3 calls each): the plan was not taken")
    for field in TRAFFIC:
        a, b = getattr(fast.stats, field), getattr(twin.stats, field)
        if a != b:
            problems.append(f"{name}: stats.{field} {a} on the hot path, {b} checked")
    fast.close()
    twin.close()


def refusals(name: str) -> None:
    """2.-4. on a layout that has a plan."""
    r = mpicomm.make_reducer(name)
    x = np.ones(64)
    r.allreduce(x)
    r.allreduce(x)  # the second call: the hot path's cache holds this layout
    checked = counting(r)
    sent = r.stats.bytes_sent
    expect_raises(problems, ValueError, "not contiguous",
                  lambda: r.allreduce(np.ones(128)[::2]))
    ro = np.ones(64)
    ro.flags.writeable = False
    expect_raises(problems, ValueError, "read-only", lambda: r.allreduce(ro))
    expect_raises(problems, ValueError, "unknown op", lambda: r.allreduce(x, op="max"))
    if r.stats.bytes_sent != sent:
        problems.append(f"{name}: refused calls counted {r.stats.bytes_sent - sent} bytes")
    two_d = np.ones((8, 8))
    r.allreduce(two_d)  # same size, not 1-D: the checked path reduces it
    if not np.array_equal(two_d, np.full((8, 8), float(p))):
        problems.append(f"{name}: 2-D buffer of a planned size summed wrong")
    # the op and the 2-D buffer take the checked path; the others are refused there too,
    # or by a plan that tests the buffer itself (native: mpi4py, before the call sends)
    if not 2 <= len(checked) <= 4 or (64, "max") not in checked:
        problems.append(f"{name}: refused/2-D calls did not take the checked path: {checked}")
    nan = np.ones(64)
    nan[3], nan[5] = np.nan, np.inf
    r.allreduce(nan)
    if not (np.isnan(nan[3]) and np.isposinf(nan[5]) and (np.delete(nan, [3, 5]) == p).all()):
        problems.append(f"{name}: NaN/inf not kept on the hot path: {nan[:8]}")
    r._lock.acquire()  # as if another thread were inside allreduce
    expect_raises(problems, RuntimeError, "another call is running", lambda: r.allreduce(x))
    r._lock.release()
    ar = AsyncReducer(r)
    expect_raises(problems, RuntimeError, "AsyncReducer", lambda: r.allreduce(x))
    if not np.array_equal(ar.allreduce_async(np.ones(64)).wait(), np.full(64, float(p))):
        problems.append(f"{name}: the owner's call on a planned layout summed wrong")
    ar.close()
    ch, before = r.stall_channel, len(r.stall_channel.waited)
    for _ in range(5):
        r.allreduce(x)
    if len(ch.waited) != before + 5 or ch.since() is not None:  # 6.
        problems.append(f"{name}: stall log has {len(ch.waited) - before} entries for 5 calls")
    r.close()
    expect_raises(problems, RuntimeError, "closed", lambda: r.allreduce(x))


def no_stale_plan(name: str) -> None:
    """2b. same length, another dtype or op: the checked path, never the cached plan."""
    r = mpicomm.make_reducer(name)
    x = np.ones(64)
    r.allreduce(x)
    r.allreduce(x)  # cached: 64 float64 "sum"
    checked = counting(r)
    for call, (buf, op, want) in enumerate([
            (np.ones(64, dtype=np.float32), "sum", float(p)),
            (np.ones(64), "mean", 1.0),
            (np.ones(64, dtype=np.float32), "mean", 1.0),
            (np.ones(64), "sum", float(p))]):
        r.allreduce(buf, op=op)
        if not (buf == want).all():
            problems.append(f"{name} call {call} ({buf.dtype}, {op}): {buf[:3]}, want {want}")
    if [c for c in checked] != [(64, "sum"), (64, "mean"), (64, "mean")]:
        problems.append(f"{name}: new dtype/op on a cached length: checked calls {checked}")
    same = np.dtype("f8", metadata={"another": "object"})  # equal to float64, not identical
    for _ in range(2):
        y = np.ones(64).view(same)
        r.allreduce(y)
        if not (y == p).all():
            problems.append(f"{name}: an equal dtype object summed wrong: {y[:3]}")
    if len(checked) != 3:
        problems.append(f"{name}: an equal dtype object took the checked path ({checked})")
    r.close()


def traced_ring() -> None:
    """5. tracing on: the plan's messages go through the transport, on the timeline."""
    r = mpicomm.make_reducer("ring")
    x = np.ones(100)
    r.allreduce(x)
    sent = r.stats.messages_sent
    rec = trace.Recorder()
    trace.set_active(rec)
    try:
        r.allreduce(x)
    finally:
        trace.set_active(None)
    msgs = [e for e in rec.events if e.cat == "p2p"]
    if len(msgs) != 2 * (p - 1) or r.stats.messages_sent - sent != 2 * (p - 1):
        problems.append(f"ring traced: {len(msgs)} events, "
                        f"{r.stats.messages_sent - sent} counted, want {2 * (p - 1)}")
    r.close()


def overridden() -> None:
    """7. every call of a subclass that overrides ``_allreduce`` runs its override."""
    for base in (NativeReducer, RingReducer):
        class Plus(base):
            def _allreduce(self, flat, scale):
                super()._allreduce(flat, scale)
                flat[0] += 1

        r = Plus(comm, ReducerOptions.from_kwargs("check_hot_path"))
        for call in range(3):
            x = np.ones(16)
            r.allreduce(x)
            if x[0] != p + 1:
                problems.append(f"{base.name} subclass, call {call}: override skipped ({x[0]})")
        r.close()


overridden()
for strategy in sys.argv[1:] or ["native", "ring", "tree"]:
    same_as_checked(strategy)
    refusals(strategy)
    no_stale_plan(strategy)
if p > 1:
    traced_ring()
    # emulated links: the plan is the algorithm through the emulating transport
    same_as_checked("ring", ranks_per_node=1, inter_link="1us,10GB/s")
# the virtual clock takes the plans too (it charges the path a cluster's run takes); the
# ring's sends through the virtual transport, which times and counts every message
for strategy in ("native", "ring"):
    same_as_checked(strategy, clock="virtual")
    # the call's buffer reaches the transport (the virtual clock's cache model), both paths
    r = mpicomm.make_reducer(strategy, clock="virtual")
    for n in (300, 300, 50):  # checked, planned, checked
        r.allreduce(np.ones(n))
        if r.p2p.footprint != 8 * n:
            problems.append(f"{strategy}: transport footprint {r.p2p.footprint}, want {8 * n}")
    r.close()
report(ok=not problems, error="; ".join(problems) or None)
