"""``p2p.virtual.idle_wait``: the virtual clock's wait (issue 32: hundreds of ranks on 2 cores).

MPICH's progress takes one incoming message a call, so a wait on many messages must test
again at once while tests complete requests: a sleep between them made a 255-worker server's
round of pushes last seconds (docs/workloads.md, "Hundreds of ranks")."""

from mpi_harness import run_mpi

MANY = r"""
import os
import sys
import time
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.p2p import virtual

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
k = int(sys.argv[1])  # messages a sender: with 4 senders, more than POLL_YIELDS tests need
flags = sys.argv[2]  # a sender's file there: its sends are posted (no MPI call drains them)
N = 8192  # a ps piece's size at fold 32 (32 KiB): above MPICH's 8 KiB single-copy threshold
slept = []
real_sleep = virtual.time.sleep
virtual.time.sleep = lambda s: (slept.append(s), real_sleep(s))
rng = np.random.default_rng(7)
if rank == 0:
    bufs = np.zeros((size - 1, k, N), dtype=np.float32)
    reqs = [comm.Irecv(bufs[s - 1, i], s, i) for s in range(1, size) for i in range(k)]
    while len(os.listdir(flags)) < size - 1:  # every sender's requests to send are queued
        real_sleep(0.01)
    virtual.idle_wait(reqs)
    n_slept = len(slept)
    comm.Barrier()  # MPI progress here sends the receives' acks the senders' Waitall needs
    want = np.stack([np.random.default_rng(s).random((k, N), dtype=np.float32)
                     for s in range(1, size)])
    report(ok=bool(np.array_equal(bufs, want)) and not any(reqs), slept=n_slept)
else:
    msgs = np.random.default_rng(rank).random((k, N), dtype=np.float32)
    sends = [comm.Isend(msgs[i], 0, i) for i in range(k)]
    open(os.path.join(flags, str(rank)), "w").close()
    MPI.Request.Waitall(sends)
    comm.Barrier()
    report(ok=True)
"""


def test_a_wait_on_queued_messages_takes_them_without_sleeping(tmp_path):
    k = 40  # 160 messages queued: 96 more than the yields before the first sleep
    res = run_mpi(5, ["-c", MANY, str(k), str(tmp_path)], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    assert rec[0]["slept"] == 0, res.tail()
