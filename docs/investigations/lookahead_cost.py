"""Server-side cost of one async push: the look-ahead rule against the shared one.

Times ``LookAheadMomentum.push`` + ``reply`` against the loop's SGD on g/W (each
after a copy of the gradient into the server's buffer, standing in for the receive), on
the default model's 399,370 float32 keys, the two taking turns, best of 5 x 200
pushes. docs/ps.md quotes it:

    python docs/investigations/lookahead_cost.py
"""

from __future__ import annotations

import timeit
from types import SimpleNamespace

import numpy as np

from mpicomm.nn import num_params
from mpicomm.ps.lookahead import LookAheadMomentum
from mpicomm.train.loop import SGD


def main(n: int = num_params((256, 512, 512, 10)), workers: int = 3) -> None:
    rng = np.random.default_rng(0)
    p = rng.random(n, dtype=np.float32)
    grad, g = rng.random(n, dtype=np.float32), np.empty(n, dtype=np.float32)
    ahead = LookAheadMomentum(p.copy(), workers, 0.9, 1e-4)
    sgd = SGD(np, p, g, np.zeros_like(p), [SimpleNamespace(lo=0, hi=n)], 0.9, 1e-4)

    def lookahead() -> None:
        np.copyto(g, grad)  # as the server's receive into its buffer (both rules pay it)
        ahead.push(1, g, 0.05)
        ahead.reply(0.05)

    def shared() -> None:
        np.copyto(g, grad)
        np.multiply(g, 1.0 / workers, out=g)  # what the server does before the update
        sgd.update(0, 0.05)

    best = {"lookahead": np.inf, "shared": np.inf}
    for _ in range(5):  # taking turns, so a slow spell of the machine hits both
        for name, fn in (("lookahead", lookahead), ("shared", shared)):
            best[name] = min(best[name], timeit.timeit(fn, number=200) / 200)
    print(f"{n:,} float32 keys, {workers} workers: look-ahead push+reply "
          f"{1e3 * best['lookahead']:.2f} ms, shared {1e3 * best['shared']:.2f} ms "
          f"({best['lookahead'] / best['shared']:.2f}x)")


if __name__ == "__main__":
    main()
