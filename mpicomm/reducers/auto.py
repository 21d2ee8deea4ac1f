"""auto: recursive doubling for small messages, ring for large — a threshold switch like MPICH's.

1. Once, at construction: take the crossover size ``crossover_bytes`` from the
   options, or derive it from the cost model (``mpicomm.costmodel``): a short
   calibration between ranks 0 and p-1 (ping-pong and exchange steps, ~20 ms)
   gives α, β and γ(m), and the crossover is the smallest size from which the
   ring's predicted time beats recursive doubling's. Rank 0's value is
   broadcast, so every rank switches at the same size (a split decision would
   deadlock). 128 KiB on 2 ranks here. The calibration measures the real links
   (it talks to MPI directly); with emulated links set the crossover yourself
   (``crossover_bytes``) when it matters. Under the virtual clock nothing is
   measured: the crossover is the transport's cluster's
   (``cluster_predict.auto_crossover``: the ring against recursive doubling), so
   no host timing enters a virtual run's choices (a measured crossover made auto
   at 3 ranks pick the ring in some runs and recursive doubling in others:
   112.064 against 112.144 µs).
2. Per call: buffers of fewer than ``crossover`` bytes go to recursive doubling,
   the others to the ring. The two inner reducers share this reducer's
   transport (so its communicator, emulated links and ``stats``); they are
   called through their public ``allreduce_flat``, since this reducer's
   ``allreduce`` has already checked the buffer.

Cost: min over the two, by the model's own prediction at each size,

    T_auto(n) = lg p·(α + nβ + nγ)                       n < crossover
              = 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ       n >= crossover

with the crossover where they meet; on 2 ranks n* ≈ 2α/γ, since both move n bytes.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import clock
from mpicomm.reducers.base import Reducer
from mpicomm.reducers.recursive_doubling import RecursiveDoublingReducer
from mpicomm.reducers.ring import RingReducer

__all__ = ["AutoReducer"]


class AutoReducer(Reducer):
    """Per-size choice between recursive doubling and the ring (see module docstring)."""

    name = "auto"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self.small = RecursiveDoublingReducer(None, options, transport=self.p2p)
        self.large = RingReducer(None, options, transport=self.p2p)
        crossover = options.crossover_bytes
        if crossover is None:
            crossover = self._derived_crossover()
        agreed = np.array([crossover], dtype=np.int64)
        self.comm.Bcast(agreed, root=0)
        self.crossover = int(agreed[0])
        self._virtual = clock.virtual() is not None

    def _derived_crossover(self) -> int:
        """Step 1: the cost model's crossover, on measured links or the virtual clock's own
        cluster (the transport's: ``cluster_predict.auto_crossover``)."""
        from mpicomm.costmodel.calibrate import quick_params
        from mpicomm.costmodel.formulas import auto_crossover

        cluster = getattr(self.p2p, "cluster", None)
        if clock.virtual() is None or cluster is None:
            return auto_crossover(self.size, quick_params(self.comm))
        from mpicomm.costmodel.cluster_predict import auto_crossover as on_cluster

        return on_cluster(self.size, cluster)

    def describe(self) -> dict:
        d = super().describe()
        d["crossover_bytes"] = self.crossover
        return d

    def _allreduce(self, flat, scale):
        impl = self.small if flat.nbytes * clock.fold() < self.crossover else self.large
        if self._virtual:  # the shared transport charges the chosen algorithm's crossing
            self.p2p.cross_at_once(impl.crossing_ranks())
        impl.allreduce_flat(flat, scale)

    def _release(self) -> None:
        self.small.close()
        self.large.close()
