"""Look-ahead momentum (DANA-Zero) on one shard: the formula, and why async needs it."""

from types import SimpleNamespace

import numpy as np
import pytest

from mpicomm.ps.lookahead import RESUM, LookAheadMomentum
from mpicomm.train.loop import SGD


def test_matches_reference_on_random_pushes():
    """Random workers, gradients, lr: p and the reply follow the four steps (past a re-sum)."""
    rng = np.random.default_rng(7)
    W, n, mu, wd = 3, 37, 0.85, 1e-3
    p0 = rng.standard_normal(n)
    opt = LookAheadMomentum(p0.copy(), W, mu, wd)
    p, v = p0.copy(), np.zeros((W, n))
    for _ in range(RESUM + 45):
        i, lr, g = int(rng.integers(W)), float(rng.uniform(0.01, 0.2)), rng.standard_normal(n)
        v[i] = mu * v[i] + g / W + wd / W * p        # the reference, written out
        p = p - lr * v[i]
        opt.push(i, g.copy(), lr)
        np.testing.assert_allclose(opt.p, p, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(opt.reply(lr), p - lr * mu * v.sum(axis=0),
                                   rtol=1e-10, atol=1e-12)


def test_first_reply_is_the_initial_model():
    p = np.arange(5.0)
    assert np.array_equal(LookAheadMomentum(p, 2, 0.9, 0.0).reply(0.1), p)


def _quadratic(rule: str, lr: float, W: int = 3, lag_free: bool = False, seed: int = 0) -> float:
    """W workers take turns on f = ½·Σ h·p² (h in [0.01, 1]); return f(end)/f(start).

    Each gradient is taken at what the worker last pulled: W − 1 updates old.
    """
    rng = np.random.default_rng(seed)
    h = np.geomspace(0.01, 1.0, 50)
    p = rng.standard_normal(h.size)
    f0 = 0.5 * float(h @ (p * p))
    g, v = np.zeros_like(p), np.zeros_like(p)
    opt = LookAheadMomentum(p, W, 0.9, 0.0) if rule == "lookahead" else None
    sgd = SGD(np, p, g, v, [SimpleNamespace(lo=0, hi=p.size)], 0.9, 0.0)
    pulled = [p.copy() for _ in range(W)]
    for k in range(200 * W):
        i = k % W
        at = p if lag_free else pulled[i]
        if opt is not None:
            opt.push(i, h * at, lr)
            pulled[i] = opt.reply(lr).copy()
        else:
            g[...] = h * at / W
            sgd.update(0, lr)
            pulled[i] = p.copy()
    return 0.5 * float(h @ (p * p)) / f0


@pytest.mark.parametrize("lr", [0.3, 0.5])
def test_stale_gradients_diverge_with_shared_momentum_but_not_with_lookahead(lr):
    """Heavy-ball momentum 0.9 on gradients 2 updates old blows up where look-ahead converges."""
    assert _quadratic("shared", lr, lag_free=True) < 1e-6   # no staleness: the plain rule is fine
    assert _quadratic("shared", lr) > 1.0                   # lag W − 1 = 2: it diverges
    assert _quadratic("lookahead", lr) < 1e-6               # look-ahead: converges
