"""Rank script: ranks asking for different strategies (or options) all raise ConfigError
naming both, before any message of the algorithm (no hang, no KeyError); a rank whose own
request is refused does not leave the others waiting."""

from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
from mpicomm.core.errors import ConfigError

me = MPI.COMM_WORLD.Get_rank()
problems: list[str] = []
msg = expect_raises(problems, ConfigError, "every rank must use the same strategy",
                    lambda: mpicomm.make_reducer("ring" if me == 0 else "ps"))
if "'ring'" not in msg or "'ps'" not in msg:
    problems.append(f"message does not name both strategies: {msg}")
expect_raises(problems, ConfigError, "different options",
              lambda: mpicomm.make_reducer("ps", servers=1 if me == 0 else 2))
expect_raises(problems, ConfigError, "same strategy",
              lambda: mpicomm.make_reducer("hierarchical" if me == 1 else "ring"))
# one rank's request refused locally (unknown strategy, bad value): it raises its own error, the
# others one naming it (they waited in the agreement's Allgather for ever)
expect_raises(problems, ConfigError, "unknown strategy 'nosuch'",
              lambda: mpicomm.make_reducer("ring" if me else "nosuch"))
expect_raises(problems, ConfigError, "servers must be a positive int",
              lambda: mpicomm.make_reducer("ps", servers=0 if me == 0 else 1))
with mpicomm.make_reducer("ring", compress="fp16") as r:  # agreeing ranks go on
    r.allreduce(__import__("numpy").ones(3))
report(ok=not problems, error="; ".join(problems) or None)
