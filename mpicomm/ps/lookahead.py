"""Look-ahead momentum for asynchronous servers (DANA-Zero, Hakimi et al. 2019).

Why: an async push is a gradient taken at parameters ``lag`` updates old (lag ≈
W − 1 with W workers taking turns). Heavy-ball momentum on such stale gradients
oscillates: with the training loop's lr 0.05 and momentum 0.9, a lag of 2
costs ~20 points of held-out accuracy (docs/ps.md, "Why async needs look-ahead
momentum"), while the same lag without momentum costs ~2. Lowering the lr or
the momentum trades that for slower progress. DANA keeps the momentum and
lets each worker compute its gradient where the parameters *will be* when the
push lands.

State per shard of n keys: parameters p, one velocity v_i per worker, and
their sum V = Σ_i v_i. A push of gradient g from worker i, with lr η, momentum
μ, weight decay λ and W workers:

1. g' = g/W + (λ/W)·p            the sync step's mean and decay, in W shares
2. v_i ← μ·v_i + g'               worker i's own velocity (V updated by the change)
3. p ← p − η·v_i
4. reply p̂ = p − η·μ·V           where p will be after every worker's next push,
                                  their gradients aside (the look-ahead)

Workers compute their next gradient at p̂; the servers' final model is p. In
steady state each v_i ≈ g/(W(1−μ)), so one round of W pushes moves p by
η·g/(1−μ), as one sync step does. With W = 1 this is Nesterov momentum.

Cost per push: 7 passes over the n/S keys (γ'·7n/S), against 4 for the plain
rule; memory (W + 2)·n/S floats per server. V is summed afresh every
``RESUM`` pushes so float32 rounding in the running sum cannot drift.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import flops

__all__ = ["LookAheadMomentum"]

RESUM = 256


class LookAheadMomentum:
    """DANA-Zero for one shard: ``push(i, g, lr)`` applies, ``reply(lr)`` is what to send."""

    def __init__(self, params: np.ndarray, workers: int, momentum: float,
                 weight_decay: float) -> None:
        self.p, self.W, self.mu, self.wd = params, workers, momentum, weight_decay
        self.v = np.zeros((workers, params.size), dtype=params.dtype)
        self.V = np.zeros_like(params)
        self.ahead = params.copy()  # the reply buffer (p̂); p itself at the start
        self.d = np.empty_like(params)
        self.pushes = 0

    def push(self, i: int, g: np.ndarray, lr: float) -> None:
        """Apply worker ``i``'s gradient ``g`` (steps 1-3); ``g`` is used as scratch."""
        W, vi, d = self.W, self.v[i], self.d
        g *= 1.0 / W                                  # 1. g' = g/W + (λ/W)·p
        if self.wd:
            np.multiply(self.p, self.wd / W, out=d)
            g += d
        np.multiply(vi, self.mu - 1.0, out=d)         # 2. d = (μ−1)·v_i + g' = new v_i − v_i
        d += g
        vi += d
        self.V += d
        self.pushes += 1
        if self.pushes % RESUM == 0:
            np.add.reduce(self.v, axis=0, out=self.V)
        np.multiply(vi, lr, out=d)                    # 3. p −= η·v_i
        self.p -= d
        n, k = g.size, 7 if self.wd else 5  # kernels of 2-3 values each (the resum: rare)
        flops.charge(k * n, (3 * k - 2) * n, k + 1)

    def reply(self, lr: float) -> np.ndarray:
        """Step 4: fill and return the look-ahead parameters p̂ = p − η·μ·V."""
        np.multiply(self.V, lr * self.mu, out=self.ahead)
        np.subtract(self.p, self.ahead, out=self.ahead)
        flops.charge(2 * self.p.size, 5 * self.p.size, 2)
        return self.ahead
