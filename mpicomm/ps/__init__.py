"""The parameter server as people build it: servers own parameters and optimizer.

Modes: sync, async, ssp (bounded staleness). ``sharding`` (roles, key ranges),
``protocol`` (tags, records), ``server`` (the loop with its optimizer),
``worker`` (push gradients, pull parameters). The training driver is
``mpicomm.train.ps_loop``; see docs/ps.md.
"""

from mpicomm.ps.protocol import MODES
from mpicomm.ps.server import PSServer
from mpicomm.ps.sharding import Layout, layout
from mpicomm.ps.worker import PSWorker

__all__ = ["MODES", "PSServer", "PSWorker", "Layout", "layout"]
