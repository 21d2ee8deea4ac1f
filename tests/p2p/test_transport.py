"""The point-to-point layer: counting per link class, trace events, the reducer lifecycle."""

import numpy as np
import pytest
from mpi_harness import STRATEGY_CASES, run_mpi

TRANSPORT = """
import time
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import trace
from mpicomm.core.topology import node_map
from mpicomm.p2p import Transport, make_transport

comm = MPI.COMM_WORLD
me, p = comm.Get_rank(), comm.Get_size()
nodes = node_map(comm, 2)
t = make_transport(comm, nodes)
right, left = (me + 1) % p, (me - 1) % p
a = np.full(100, me, dtype=np.float64)
b = np.empty(300, dtype=np.float32)
problems = []
t.sendrecv(a, right, b[:200], left, 5)                  # 800 bytes each way
if not (b[:200].view(np.float64) == left).all():
    problems.append("sendrecv delivered the wrong data")
reqs = [t.irecv(b[:50], left, 6), t.isend(b[:50], right, 6)]   # 200 bytes
t.waitall(reqs)
if me % 2 == 0:
    t.send(a[:10], me + 1, 7)                             # 80 bytes
else:
    t.recv(a[:10], me - 1, 7)
rec = trace.Recorder()
trace.set_active(rec)
t.sendrecv(a, right, b[:200], left, 8)
t.waitall([t.irecv(b[:4], left, 9), t.isend(a[:2], right, 9)])
trace.set_active(None)
c = t.counts
report(ok=not problems, error="; ".join(problems) or None, plain=type(t) is Transport,
       sent=c.bytes_sent, recv=c.bytes_recv, inter_sent=c.inter_bytes_sent,
       inter_recv=c.inter_bytes_recv, msgs=(c.messages_sent, c.messages_recv),
       events=[(e.name, e.cat, e.args["peer"], e.args["bytes"], e.end >= e.start)
               for e in rec.events])
"""


def test_transport_counts_per_link_class_and_traces():
    res = run_mpi(4, ["-c", TRANSPORT], timeout=60).expect_ok()
    for r in res.records:
        me = r["rank"]
        assert r["plain"], "no emulation asked: the plain transport"
        even = me % 2 == 0
        assert r["sent"] == 800 + 200 + (80 if even else 0) + 800 + 16
        assert r["recv"] == 800 + 200 + (0 if even else 80) + 800 + 16
        assert r["msgs"] == [4 + even, 4 + (not even)]
        # nodes {0,1} {2,3}: odd ranks send across (1 -> 2, 3 -> 0), even ranks receive across
        assert r["inter_sent"] == (0 if even else 800 + 200 + 800 + 16)
        assert r["inter_recv"] == (800 + 200 + 800 + 16 if even else 0)
        right, left = (me + 1) % 4, (me - 1) % 4
        names = sorted(tuple(e) for e in r["events"])
        assert names == sorted([("sendrecv", "p2p", right, 800, True),
                                ("recv", "p2p", left, 16, True), ("send", "p2p", right, 16, True)])


LIFECYCLE = """
import json, sys
import numpy as np
from mpi_harness import expect_raises, report
import mpicomm

name, options = sys.argv[1], json.loads(sys.argv[2])
problems = []
with mpicomm.make_reducer(name, **options) as r:
    if r.is_worker:
        x = np.ones(7, dtype=np.float32)
        r.allreduce(x)
        if not (x == r.num_workers).all():
            problems.append(f"wrong sum {x}")
    else:
        r.serve()
r.close()  # a second close: harmless
fn = r.allreduce if r.is_worker else r.serve
expect_raises(problems, RuntimeError, f"{name}: this reducer is closed",
              lambda: fn(np.ones(3)) if r.is_worker else fn())
report(ok=not problems, error="; ".join(problems) or None, emulated=r.describe()["emulated"])
"""


@pytest.mark.parametrize("strategy,options", STRATEGY_CASES, ids=str)
def test_context_manager_close_twice_and_use_after_close(strategy, options):
    import json

    res = run_mpi(3, ["-c", LIFECYCLE, strategy, json.dumps(options)], timeout=90).expect_ok()
    assert all(r["emulated"] is False for r in res.records)


def test_codes_are_one_table():
    from mpicomm.core import backend, codes
    from mpicomm.reducers import base

    assert backend.DTYPE_CODES is codes.DTYPE_CODES
    assert base.OPS is codes.OPS
    assert codes.OPS == {"sum": 1, "mean": 2}
    assert {codes.CODE_DTYPES[c] for c in (1, 2)} == {np.dtype("float32"), np.dtype("float64")}
    assert codes.OP_NAMES[codes.OP_MEAN] == "mean"
