"""The sync engines: one contract (``base.Engine``: start_step / backward / reduced /
take_times / sync_state / close / describe), three engines. ``GradEngine``: buckets over the
flat gradient (fusion), overlap with backward, accumulation, reduced by a reducer.
``PSEngine``: pushes to parameter servers that own the optimizer. ``ZeroEngine``
(``engine.zero``): reduce-scatter, each rank's shard update, all-gather.

    from mpicomm.engine import AsyncReducer, Engine, GradEngine, PSEngine, plan_buckets
"""

from mpicomm.engine.async_reducer import AsyncReducer, CommThreadError, Work
from mpicomm.engine.base import Engine
from mpicomm.engine.buckets import Bucket, plan_buckets
from mpicomm.engine.grad_engine import GradEngine
from mpicomm.engine.ps_engine import PSEngine, ps_codec

__all__ = ["AsyncReducer", "Work", "CommThreadError", "Bucket", "plan_buckets", "Engine",
           "GradEngine", "PSEngine", "ps_codec"]
