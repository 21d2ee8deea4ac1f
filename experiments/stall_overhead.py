"""Per-call cost of the stall inspector: one rank, native at 4 KiB, with and without its channel.

    python experiments/stall_overhead.py

The same reducer is timed twice in one process (best of 5 × 20,000 calls): as
built, and with ``stall_channel = None`` (no begin/end bookkeeping).
"""

import time

import numpy as np

import mpicomm


def per_call_us(reducer, buf, calls: int = 20000, repeats: int = 5) -> float:
    """Best mean seconds per ``allreduce`` over ``repeats`` loops, in µs."""
    for _ in range(1000):  # warm-up
        reducer.allreduce(buf)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            reducer.allreduce(buf)
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


def main() -> None:
    with mpicomm.make_reducer("native", validate=False) as r:
        buf = np.ones(1024, dtype=np.float32)
        on = per_call_us(r, buf)
        channel, r.stall_channel = r.stall_channel, None
        off = per_call_us(r, buf)
        r.stall_channel = channel
    print(f"native, 4 KiB, one rank: {on:.3f} us per call with the stall inspector, "
          f"{off:.3f} us without ({on - off:+.3f} us)")


main()
