"""This host's measured links for the virtual clock (``--links-from``).

A ``mpicomm model --json`` file holds α, β(m) and γ(m); ``host_links`` reads it as
``MeasuredLink``s whose one-way time is t(m) = α + m·β(m) at the measured sizes,
linear between them. The virtual transport charges a message t(m), and an MPI
collective the sum of its steps' t plus its reductions' γ.
"""

import json
import math
from dataclasses import asdict

import numpy as np
import pytest
from mpi_harness import run_mpi

from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions
from mpicomm.costmodel.calibrate import HOST, MeasuredLink, host_links, measured_collective_seconds
from mpicomm.costmodel.formulas import LinkModel, ModelParams
from mpicomm.costmodel.native import SHORT_BYTES, mpi_collective_time

SIZES = [1 << k for k in range(3, 21)]


def _times(alpha=2e-6, jump_at=8192, jump=3e-6, gbps=10.0):
    """One-way times with a protocol switch (a step of ``jump`` from ``jump_at`` bytes on)."""
    return [alpha + m / (gbps * 1e9) + (jump if m >= jump_at else 0.0) for m in SIZES]


def _write(path, times, gamma=0.25e-9, swaps=None, cold=None):
    link = LinkModel.from_pingpong(SIZES, times, (0, 1), swaps)
    link.cold = cold
    params = ModelParams(link, link, SIZES, [gamma] * len(SIZES))
    path.write_text(json.dumps({"command": "model", "params": asdict(params)}))
    return link


def test_measured_link_is_the_pingpong_at_measured_sizes_and_linear_between(tmp_path):
    times = _times()
    _write(tmp_path / "m.json", times)
    intra, inter = host_links(str(tmp_path / "m.json"))
    for m, t in zip(SIZES, times, strict=True):
        assert math.isclose(intra.seconds(m), t, rel_tol=1e-9), m
    mid = 3 * 4096  # between 8 KiB and 16 KiB: on the straight line joining them
    assert math.isclose(intra.seconds(mid), (times[10] + times[11]) / 2, rel_tol=1e-9)
    assert intra.seconds(1) == times[0]  # below the smallest size: its time
    big = SIZES[-1] * 4  # beyond the largest: its β goes on
    assert math.isclose(intra.seconds(big) - times[-1], 3 * SIZES[-1] / 10e9, rel_tol=1e-6)
    assert intra.wire(SIZES[-1]) == pytest.approx(times[-1] - intra.latency)
    assert inter.seconds(mid) == intra.seconds(mid)  # one node measured: inter = intra
    assert "m.json" in str(intra)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("kind", ["allreduce", "reduce", "bcast", "allgather"])
@pytest.mark.parametrize("nbytes", [512, 1 << 20])
def test_measured_collectives_are_the_linear_formulas_on_a_linear_link(p, kind, nbytes):
    alpha, beta, gamma = 3e-6, 1 / 5e9, 0.5e-9
    sizes = [1 << k for k in range(3, 30)]
    link = MeasuredLink(alpha, sizes, [beta] * len(sizes), sizes, [gamma] * len(sizes), "lin")
    got = measured_collective_seconds(kind, nbytes, p, link)
    want = mpi_collective_time(kind, nbytes, p, 1, (alpha, beta), (alpha, beta))
    lg = math.log2(p)
    if kind in ("allreduce", "reduce"):  # the reductions inside MPI, charged by γ
        want += (lg * nbytes if nbytes < SHORT_BYTES else (p - 1) / p * nbytes) * gamma
    assert got == pytest.approx(want, rel=1e-9)


def test_measured_collective_keeps_the_protocol_switch():
    link = MeasuredLink(2e-6, SIZES, LinkModel.split(SIZES, _times())[1], SIZES,
                        [0.0] * len(SIZES), "jump")
    # 2 ranks, 32 KiB: MPICH exchanges 16 KiB twice, each past the 8 KiB switch
    assert measured_collective_seconds("allreduce", 32768, 2, link) == pytest.approx(
        2 * link.seconds(16384))
    assert link.seconds(16384) > 2e-6 + 16384 / 10e9 + 2.9e-6


def test_missing_calibration_names_the_command_that_writes_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="mpicomm model") as err:
        host_links(HOST)
    assert "this_machine.json" in str(err.value)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="bad.json"):
        host_links(str(tmp_path / "bad.json"))


def test_links_from_is_a_reducer_option():
    assert ReducerOptions(links_from=HOST).links_from == HOST
    assert ReducerOptions().links_from is None


SENDRECV = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me = comm.Get_rank()
nbytes = int(sys.argv[2])
virtual.install(1e-9)
t = make_transport(comm, node_map(comm, None), links_from=sys.argv[1])
out, into = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
t.footprint = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # a call's buffers (bytes a rank)
t0 = clock.now()
t.sendrecv(out, 1 - me, into, 1 - me, 5)
t1 = clock.now()
virtual.barrier(comm)
t2 = clock.now()
if me == 0:
    t.send(out, 1, 6)
else:
    t.recv(into, 0, 6)
report(ok=bool(into.all()), exchange=t1 - t0, one_way=clock.now() - t2)
"""


@pytest.mark.slow
@pytest.mark.parametrize("nbytes", [4096, 12288, 1 << 20])
def test_virtual_sendrecv_takes_the_measured_time(tmp_path, nbytes):
    path = tmp_path / "m.json"
    _write(path, _times())
    res = run_mpi(2, ["-c", SENDRECV, str(path), str(nbytes)], timeout=60).expect_ok()
    want = MeasuredLink(*_params(path), "").seconds(nbytes)
    for r in res.records:
        assert r["ok"]
        assert abs(r["exchange"] - want) < 1e-8, (r["rank"], r["exchange"], want)
        if r["rank"] == 1:
            assert abs(r["one_way"] - want) < 1e-8, (r["one_way"], want)


def _swaps(times):
    """Exchange times unlike the one-way ones: 1.8x to 4 KiB (each rank runs MPI's send and
    receive paths in turn), 0.6x from 512 KiB (both cores copy at once: here at 1 MiB)."""
    return [t * (1.8 if m <= 4096 else 0.6 if m >= 1 << 19 else 1.2)
            for m, t in zip(SIZES, times, strict=True)]


def test_measured_link_reads_the_exchange_times_when_calibrated(tmp_path):
    times = _times()
    _write(tmp_path / "x.json", times, swaps=_swaps(times))
    link, _ = host_links(str(tmp_path / "x.json"))
    for m, t, tx in zip(SIZES, times, _swaps(times), strict=True):
        assert math.isclose(link.seconds(m), t, rel_tol=1e-9), m
        assert math.isclose(link.exchange_seconds(m), tx, rel_tol=1e-9), m
        assert link.queue_seconds(m, exchange=True) == pytest.approx(tx - link.latency)
    _write(tmp_path / "p.json", times)  # no exchange measured: an exchange is two one-ways
    plain, _ = host_links(str(tmp_path / "p.json"))
    assert all(plain.exchange_seconds(m) == plain.seconds(m) for m in SIZES)
    # MPICH's 2-rank allreduce: recursive halving then doubling, both exchanges
    n = 1 << 20
    assert measured_collective_seconds("allreduce", n, 2, link) == pytest.approx(
        2 * link.exchange_seconds(n // 2) + n // 2 * link.gamma(n // 2))
    assert measured_collective_seconds("allreduce", 512, 2, link) == pytest.approx(
        link.exchange_seconds(512) + 512 * link.gamma(512))


@pytest.mark.slow
@pytest.mark.parametrize("nbytes", [2048, 1 << 20])
def test_virtual_sendrecv_takes_the_exchange_time_and_a_send_the_one_way(tmp_path, nbytes):
    path = tmp_path / "x.json"
    times = _times()
    _write(path, times, swaps=_swaps(times))
    res = run_mpi(2, ["-c", SENDRECV, str(path), str(nbytes)], timeout=60).expect_ok()
    link, _ = host_links(str(path))
    for r in res.records:
        assert r["ok"]
        assert abs(r["exchange"] - link.exchange_seconds(nbytes)) < 1e-8, (r["rank"], r)
        if r["rank"] == 1:  # the receiver of a one-way message: t(m)
            assert abs(r["one_way"] - link.seconds(nbytes)) < 1e-8, r


def _params(path):
    d = json.loads(path.read_text())["params"]
    return d["intra"]["alpha"], d["intra"]["sizes"], d["intra"]["beta"], SIZES, np.zeros(len(SIZES))


CACHE = 1 << 20  # the cold tables' last-level cache: 512 KiB a rank at 2 ranks on one host


def _cold(times):
    """Cold tables: 2x the warm one-way times and 3x the exchange ones (data from memory)."""
    split = LinkModel.from_pingpong(SIZES, [2 * t for t in times], (0, 1),
                                    [3 * t for t in _swaps(times)])
    return {"alpha": split.alpha, "beta": split.beta, "alpha_x": split.alpha_x,
            "beta_x": split.beta_x, "cache_bytes": CACHE}


def test_measured_link_reads_the_cold_tables(tmp_path):
    times = _times()
    _write(tmp_path / "c.json", times, swaps=_swaps(times), cold=_cold(times))
    link, _ = host_links(str(tmp_path / "c.json"))
    assert link.cache_bytes == CACHE
    for m, t, tx in zip(SIZES, times, _swaps(times), strict=True):
        assert link.queue_seconds(m) == pytest.approx(t - link.latency)
        assert link.queue_seconds(m, cold=True) == pytest.approx(2 * t - link.latency)
        assert link.queue_seconds(m, True, True) == pytest.approx(3 * tx - link.latency)
    _write(tmp_path / "w.json", times, swaps=_swaps(times))  # none measured: warm alone
    warm, _ = host_links(str(tmp_path / "w.json"))
    assert warm.cold is None
    assert warm.queue_seconds(4096, True, True) == warm.queue_seconds(4096, True)


@pytest.mark.slow
@pytest.mark.parametrize("footprint", [0, CACHE // 2 - 1, CACHE // 2, 4 * CACHE])
def test_a_call_whose_buffers_fill_the_cache_is_charged_the_cold_tables(tmp_path, footprint):
    """2 ranks share the host's cache: a call of CACHE/2 bytes a rank or more is cold."""
    path = tmp_path / "c.json"
    times = _times()
    _write(path, times, swaps=_swaps(times), cold=_cold(times))
    nbytes = 1 << 16
    res = run_mpi(2, ["-c", SENDRECV, str(path), str(nbytes), str(footprint)],
                  timeout=60).expect_ok()
    link, _ = host_links(str(path))
    cold = footprint >= CACHE // 2
    want_x = (link.cold if cold else link).exchange_seconds(nbytes)
    want = link.latency + link.queue_seconds(nbytes, cold=cold)
    for r in res.records:
        assert abs(r["exchange"] - want_x) < 1e-8, (r["rank"], r, want_x)
        if r["rank"] == 1:
            assert abs(r["one_way"] - want) < 1e-8, (r, want)


def test_mpichs_temporary_above_the_mmap_threshold_pays_its_page_faults(tmp_path):
    """Native at 64 MiB: MPICH mallocs a 64 MiB temporary per call, a fresh mapping each time
    above glibc's 32 MiB threshold, and faults its pages in; below it the heap reuses one."""
    times = _times()
    fresh = 0.3e-9  # s/byte: ~1.2 us a 4 KiB page
    path = tmp_path / "f.json"
    _write(path, times)
    doc = json.loads(path.read_text())
    doc["params"]["extra"] = {"fresh_s_per_byte": fresh}
    path.write_text(json.dumps(doc))
    link, _ = host_links(str(path))
    assert link.fresh == fresh
    plain = MeasuredLink(link.latency, link.sizes, LinkModel.split(SIZES, times)[1], SIZES,
                         [0.25e-9] * len(SIZES), "no faults")
    for n, faults in ((32 << 20, 0.0), (64 << 20, (64 << 20) * fresh)):
        for kind, extra in (("allreduce", faults), ("reduce", faults), ("bcast", 0.0)):
            assert measured_collective_seconds(kind, n, 2, link) == pytest.approx(
                measured_collective_seconds(kind, n, 2, plain) + extra), (kind, n)


LATE = """
import sys
import numpy as np
from mpi4py import MPI
from mpi_harness import report
from mpicomm.core import clock
from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, virtual

comm = MPI.COMM_WORLD
me = comm.Get_rank()
nbytes = int(sys.argv[2])
clk = virtual.install(1e-9)
t = make_transport(comm, node_map(comm, None), links_from=sys.argv[1])
buf = np.ones(nbytes, np.uint8)
virtual.barrier(comm)
t0 = clock.now()
if me == 0:
    t.send(buf, 1, 3)
else:
    clk.charge(1e-3)  # the receive is posted 1 ms late
    t.recv(buf, 0, 3)
report(ok=True, took=clock.now() - t0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("nbytes", [4096, 65536])
def test_a_rendezvous_message_waits_for_its_receive(tmp_path, nbytes):
    """The host's MPI moves a message of >= 8 KiB (MPICH's single-copy threshold) only once
    the receive is posted: 1 ms + t(m) for the late receiver; a smaller one was sent eagerly
    and is there when the receive is posted (1 ms)."""
    path = tmp_path / "m.json"
    _write(path, _times())
    link, _ = host_links(str(path))
    res = run_mpi(2, ["-c", LATE, str(path), str(nbytes)], timeout=60).expect_ok()
    took = {r["rank"]: r["took"] for r in res.records}
    want = 1e-3 + (link.seconds(nbytes) if nbytes >= 8192 else 0.0)
    assert abs(took[1] - want) < 1e-8, (took, want)
