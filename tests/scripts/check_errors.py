"""Rank script: every bad input gets a clear error on every rank, and the reducer still works after.

Usage: check_errors.py STRATEGY OPTIONS_JSON
"""

import json
import sys
import warnings

import numpy as np
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
from mpicomm import MismatchError

strategy, options = sys.argv[1], json.loads(sys.argv[2])
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
r = mpicomm.make_reducer(strategy, comm=comm, **options)
if not r.is_worker:
    r.serve()
    report(ok=True, role="server")
    sys.exit(0)
wr, W = r.worker_rank, r.num_workers
problems = []


def expect(exc_type, fragment, fn):
    return expect_raises(problems, exc_type, fragment, fn)


# local errors: raised before any message on every rank
expect(TypeError, "float16", lambda: r.allreduce(np.ones(8, np.float16)))
expect(TypeError, "int32", lambda: r.allreduce(np.ones(8, np.int32)))
# a byte-swapped float (its dtype.char is a float's): refused like any other dtype, before
# any message (was mpi4py's BufferError mid-algorithm, or a sum of swapped bytes at 1 rank)
expect(TypeError, "dtype >f8", lambda: r.allreduce(np.ones(8, ">f8")))
expect(ValueError, "not contiguous", lambda: r.allreduce(np.ones((8, 8), np.float32)[:, ::2]))
expect(ValueError, "not contiguous", lambda: r.allreduce(np.ones(16)[::2]))
expect(ValueError, "unknown op 'max'", lambda: r.allreduce(np.ones(8), op="max"))
expect(TypeError, "numpy or cupy array", lambda: r.allreduce([1.0, 2.0]))
ro = np.ones(8)
ro.flags.writeable = False
expect(ValueError, "read-only", lambda: r.allreduce(ro))

# cross-rank disagreement: the same MismatchError on every rank, never a hang
msg = ""
if W > 1:
    msg = expect(MismatchError, "elements", lambda: r.allreduce(np.ones(1000 + (wr == W - 1) * 24)))
    if f"rank {wr} has" not in msg:
        problems.append(f"length mismatch message does not name this rank: {msg}")
    expect(
        MismatchError,
        "dtype",
        lambda: r.allreduce(np.ones(64, np.float32 if wr == 0 else np.float64)),
    )
    expect(MismatchError, "op", lambda: r.allreduce(np.ones(64), op="mean" if wr == 0 else "sum"))

# still correct afterwards (no message left in flight)
x = np.full(37, float(wr + 1))
r.allreduce(x)
if not np.array_equal(x, np.full(37, W * (W + 1) / 2)):
    problems.append(f"wrong sum after errors: {x[:3]}")
# a NumPy subclass whose ravel stays 2-D (np.matrix): reduced as its memory, in place (was a
# broadcast ValueError inside the ring and the tree, after their first messages)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)
    mat = np.matrix(np.full((2, 3), float(wr + 1)))
r.allreduce(mat)
if not np.array_equal(np.asarray(mat), np.full((2, 3), W * (W + 1) / 2)):
    problems.append(f"wrong sum of an np.matrix: {np.asarray(mat).ravel()[:3]}")
r.close()
report(ok=not problems, error="; ".join(problems) or None, mismatch_message=msg)
