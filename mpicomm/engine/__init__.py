"""The sync engines: one contract (start_step / backward / reduced / take_times / sync_state /
close / describe), two ways. ``GradEngine``: buckets over the flat gradient (fusion), overlap
with backward, accumulation, reduced by a reducer. ``PSEngine``: pushes to parameter servers
that own the optimizer.

    from mpicomm.engine import AsyncReducer, GradEngine, PSEngine, plan_buckets
"""

from mpicomm.engine.async_reducer import AsyncReducer, CommThreadError, Work
from mpicomm.engine.buckets import Bucket, plan_buckets
from mpicomm.engine.grad_engine import GradEngine
from mpicomm.engine.ps_engine import PSEngine, ps_codec

__all__ = ["AsyncReducer", "Work", "CommThreadError", "Bucket", "plan_buckets", "GradEngine",
           "PSEngine", "ps_codec"]
