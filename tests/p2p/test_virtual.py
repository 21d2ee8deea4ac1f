"""The virtual clock: messages timed by the link model, exactly and the same on every run.

Compute is scaled to ~nothing (``compute_scale=1e-6``) so a rank's virtual time
is the model's alone: a 2-rank exchange takes α + n·β, a server's incast queues
at its receive side (linear in the number of senders), and a reducer's call
takes its α-β formula — whatever the load on the host.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from mpi_harness import run_mpi

TINY = 1e-9  # compute scale: a second of CPU time is a nanosecond of virtual time

SENDRECV = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.links import parse_link
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me = comm.Get_rank()
nbytes = int(sys.argv[1])
virtual.install(1e-9)
t = make_transport(comm, node_map(comm, 1), None, parse_link("20us,1GB/s"))
out, into = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
t0 = clock.now()
t.sendrecv(out, 1 - me, into, 1 - me, 5)
t1 = clock.now()
t.send(out, 1 - me, 6) if me == 0 else t.recv(into, 0, 6)
t2 = clock.now()
report(ok=bool(into.all()), exchange=t1 - t0, one_way=t2 - t1, start=t0, kind=type(t).__name__,
       name=clock.name())
"""


@pytest.mark.parametrize("nbytes", [1, 16 << 20])
def test_two_rank_sendrecv_takes_alpha_plus_n_beta(nbytes):
    res = run_mpi(2, ["-c", SENDRECV, str(nbytes)], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    expected = 20e-6 + nbytes / 1e9
    for r in rec.values():
        assert r["ok"] and r["kind"] == "VirtualTransport" and r["name"] == "virtual"
        assert abs(r["exchange"] - expected) < 1e-8, (r["exchange"], expected)
    # a blocking send returns when its bytes are on the wire; the receiver has them α later
    assert abs(rec[0]["one_way"] - nbytes / 1e9) < 1e-8
    assert abs(rec[1]["one_way"] - expected) < 1e-8


INCAST = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.links import parse_link
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me, p = comm.Get_rank(), comm.Get_size()
nbytes = int(sys.argv[1])
virtual.install(1e-9)
t = make_transport(comm, node_map(comm, 1), None, parse_link("50us,0.5GB/s"))
buf = np.zeros((p, nbytes), np.uint8)
t0 = clock.now()
if me == 0:  # a one-server PS's pushes: everyone sends at once, the server receives them all
    t.waitall([t.irecv(buf[r], r, 1) for r in range(1, p)])
else:
    t.send(buf[me], 0, 1)
report(ok=True, seconds=clock.now() - t0)
"""


@pytest.mark.parametrize("p", [2, 3, pytest.param(5, marks=pytest.mark.slow)])
def test_incast_queues_at_the_receiver_linear_in_senders(p):
    nbytes = 1 << 20
    res = run_mpi(p, ["-c", INCAST, str(nbytes)], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    beta = nbytes / 0.5e9
    assert abs(rec[0]["seconds"] - (50e-6 + (p - 1) * beta)) < 1e-8, rec[0]
    for r in range(1, p):  # full duplex: each sender's own interface is busy n·β only
        assert abs(rec[r]["seconds"] - beta) < 1e-8


REDUCE = """
import sys, json
import numpy as np
from mpi4py import MPI
from mpi_harness import report
import mpicomm
from mpicomm.core import clock

comm = MPI.COMM_WORLD
me, p = comm.Get_rank(), comm.Get_size()
strategy, n, rpn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kw = json.loads(sys.argv[4])
rng = np.random.default_rng(7 + me)
x = rng.standard_normal(n)
want = np.zeros(n)
for r in range(p):
    want += np.random.default_rng(7 + r).standard_normal(n)
r = mpicomm.make_reducer(strategy, comm=comm, clock="virtual", compute_scale=1e-6,
                         ranks_per_node=rpn, inter_link="20us,1GB/s", intra_link="2us,10GB/s",
                         **kw)
times = []
for _ in range(2):
    y = x.copy()
    comm.Barrier()
    t0 = clock.now()
    if r.is_worker:
        r.allreduce(y)
    else:
        r.serve()
    times.append(clock.now() - t0)
ok = bool(np.allclose(y, want, rtol=1e-10, atol=1e-10)) if r.is_worker else True
name = clock.name()
r.close()  # the clock this reducer installed goes with it (issue 34 item 3)
report(ok=ok, times=times, name=name, after=clock.name())
"""

CASES = [("ring", 1, {}), ("hierarchical", 2, {}), ("hierarchical", 2, {"variant": "leader"}),
         ("ps", 1, {}), ("ps", 1, {"servers": 2}), ("native", 1, {}),
         ("recursive_doubling", 1, {}), ("auto", 1, {})]


@pytest.mark.parametrize("strategy,rpn,kw", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("p", [pytest.param(1, marks=pytest.mark.slow), 3,
                               pytest.param(4, marks=pytest.mark.slow)])
def test_reducers_exact_and_deterministic_under_the_virtual_clock(strategy, rpn, kw, p):
    import json

    if kw.get("servers", 1) > p:
        pytest.skip("more servers than ranks")
    n = 1001 * p + 3  # odd sizes
    res = run_mpi(p, ["-c", REDUCE, strategy, str(n), str(rpn), json.dumps(kw)],
                  timeout=90).expect_ok()
    again = run_mpi(p, ["-c", REDUCE, strategy, str(n), str(rpn), json.dumps(kw)],
                    timeout=90).expect_ok()
    for a, b in zip(sorted(res.records, key=lambda r: r["rank"]),
                    sorted(again.records, key=lambda r: r["rank"]), strict=True):
        assert a["ok"] and b["ok"] and a["name"] == "virtual" and a["after"] == "wall"
        # compute is charged ~nothing (x 1e-6, the scale's lower bound): the same time to
        # 10 ns, 10 ms of this host's CPU time. (auto's crossover, once measured on the host,
        # picked the ring at 3 ranks in some runs and recursive doubling in others: 112.064
        # against 112.144 us)
        assert a["times"][1] == pytest.approx(b["times"][1], rel=1e-9, abs=1e-8)


RING_FORMULA = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
import mpicomm
from mpicomm.core import clock

comm = MPI.COMM_WORLD
p = comm.Get_size()
n = int(sys.argv[1])
r = mpicomm.make_reducer("ring", comm=comm, clock="virtual", compute_scale=1e-6,
                         ranks_per_node=1, inter_link="20us,1GB/s", validate=False)
y = np.ones(n // 4, np.float32)
r.allreduce(y)
t0 = clock.now()
r.allreduce(y)
report(ok=bool((y == p * p).all()), seconds=clock.now() - t0)
r.close()
"""


@pytest.mark.parametrize("p", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_ring_takes_its_alpha_beta_formula(p):
    """Segments of n/p under the ring's piece size: one message per step."""
    n = 1 << 20
    res = run_mpi(p, ["-c", RING_FORMULA, str(n)], timeout=60).expect_ok()
    formula = 2 * (p - 1) * (20e-6 + n / p / 1e9)
    for r in res.records:
        assert r["ok"]
        assert r["seconds"] == pytest.approx(formula, rel=1e-6)


def test_virtual_clock_timelines_are_per_thread_and_skip_mpi_time():
    import threading
    import time

    from mpicomm.core.clock import VirtualClock

    c = VirtualClock(2.0)
    c.enter()
    t_in = c.now()
    end = time.thread_time() + 0.02
    while time.thread_time() < end:  # CPU spent "inside MPI" is not charged
        pass
    assert c.now() == t_in
    c.leave(5.0)
    assert c.now() >= 5.0
    c.charge(1.0)
    assert c.now() >= 6.0
    seen = []
    th = threading.Thread(target=lambda: seen.append(c.now()))
    th.start()
    th.join()
    assert seen[0] < 1.0  # a new thread starts its own timeline
    t0 = c.now()
    x = np.ones(1 << 20)
    for _ in range(30):
        x = x * 1.0000001
    assert c.now() - t0 > 0  # compute is charged (x scale)
    with pytest.raises(ValueError):
        VirtualClock(0)


def test_no_verdict_line_under_wall_clock_sharing_cores_and_none_under_virtual():
    from mpicomm.analysis.verdict import cpu_sharing_warning
    from mpicomm.core import clock
    from mpicomm.core.clock import VirtualClock

    line = cpu_sharing_warning(8, cores=2)
    assert line.startswith("no verdict") and "--clock virtual" in line
    assert cpu_sharing_warning(2, cores=2) is None
    clock.set_source(VirtualClock(1.0).now, "virtual")
    try:
        assert cpu_sharing_warning(8, cores=2) is None
    finally:
        clock.reset()


def test_default_clock_is_virtual_for_emulated_nodes_only(monkeypatch):
    from mpicomm.core.errors import ConfigError
    from mpicomm.p2p.virtual import default_clock, install_for

    monkeypatch.delenv("MPICOMM_INTER_LINK", raising=False)
    monkeypatch.delenv("MPICOMM_INTRA_LINK", raising=False)
    assert default_clock(2, "20us,1GB/s", None) == "virtual"
    assert default_clock(None, "20us,1GB/s", None) == "wall"
    assert default_clock(2, None, None) == "wall"
    monkeypatch.setenv("MPICOMM_INTER_LINK", "20us,1GB/s")
    assert default_clock(1, None, None) == "virtual"
    monkeypatch.setenv("MPICOMM_RANKS_PER_NODE", "2")  # emulated nodes by the variable: wall before
    assert default_clock(None, None, None) == "virtual"
    monkeypatch.delenv("MPICOMM_RANKS_PER_NODE")
    with pytest.raises(ConfigError):
        install_for("sundial", 1.0, None, None, None)
    with pytest.raises(ConfigError):
        install_for("virtual", 0.0, None, None, None)
    assert install_for("wall", 1.0, 2, None, None) == "wall"


def test_links_from_beside_both_link_flags_is_refused(monkeypatch):
    """`bench --clock virtual --links-from F --inter-link 20us,1GB/s --intra-link 1us,10GB/s`
    ran on the two flags and ignored F without a word (it fills only the classes no flag
    sets); refused before the clock is installed. One flag (or its variable) leaves F a class."""
    from mpicomm.core import clock
    from mpicomm.core.errors import ConfigError
    from mpicomm.p2p.virtual import install_for

    monkeypatch.delenv("MPICOMM_INTRA_LINK", raising=False)
    monkeypatch.setenv("MPICOMM_INTER_LINK", "20us,1GB/s")
    with pytest.raises(ConfigError, match="--links-from m.json: --inter-link 20us,1GB/s and "
                                          "--intra-link 1us,10GB/s set both link classes"):
        install_for("virtual", 1.0, 2, None, "1us,10GB/s", links_from="m.json")
    assert clock.virtual() is None  # nothing installed


def test_collective_formulas():
    """MPI's collectives as MPICH picks them: the one cost (``costmodel.native``) the virtual
    clock charges and the predictor's native is."""
    from mpicomm.costmodel.native import mpi_collective_time

    a, b = 1e-5, 1e-9
    one = (a, b)
    assert mpi_collective_time("allreduce", 1 << 20, 1, 1, one, one) == 0
    assert mpi_collective_time("allreduce", 8, 4, 1, one, one) == pytest.approx(2 * (a + 8 * b))
    n = 1 << 20
    assert mpi_collective_time("allreduce", n, 4, 1, one, one) == pytest.approx(
        4 * a + 1.5 * n * b)
    assert mpi_collective_time("allgather", 24, 8, 1, one, one) == pytest.approx(
        3 * a + 7 * 24 * b)
    # 2 nodes of 2: recursive doubling's first round stays inside the node (the intra link)
    assert mpi_collective_time("allreduce", 8, 4, 2, (1e-6, 0.0), one) == pytest.approx(
        1e-6 + a + 8 * b)
    with pytest.raises(ValueError):
        mpi_collective_time("alltoall", 8, 4, 1, one, one)


RECV_ANY = """
import time
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.links import parse_link
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me = comm.Get_rank()
clk = virtual.install(1e-9)
t = make_transport(comm, node_map(comm, 1), None, parse_link("10us,1GB/s"))
buf = np.zeros(4)
if me == 0:  # a server taking headers from any source
    order = [t.recv_any(buf, 9, [1, 2]), t.recv_any(buf, 9, [1])]  # 2 sends no more
    report(ok=True, order=order, got=float(buf[0]))
else:
    if me == 1:
        clk.charge(1.0)       # late in virtual time, first in real time
    else:
        time.sleep(0.5)       # early in virtual time, late in real time
    buf[:] = me
    t.send(buf, 0, 9)
    report(ok=True)
"""


def test_recv_any_serves_the_earliest_virtual_departure_first():
    res = run_mpi(3, ["-c", RECV_ANY], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    assert rec[0]["order"] == [2, 1] and rec[0]["got"] == 1.0


def test_a_compute_segment_is_charged_the_least_cpu_time_seen_for_it():
    """Interference only adds CPU time: a segment (same call sites, same size) that ran
    slower under load is charged its fastest run so far; a faster one lowers the charge."""
    import time

    from mpicomm.core.clock import VirtualClock

    c = VirtualClock(1.0)

    def spin(s):
        end = time.thread_time() + s
        while time.thread_time() < end:
            pass

    def segment(s):
        t0 = c.enter(64)
        c.leave()
        spin(s)
        return c.enter(64) - t0

    charged = []
    for s in (0.005, 0.015, 0.0025, 0.0075):
        charged.append(segment(s))
        c.leave()
    assert charged[0] >= 0.005
    assert charged[1] < 0.01             # 15 ms of CPU, charged the 5 ms seen before
    assert 0.0025 <= charged[2] < 0.004  # a faster run lowers the charge
    assert charged[3] < 0.004
    other = VirtualClock(1.0, least=False)
    other.enter()
    other.leave()
    t0 = other.now()
    spin(0.005)
    assert other.now() - t0 >= 0.005     # least=False: every segment its own CPU time


SHARED = """
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.links import parse_link
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me = comm.Get_rank()
nbytes = 1 << 20
virtual.install(1e-9)
t = make_transport(comm, node_map(comm, 1), None, parse_link("20us,1GB/s"))
buf = np.ones(nbytes, np.uint8)
t0 = clock.now()
if me == 0:  # two messages posted together share the interface: both end at 2·n·β
    t.waitall([t.isend(buf, 1, 3), t.isend(buf, 2, 3)])
else:
    t.recv(buf, 0, 3)
report(ok=True, seconds=clock.now() - t0)
"""


@pytest.mark.slow
def test_messages_posted_together_share_the_interface():
    """A NIC interleaves the messages posted to it: two equal sends of one ``waitall`` both
    arrive at α + 2·n·β (first-come-first-served would deliver one at α + n·β)."""
    res = run_mpi(3, ["-c", SHARED], timeout=60).expect_ok()
    rec = {r["rank"]: r for r in res.records}
    two = 2 * (1 << 20) / 1e9
    assert rec[0]["seconds"] == pytest.approx(two, rel=1e-6)
    for r in (1, 2):
        assert rec[r]["seconds"] == pytest.approx(20e-6 + two, rel=1e-6)


COMPARE = ["-m", "mpicomm", "compare", "--clock", "virtual", "--strategies", "ring,ps",
           "--ranks-per-node", "2", "--inter-link", "20us,1GB/s", "--log-every", "0",
           "--steps", "10", "--repeats", "1", "--no-baseline"]


@pytest.mark.slow
def test_the_same_virtual_compare_twice_gives_the_same_step_times(tmp_path):
    """Issue 18's determinism target, for what the clock itself decides: with the compute
    charged ~nothing (``--compute-scale 1e-6``, its lower bound), two runs of the README job's
    model at once (8 ranks on the host's cores, each loading the other) give the same step
    times to 1e-5 (the CPU time left at that scale: ~5 ns of a 2.4 ms step):
    every message's time, every queue and every order of arrival is virtual.

    With ``--accelerator host`` at the default scale the compute is the host's CPU time (least
    per segment), which a busy host inflates: two such runs at once were 0.1-0.8% apart here,
    5% apart on CI's busy host (ring 5.12 and 4.86 ms). That figure is a measurement, in
    docs/virtual_clock.md with its command, not a test: a timed assertion would test the host."""
    def one(k: int) -> dict:
        out = tmp_path / f"c{k}.json"
        res = run_mpi(4, [*COMPARE, "--compute-scale", "1e-6", "--json", str(out)], timeout=600)
        assert res.returncode == 0, res.tail()
        doc = json.loads(out.read_text())
        return {r["strategy"]: r["step_time_mean_s"] for r in doc["results"]}

    with ThreadPoolExecutor(2) as pool:
        steps = list(pool.map(one, range(2)))
    for name in ("ring", "ps"):
        assert steps[0][name] > 1e-3, (name, steps)  # the links' time: 2.4 and 6.4 ms a step
        assert steps[1][name] == pytest.approx(steps[0][name], rel=1e-5), (name, steps)


AUTO_CROSSOVER = """
from mpi4py import MPI
from mpi_harness import report
import mpicomm
from mpicomm.costmodel.formulas import ring_time, recursive_doubling_time

r = mpicomm.make_reducer("auto", clock="virtual", compute_scale=1e-6, ranks_per_node=1,
                         inter_link="20us,1GB/s")
p, a, b = r.size, 20e-6, 1e-9
first = next(n for n in (1 << k for k in range(3, 31))
             if ring_time(p, n, a, b, 0.0) < recursive_doubling_time(p, n, a, b, 0.0))
report(ok=r.crossover == first, crossover=r.crossover, first_ring_win=first)
r.close()
"""


@pytest.mark.parametrize("p", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_auto_decides_on_the_modelled_links_under_the_virtual_clock(p):
    """No host measurement enters a virtual run: the crossover is where the α-β formulas of the
    modelled 20us,1GB/s link meet (the first power of two the ring wins), on every rank."""
    res = run_mpi(p, ["-c", AUTO_CROSSOVER], timeout=60).expect_ok()
    for r in res.records:
        assert r["crossover"] == r["first_ring_win"], r


def test_model_charges_reductions_at_the_clocks_compute_scale():
    """The virtual clock charges an addition as CPU time x --compute-scale; the model's γ kept
    the measured one, so under --compute-scale 1e-9 a 2-channel ring was predicted at 1.8x
    its virtual time whenever this host's adds measured slow (a flaky slow test). ``model``'s
    prediction under the virtual clock: the clock's cluster with γ measured x the scale."""
    import dataclasses

    from mpicomm.bench.model_rows import predicted
    from mpicomm.core import clock
    from mpicomm.core.clock import VirtualClock
    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.formulas import LinkModel, ModelParams
    from mpicomm.costmodel.profiles import build_cluster

    sizes = [8, 64, 512]
    link = LinkModel(1e-6, sizes, [1e-9] * 3)
    params = ModelParams(link, link, sizes, [2e-10, 3e-10, 5e-10], gamma_local=[1e-10] * 3)
    charged = build_cluster(ranks_per_node=2, inter="20us,1GB/s")
    opts = {"channels": 2, "crossover_bytes": 1 << 16}
    clock.set_source(VirtualClock(0.25).now, "virtual")
    try:
        got = predicted("ring", 4, 256, params, opts, charged)
    finally:
        clock.reset()
    gamma = params.gamma_at(256 / 4) * 0.25
    assert gamma == pytest.approx(0.75e-10)
    # host CPU time: an add is charged as CPU time, with no device kernel launch
    assert got == pytest.approx(cluster_time(
        "ring", 4, 256, dataclasses.replace(charged, gamma_s_per_byte=gamma, launch_s=0.0),
        opts), rel=1e-12)
    assert params.gamma == [2e-10, 3e-10, 5e-10]  # the measured record is left as it was


def test_model_predicts_the_devices_adds_under_the_device_model():
    """Under the device model (the virtual clock's default) the clock charges an add on the
    modelled device, but ``model``'s predicted column kept this host's measured γ: at 4 ranks
    on one node a one-server ps at 1 MiB was predicted 991 then 3,211 us in two runs against
    643 us measured both times (exercise 6). Now the device's γ: the host's does not enter."""
    import dataclasses

    from mpicomm.bench.model_rows import predicted
    from mpicomm.core import clock, flops
    from mpicomm.core.clock import VirtualClock
    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.device import device
    from mpicomm.costmodel.formulas import LinkModel, ModelParams
    from mpicomm.costmodel.profiles import build_cluster

    sizes = [8, 64, 512]
    link = LinkModel(1e-6, sizes, [1e-9] * 3)
    slow, fast = (ModelParams(link, link, sizes, [g] * 3) for g in (1e-8, 1e-11))  # host γ
    charged = build_cluster(ranks_per_node=4)
    opts = {"servers": 1, "crossover_bytes": 1 << 16}
    clock.set_source(VirtualClock().now, "virtual")
    flops.use(device("h100"))
    try:
        gamma = flops.gamma()
        got = [predicted("ps", 4, 1 << 20, params, dict(opts), charged) for params in (slow, fast)]
    finally:
        flops.reset()
        clock.reset()
    assert gamma == pytest.approx(3 / device("h100").memory_bytes_per_s)  # 3 bytes a byte
    want = cluster_time("ps", 4, 1 << 20, dataclasses.replace(charged, gamma_s_per_byte=gamma),
                        dict(opts))
    assert got == [pytest.approx(want, rel=1e-12)] * 2
