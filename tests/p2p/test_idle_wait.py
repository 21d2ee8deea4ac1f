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


AHEAD = r"""
import os
import sys
import time
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.p2p import virtual

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
R = int(sys.argv[1])  # the receives of one wait; as many messages for later ones come first
flags = sys.argv[2]
virtual.POLL_YIELDS = 1  # the first test that takes nothing is followed by a sleep
slept = []
real_sleep = virtual.time.sleep
virtual.time.sleep = lambda s: (slept.append(s), real_sleep(s))


def one_wait(round_, receives):
    # rank 1 sends 2R messages; rank 0 waits on the last R (the first R are for a later wait,
    # as a ring's peer a step ahead sends its next step's messages before this one's are in)
    tags = [100 * round_ + i for i in range(2 * R)]
    if rank == 1:
        sends = [comm.Isend(np.full(4, t, np.int32), 0, t) for t in tags]
        open(os.path.join(flags, str(round_)), "w").close()
        MPI.Request.Waitall(sends)
        return 0, True
    while not os.path.exists(os.path.join(flags, str(round_))):
        real_sleep(0.01)
    got = np.zeros((R, 4), np.int32)
    reqs = [comm.Irecv(got[i], 1, t) for i, t in enumerate(tags[R:])]
    before = len(slept)
    virtual.idle_wait(reqs, receives=receives)
    n = len(slept) - before
    rest = np.zeros((R, 4), np.int32)
    MPI.Request.Waitall([comm.Irecv(rest[i], 1, t) for i, t in enumerate(tags[:R])])
    ok = bool((got[:, 0] == tags[R:]).all() and (rest[:, 0] == tags[:R]).all())
    return n, ok


n1, ok1 = one_wait(1, 1)  # a test a wake-up: what the wait did before
comm.Barrier()
nR, okR = one_wait(2, R)  # up to R tests a wake-up
comm.Barrier()
report(ok=ok1 and okR, slept_one=n1, slept_burst=nR)
"""


def test_a_wait_takes_messages_for_later_receives_without_sleeping(tmp_path):
    """A test that completes nothing may have taken a message for a later receive (MPICH's
    progress takes one a call): with up to ``receives`` tests a wake-up, a wait on R receives
    behind R such messages does not sleep; one test a wake-up slept (the ring on 8 channels,
    64 ranks on 2 cores: 112 s, now 30 s)."""
    res = run_mpi(2, ["-c", AHEAD, "16", str(tmp_path)], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    assert rec[0]["slept_one"] > 0, res.tail()  # the case is real under this MPI
    assert rec[0]["slept_burst"] == 0, res.tail()
