"""Rank script (2 ranks, nodes of one rank): under ``--links-from`` a calibration whose link
between nodes has a measured token bucket (``extra.inter_bucket``) is charged as tbf moves
bytes: a stream after the link idled passes the bucket's bytes at line speed and the rest
at the sustained rate, and a ping-pong, whose directions each idle while the other answers,
takes half its sustained time per message (what the calibration's ping-pong measured
through the namespaces' 256 KiB bucket, issue 33). argv: the calibration."""

import sys

import numpy as np
from mpi4py import MPI
from mpi_harness import report

from mpicomm.core import clock
from mpicomm.costmodel.profiles import build_cluster
from mpicomm.p2p import virtual
from mpicomm.p2p.virtual import VirtualTransport

M, STREAM, ROUNDS = 1 << 16, 16, 12
virtual.install(1e-9)  # compute ~nothing: only the links
comm = MPI.COMM_WORLD
me = comm.Get_rank()
p2p = VirtualTransport(comm, [0, 1], cluster=build_cluster(ranks_per_node=1,
                                                           links_from=sys.argv[1]))
bufs = [np.ones(M, dtype=np.uint8) for _ in range(STREAM)]
# 1. a stream after the link idled (all clocks at ~0): STREAM messages back to back
if me == 0:
    p2p.waitall([p2p.isend(b, 1, 3) for b in bufs])
else:
    p2p.waitall([p2p.irecv(b, 0, 3) for b in bufs])
streamed = clock.now()
# 2. a ping-pong: the half round trip of the later rounds
halves = []
for _ in range(ROUNDS):
    t0 = clock.now()
    if me == 0:
        p2p.send(bufs[0], 1, 4)
        p2p.recv(bufs[0], 1, 4)
    else:
        p2p.recv(bufs[0], 0, 4)
        p2p.send(bufs[0], 0, 4)
    halves.append((clock.now() - t0) / 2)
p2p.close()
report(ok=True, rank=me, streamed_s=streamed, half_s=float(np.median(halves[ROUNDS // 2:])))
