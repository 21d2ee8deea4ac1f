"""Rank script (2 ranks, nodes of one rank): under the virtual clock a native reducer made
with ``inter_link`` is charged on that link, as the cost model predicts it
(``cluster_time``); it was charged on the default links (5us,100Gb/s)."""

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.core import clock
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.profiles import build_cluster
from mpicomm.p2p import virtual

LINK = "20us,1GB/s"
virtual.install_for("virtual", 1.0, 1, LINK, None)
x = np.ones(250_000, dtype=np.float32)  # 1 MB
with mpicomm.make_reducer("native", ranks_per_node=1, inter_link=LINK) as r:
    r.allreduce(x)
    t0 = clock.now()
    r.allreduce(x)
    took = clock.now() - t0
    link = r.p2p.describe().get("inter_link")
model = cluster_time("native", 2, x.nbytes, build_cluster(ranks_per_node=1, inter=LINK),
                     {"ranks_per_node": 1})
ok = link == LINK and abs(took - model) <= 0.1 * model
report(ok=ok, took_s=took, model_s=model, link=link, rank=MPI.COMM_WORLD.Get_rank())
