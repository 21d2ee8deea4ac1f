"""The sync engine: buckets over the flat gradient (fusion), overlap with backward, accumulation.

    from mpicomm.engine import AsyncReducer, GradEngine, plan_buckets
"""

from mpicomm.engine.async_reducer import AsyncReducer, CommThreadError, Work
from mpicomm.engine.buckets import Bucket, plan_buckets
from mpicomm.engine.grad_engine import GradEngine

__all__ = ["AsyncReducer", "Work", "CommThreadError", "Bucket", "plan_buckets", "GradEngine"]
