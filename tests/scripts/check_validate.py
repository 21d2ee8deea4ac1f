"""Rank script: the agreement check decides by call count alone, so it never hangs.

1. validate=True: a shape new to rank 0 but seen before by the others (the case
   the per-layout rule would hang on) raises the same MismatchError on every rank.
2. Default (validate=False): each layout is checked the first time it is seen
   (a mismatch on a layout new to every rank raises on every rank); a layout seen
   before costs no Allgather.
"""

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm

rank = MPI.COMM_WORLD.Get_rank()
problems = []


def expect_mismatch(fn, fragment):
    try:
        fn()
    except mpicomm.MismatchError as e:
        if fragment not in str(e) or f"rank {rank} has" not in str(e):
            problems.append(f"message lacks {fragment!r} or this rank: {e}")
    else:
        problems.append(f"no MismatchError ({fragment})")


r = mpicomm.make_reducer("ring", validate=True)
assert r.options.validate is True
r.allreduce(np.ones(100))
r.allreduce(np.ones(200))
# both shapes known on every rank; now rank 0 sends 100 while the others send 200
expect_mismatch(lambda: r.allreduce(np.ones(100 if rank == 0 else 200)), "r0:100, r1:200")
# a shape new to rank 0 only (others have seen 200)
expect_mismatch(lambda: r.allreduce(np.ones(300 if rank == 0 else 200)), "r0:300, r1:200")
x = np.ones(7)
r.allreduce(x)  # still usable: nothing left in flight
if not np.array_equal(x, np.full(7, float(MPI.COMM_WORLD.Get_size()))):
    problems.append(f"wrong sum after mismatches: {x}")

fast = mpicomm.make_reducer("ring")
assert fast.options.validate is False
expect_mismatch(lambda: fast.allreduce(np.ones(5 if rank == 0 else 6)), "r0:5, r1:6")
fast.allreduce(np.ones(8))
calls = []
fast._check_agreement = lambda key: calls.append(key)  # count checks from here on
for _ in range(3):
    fast.allreduce(np.ones(8))
fast.allreduce(np.ones(8), op="mean")  # another op: another layout
if len(calls) != 1:
    problems.append(f"expected one check (the new layout), got {calls}")
report(ok=not problems, error="; ".join(problems) or None)
