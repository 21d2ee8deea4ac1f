"""Rank script: every rank ends with the same bits and sends what the cost model counts.

For each (length, dtype, op) every rank reduces its own random data; rank 0's
result is broadcast and compared byte for byte with every rank's. The bytes the
reducer's transport counted for the call (tree: and the messages) are compared with
``mpicomm.costmodel.algos`` (``tree_bytes_sent`` for tree, ``multiring_bytes_sent``
for ring with channels). Usage (under ``python -m mpi4py``)::

    check_identical.py tree '{}' --lengths 0,1,13,100003
"""

import argparse
import json

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.costmodel.algos import multiring_bytes_sent, tree_bytes_sent, tree_messages_sent


def expected_bytes(reducer, n: int, itemsize: int) -> int:
    p2p = reducer.p2p
    if reducer.name == "tree":
        return tree_bytes_sent(n, itemsize, p2p.size, p2p.rank)
    return multiring_bytes_sent(n, itemsize, p2p.node_of, reducer.options.channels, p2p.rank)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("strategy")
    ap.add_argument("options", nargs="?", default="{}")
    ap.add_argument("--lengths", default="0,1,2,1000")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    lengths = [int(x) if x != "p-1" else max(size - 1, 1) for x in args.lengths.split(",")]
    reducer = mpicomm.make_reducer(args.strategy, comm=comm, **json.loads(args.options))
    failures, case = [], 0
    for n in lengths:
        for dtype in (np.float32, np.float64):
            for op in ("sum", "mean"):
                case += 1
                x = np.random.default_rng([99, rank, case]).standard_normal(n).astype(dtype)
                before = reducer.stats.bytes_sent, reducer.stats.messages_sent
                reducer.allreduce(x, op=op)
                sent = reducer.stats.bytes_sent - before[0]
                want = expected_bytes(reducer, n, x.itemsize)
                if sent != want:
                    failures.append(f"n={n} {x.dtype} {op}: sent {sent} bytes, formula {want}")
                if reducer.name == "tree":
                    msgs = reducer.stats.messages_sent - before[1]
                    want = tree_messages_sent(n, x.itemsize, size, rank)
                    if msgs != want:
                        failures.append(f"n={n} {x.dtype} {op}: {msgs} messages, formula {want}")
                first = x.copy()
                comm.Bcast(first, root=0)
                if not np.array_equal(first.view(np.uint8), x.view(np.uint8)):
                    nbad = int((first.view(np.uint8) != x.view(np.uint8)).sum())
                    failures.append(f"n={n} {x.dtype} {op}: {nbad} bytes differ from rank 0's")
    reducer.close()
    report(ok=not failures, error="; ".join(failures[:5]) or None, cases=case,
           strategy=reducer.name, bytes_sent=reducer.stats.bytes_sent)


main()
