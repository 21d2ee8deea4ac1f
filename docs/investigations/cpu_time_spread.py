"""How much a loaded host inflates CPU time: the spread of a fixed matmul loop's thread CPU time.

    PYTHONPATH=$PWD python docs/investigations/cpu_time_spread.py [REPEATS]

Each repeat runs 20 × (8 layers of tanh(64×512 @ 512×512 · 0.01)) on one BLAS thread and
reads ``time.thread_time``. Prints the median, least and largest CPU time and median/least:
the inflation the virtual clock's least-CPU-time charge removes (docs/virtual_clock.md).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from mpicomm.train.blas import limit_blas_threads


def main(repeats: int = 100) -> None:
    limit_blas_threads(1)
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((64, 512)), rng.standard_normal((512, 512))

    def work() -> None:
        x = a
        for _ in range(8):
            x = np.tanh(x @ w * 0.01)

    for _ in range(20):
        work()
    cpu = np.empty(repeats)
    for k in range(repeats):
        t0 = time.thread_time()
        for _ in range(20):
            work()
        cpu[k] = time.thread_time() - t0
    print(f"cpu ms: median {np.median(cpu) * 1e3:.2f}  least {cpu.min() * 1e3:.2f}  "
          f"largest {cpu.max() * 1e3:.2f}  median/least {np.median(cpu) / cpu.min():.3f}  "
          f"largest/least {cpu.max() / cpu.min():.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
