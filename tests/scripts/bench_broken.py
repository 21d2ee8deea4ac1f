"""Rank script: run ``mpicomm bench`` with a deliberately broken strategy registered.

"broken" is native's allreduce, after which rank 0 adds 1 to element 0: one
wrong element per checked call, which ``#wrong`` must count. Arguments after
the script name go to ``python -m mpicomm``.
"""

import sys

from mpicomm.cli.main import main
from mpicomm.reducers import REDUCERS
from mpicomm.reducers.native import NativeReducer


class BrokenReducer(NativeReducer):
    name = "broken"

    def _allreduce(self, flat, scale):
        out = super()._allreduce(flat, scale)
        if self.rank == 0:
            flat[0] += 1
        return out


REDUCERS["broken"] = BrokenReducer
sys.exit(main(sys.argv[1:]))
