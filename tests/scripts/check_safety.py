"""Rank script: the base class's safety (issue 17 item 6) and keyed error feedback.

1. Two threads on one reducer: the second gets a RuntimeError, never a wrong sum.
2. A reducer owned by an AsyncReducer refuses the main thread's direct call and a second
   AsyncReducer.
3. top-k residuals follow the caller's key, never the buffer's address: a fresh
   all-zero buffer under a new key returns zeros; equal-length buckets staged
   through one reused host buffer (as CuPy without CUDA-aware MPI) keep separate
   residuals; ``codec_state`` / ``load_codec_state`` restore them exactly.
"""

import threading

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.engine.async_reducer import AsyncReducer

comm = MPI.COMM_WORLD
p, me = comm.Get_size(), comm.Get_rank()
problems: list[str] = []

# 1. a second concurrent call from another thread
def _try(red, out):
    try:
        red.allreduce(np.ones(10))
    except RuntimeError as e:
        out.append(str(e))


with mpicomm.make_reducer("ring") as r:
    r._lock.acquire()  # as if the other thread were inside allreduce right now
    errors: list[str] = []
    t = threading.Thread(target=_try, args=(r, errors))
    t.start()
    t.join()
    r._lock.release()
    if not errors or "another call is running" not in errors[0]:
        problems.append(f"concurrent call not refused: {errors}")
    x = np.ones(10)
    if not np.array_equal(r.allreduce(x), np.full(10, float(p))):
        problems.append("reducer unusable after a refused call")

# 2. owned by an AsyncReducer
with mpicomm.make_reducer("ring") as r:
    ar = AsyncReducer(r)
    try:
        r.allreduce(np.ones(4))
        problems.append("direct call on an owned reducer was accepted")
    except RuntimeError as e:
        if "AsyncReducer" not in str(e):
            problems.append(f"unclear message: {e}")
    try:  # a second AsyncReducer would take the reducer over from the first's thread
        AsyncReducer(r).close()
        problems.append("a second AsyncReducer on an owned reducer was accepted")
    except RuntimeError as e:
        if "already belongs to an AsyncReducer" not in str(e):
            problems.append(f"unclear message: {e}")
    w = ar.allreduce_async(np.ones(4))
    if not np.array_equal(w.wait(), np.full(4, float(p))):
        problems.append("async sum wrong")
    ar.close()
    r.allreduce(np.ones(4))  # free again after close

# 3. keyed residuals
rng = np.random.default_rng([7, me])
with mpicomm.make_reducer("ring", compress="topk:0.1") as r:
    a = rng.standard_normal(100).astype(np.float32)
    r.allreduce(a.copy(), key="a")  # leaves a residual under "a"
    if not r.codec_state()["a"].any():
        problems.append("no residual kept")
    z = np.zeros(100, dtype=np.float32)
    if r.allreduce(z, key="fresh").any():
        problems.append("a fresh zero buffer under a new key returned non-zeros")
    # staging: both buckets pass through one host buffer, as the CuPy staging path does
    stage = np.empty(64, dtype=np.float32)
    b0, b1 = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    with mpicomm.make_reducer("ring", compress="topk:0.1") as ref:
        for step in range(3):
            for key, b in ((0, b0), (1, b1)):
                stage[:] = b
                got = r.allreduce(stage, key=key).copy()
                want = ref.allreduce(b.copy(), key=f"only{key}")
                if not np.array_equal(got, want):
                    problems.append(f"bucket {key} step {step}: residuals mixed")
    try:  # the real staging path when CuPy (or the tests' stand-in) is importable
        import cupy as xp
    except ImportError:
        xp = None
    if xp is not None:
        with mpicomm.make_reducer("ring", compress="topk:0.1", cuda_aware=False) as dev, \
                mpicomm.make_reducer("ring", compress="topk:0.1") as ref:
            for step in range(3):
                for key, b in ((10, b0), (11, b1)):
                    got = xp.asnumpy(dev.allreduce(xp.asarray(b), key=key))
                    want = ref.allreduce(b.copy(), key=key)
                    if not np.array_equal(got, want):
                        problems.append(f"device bucket {key} step {step}: residuals mixed")
    saved = r.codec_state()
    out1 = r.allreduce(b0.copy(), key=0)
    r.load_codec_state(saved)
    out2 = r.allreduce(b0.copy(), key=0)
    if not np.array_equal(out1, out2):
        problems.append("load_codec_state did not restore the residual")
report(ok=not problems, error="; ".join(problems) or None)
