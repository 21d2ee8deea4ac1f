"""One-process replay of async parameter-server training: W workers in turn, stale gradients.

Each worker's gradient is taken at the parameters of ``--lag`` pushes before (W − 1
in a real async run where workers take turns), then applied by the server rule:

    shared     the training loop's SGD on g/W, one velocity (``--ps-momentum shared``)
    lookahead  DANA-Zero, a velocity per worker and the look-ahead pull (the default)
    inv        g/(W·(1 + lag)): the step divided by the staleness (after Zhang et al. 2016)

Same data, model, seed and shards as ``train``; no MPI. Prints held-out accuracy.
docs/ps.md ("Why async needs look-ahead momentum") quotes its numbers:

    python docs/investigations/async_replay.py --lag 0 1 2 4
    python docs/investigations/async_replay.py --lag 2 --rule lookahead
    python docs/investigations/async_replay.py --lag 2 --lr 0.25 --momentum 0.5
"""

from __future__ import annotations

import argparse
from collections import deque
from types import SimpleNamespace

import numpy as np

from mpicomm.nn import MLP
from mpicomm.ps.lookahead import LookAheadMomentum
from mpicomm.train.data import Shard, synthetic
from mpicomm.train.loop import SGD


def replay(lag: int, rule: str, lr: float, mu: float, seed: int, workers: int = 3,
           steps: int = 150, warmup: int = 0) -> float:
    """Return the held-out accuracy after ``steps`` rounds of ``workers`` pushes."""
    ds = synthetic(256, 10, 16384, 2048, seed=seed, dtype="float32")
    shards = [Shard(ds.x_train, ds.y_train, batch=64, worker_rank=i, num_workers=workers,
                    seed=seed, xp=np) for i in range(workers)]
    model = MLP((256, 512, 512, 10), seed=seed, dtype="float32", xp=np)
    p = model.params.copy()
    g, v = np.zeros_like(p), np.zeros_like(p)
    sgd = SGD(np, p, g, v, [SimpleNamespace(lo=0, hi=p.size)], mu, 1e-4)
    ahead = LookAheadMomentum(p, workers, mu, 1e-4) if rule == "lookahead" else None
    pulled = deque([p.copy()] * (lag + 1), maxlen=lag + 1)  # what was sent, oldest first
    for k in range(steps * workers):
        i = k % workers
        model.params[...] = pulled[0]
        xb, yb = shards[i].next()
        model.loss_and_grads(xb, yb)
        rate = lr * min(1.0, (k // workers + 1) / warmup) if warmup else lr
        if ahead is not None:
            ahead.push(i, model.grads.copy(), rate)
            pulled.append(ahead.reply(rate).copy())
            continue
        g[...] = model.grads / (workers * (1 + lag) if rule == "inv" else workers)
        sgd.update(0, rate)
        pulled.append(p.copy())
    model.params[...] = p
    _, correct = model.evaluate(ds.x_test, ds.y_test)
    return correct / len(ds.y_test)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lag", type=int, nargs="+", default=[2])
    ap.add_argument("--rule", choices=("shared", "lookahead", "inv"), default="shared")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=3)
    a = ap.parse_args()
    for lag in a.lag:
        acc = replay(lag, a.rule, a.lr, a.momentum, a.seed, a.workers, warmup=a.warmup)
        print(f"workers {a.workers}  lag {lag}  rule {a.rule}  lr {a.lr}  momentum {a.momentum}  "
              f"warmup {a.warmup}  seed {a.seed}: held-out accuracy {100 * acc:.1f}%")


if __name__ == "__main__":
    main()
