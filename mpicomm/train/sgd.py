"""The training loop's optimizer: SGD with momentum and weight decay, bucket by bucket, in place.

Used by the loop on each reduced bucket and by the parameter servers on their
key range (one bucket), so both apply the very same rule.
"""

from __future__ import annotations

from typing import Any

from mpicomm.core import flops
from mpicomm.costmodel.step import sgd_update

__all__ = ["SGD"]


class SGD:
    """SGD with momentum and weight decay, one bucket's slice at a time, in place.

    v = mu·v + g + wd·p ;  p -= lr·v   (the bucket's grads double as scratch)
    """

    def __init__(self, xp: Any, params: Any, grads: Any, velocity: Any, buckets: list,
                 mu: float, wd: float, charged: bool = True) -> None:
        self.xp, self.mu, self.wd = xp, mu, wd
        self.charged = charged  # False: inside a measured rate (--single-rate), free
        self.views = [(params[b.lo : b.hi], grads[b.lo : b.hi], velocity[b.lo : b.hi])
                      for b in buckets]  # made once, reused every step

    def update(self, k: int, lr: float) -> None:
        p, g, v = self.views[k]
        v *= self.mu
        v += g
        if self.wd:
            self.xp.multiply(p, self.wd, out=g)
            v += g
        self.xp.multiply(v, lr, out=g)
        p -= g
        if self.charged:
            flops.charge(*sgd_update(p.size, bool(self.wd)))  # the predictor's count (one model)
