"""Injected stragglers: ``--straggler RANK:MS`` (repeatable) and ``--jitter MS``.

``Delays(cfg, rank).sleep()`` is called once per step inside the compute time:
the fixed delay of every ``--straggler`` entry naming this rank, plus, with
``--jitter``, a uniform random 0..MS ms drawn from a generator seeded by
(seed, rank) — the same delays on every run of the same flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.core import clock

__all__ = ["Delays"]


class Delays:
    """This rank's per-step delay (seconds): fixed straggler part + seeded jitter."""

    def __init__(self, cfg: Any, rank: int) -> None:
        self.fixed = sum(float(ms) for r, ms in (s.split(":") for s in cfg.straggler)
                         if int(r) == rank) / 1e3
        self.jitter = cfg.jitter / 1e3
        self.rng = np.random.default_rng([cfg.seed, rank, 7919])
        self.active = bool(self.fixed or self.jitter)

    def sleep(self) -> None:
        """Sleep this step's delay (nothing when no delay applies to this rank)."""
        if not self.active:
            return
        d = self.fixed + (self.rng.uniform(0.0, self.jitter) if self.jitter else 0.0)
        if d > 0:
            clock.sleep(d)  # under the virtual clock: charged as compute too
