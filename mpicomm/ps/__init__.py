"""The parameter server as people build it: servers own parameters and optimizer.

Modes: sync, async, ssp (bounded staleness). ``sharding`` (roles, key ranges),
``protocol`` (tags, records), ``server`` (the loop with its optimizer),
``worker`` (push gradients, pull parameters), ``group`` (a job's roles,
transport and stall channel). Training drives it through
``mpicomm.engine.PSEngine`` in the one loop (``mpicomm.train.loop``); see docs/ps.md.
"""

from mpicomm.ps.group import PSGroup
from mpicomm.ps.protocol import MODES
from mpicomm.ps.server import PSServer
from mpicomm.ps.sharding import Layout, layout
from mpicomm.ps.worker import PSWorker

__all__ = ["MODES", "PSServer", "PSWorker", "PSGroup", "Layout", "layout"]
