"""A NumPy whose ``matmul`` also charges its 2·m·k·n flops to the virtual clock (rank scripts).

    from flop_model import flop_numpy
    stage.np = flop_numpy(1e-10)        # the module's NumPy: the same, but a matmul is charged

With the clock's CPU-time charge scaled to ~nothing (``virtual.install(1e-9)``), the compute of
a run is exactly its matmuls' flops at the given rate, on any host and under any load, so what
a test measures is the schedule (``bubble_virtual.py``, ``overlap_virtual.py``).
"""

import types

import numpy as np

from mpicomm.core import clock


def flop_numpy(seconds_per_flop: float) -> types.SimpleNamespace:
    """NumPy's names, with ``matmul`` charging ``2·m·k·n · seconds_per_flop`` per call."""

    def charged_matmul(a, b, out=None):
        r = np.matmul(a, b, out=out)
        clock.virtual().charge(2.0 * a.shape[0] * a.shape[1] * b.shape[1] * seconds_per_flop)
        return r

    names = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    names.matmul = charged_matmul
    return names
