"""Issue 30's "Agreement": the virtual clock and the predictor model one cluster.

8 ranks as 2 nodes x 4, ``--intra-link 2us,10GB/s --inter-link 20us,1GB/s``, 16 MiB, with the
default NICs (one per rank) and again with ``--nics-per-node 4``: ``bench --clock virtual``
and ``model --predict`` given the same flags agree within 10% for ring, ring ``--channels 4``,
tree, hierarchical, ps S=1 and ps S=8 (and native: MPI's Allreduce as MPICH picks it, the one
formula both use). Before, the clock gave each rank its own NIC and the
predictor each node one, the predictor took NCCL's pipelined forms for mpicomm's reducers,
and they disagreed by 0.16x-1.2x (hierarchical 0.53x, ps S=8 0.16x, ring --channels 4
0.33x). The bench charges compute as ~nothing (``--compute-scale 1e-6``): the comparison
is of the communication model (the adds are the device model's to charge).
"""

import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT, run_mpi

FLAGS = ["--ranks-per-node", "4", "--intra-link", "2us,10GB/s", "--inter-link", "20us,1GB/s"]
N = 16 << 20
# one bench run per group (the options of one strategy are ignored by the others); each
# strategy's own options for the predictor
GROUPS = [{"ring": [], "tree": [], "hierarchical": [], "ps": ["--servers", "1"], "native": []},
          {"ring": ["--channels", "4"], "ps": ["--servers", "8"]}]


def _bench(tmp_path, strategies: str, opts: list[str], nics: list[str]) -> dict:
    out = tmp_path / "b.json"
    res = run_mpi(8, ["-m", "mpicomm", "bench", "--clock", "virtual", "--compute-scale", "1e-6",
                      *FLAGS, *nics, "-b", str(N), "-e", str(N), "-n", "2", "-w", "1", "-c", "1",
                      "--strategies", strategies, *opts, "--json", str(out)], timeout=300)
    assert res.returncode == 0, res.tail()
    doc = json.loads(out.read_text())
    assert doc["cluster"]["line"] == _first_line(res.stdout)[2:]  # JSON and first line agree
    assert not any(r["wrong"] for r in doc["results"])
    return {r["strategy"]: r["time_us"] for r in doc["results"]}


def _first_line(text: str) -> str:
    return next(ln for ln in text.splitlines() if not ln.startswith("@@"))


def _predict(strategy: str, opts: list[str], nics: list[str]) -> tuple[float, str]:
    done = subprocess.run([sys.executable, "-m", "mpicomm", "model", "--predict", "--ranks", "8",
                           *FLAGS, *nics, "-b", str(N), "-e", str(N), "--strategies", strategy,
                           *opts, "--table"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith(" ") and strategy in ln)
    value, unit = row.split()[4:6]
    return float(value) * {"us": 1.0, "ms": 1e3, "s": 1e6}[unit], done.stdout.splitlines()[0]


@pytest.mark.slow
@pytest.mark.parametrize("nics", [[], ["--nics-per-node", "4"]], ids=["default-nics", "4-nics"])
def test_virtual_bench_and_predictor_agree_within_10_percent(tmp_path, nics):
    for group in GROUPS:
        opts = [o for own in group.values() for o in own]
        measured = _bench(tmp_path, ",".join(group), opts, nics)
        for strategy, own in group.items():
            predicted, _ = _predict(strategy, own, nics)
            ratio = measured[strategy] / predicted
            assert 0.9 <= ratio <= 1.1, (strategy, own, nics, measured[strategy], predicted)


def test_every_command_builds_the_same_cluster_from_the_same_flags():
    """The predictor's cluster (``model --predict``) and a virtual run's (``cluster_of``, what
    bench, compare and train print and the reducers' transports charge) from the same flags:
    the same links, ranks and NICs per node (one NIC per rank unless told)."""
    import argparse

    from mpicomm.cli import model as model_cmd
    from mpicomm.cli.predict import cluster_source as _source
    from mpicomm.costmodel.profiles import build_cluster, cluster_of

    parser = argparse.ArgumentParser()
    model_cmd.add_arguments(parser)
    for extra in ([], ["--nics-per-node", "2"]):
        args = parser.parse_args(["--predict", *FLAGS, *extra])
        predicted, _ = _source(args)
        run = cluster_of(args, 8)
        assert (predicted.intra, predicted.inter) == (run.intra, run.inter)
        assert (predicted.ranks_per_node, predicted.nics_per_node) == \
            (run.ranks_per_node, run.nics_per_node) == (4, 2 if extra else 4)
        assert predicted.line() == run.line()
        assert not predicted.pipelined and not run.pipelined  # mpicomm's reducers
    transport = build_cluster(ranks_per_node=4, inter="20us,1GB/s", intra="2us,10GB/s")
    assert transport.line() == cluster_of(parser.parse_args(FLAGS), 8).line()


@pytest.mark.slow
def test_ps_servers_share_a_nic_only_with_servers(tmp_path):
    """8 ranks as 2 nodes x 4 behind ONE NIC a node, ps with S = 2 (a server a node): a
    node's NIC carries its 4 workers' pushes of n/S to the other node's server, then that
    server's answers to its 4 workers: 2·L·(n/S) bytes each way, 4n·β at L = 4, S = 2. Both
    the clock and the predictor charged every queue the 4-rank share, the servers' incast
    too: 16n·β, four times the NIC's bytes (the clock's receive queue and the predictor's
    server queue now share by the node's servers, the workers' by its workers)."""
    nics = ["--nics-per-node", "1"]
    measured = _bench(tmp_path, "ps", ["--servers", "2"], nics)["ps"]
    predicted, _ = _predict("ps", ["--servers", "2"], nics)
    local, servers, beta = 4, 2, 1e-9  # --inter-link 20us,1GB/s: β = 1 ns a byte
    nic_us = 2 * local * (N / servers) * beta * 1e6
    assert 0.9 <= measured / predicted <= 1.1, (measured, predicted)
    assert 1.0 <= measured / nic_us <= 1.15, (measured, nic_us)  # α and the adds on top


def test_ps_formula_shares_nics_by_role():
    """``ps_interfaces_time`` with one NIC a node: a server's queue shares it with the
    node's servers, a worker's with its workers (2 nodes x 4, S = 2: 2·4·(n/2)·β = 4n·β
    plus α per round), not every queue with all four ranks (16n·β)."""
    from mpicomm.costmodel.cluster_formulas import ps_interfaces_time

    n, beta, piece = float(8 << 20), 1e-9, float(1 << 20)
    t = ps_interfaces_time(8, n, 4, (0.0, 1e-12), (0.0, beta), 0.0, servers=2, piece=piece,
                           nics=1)
    assert t == pytest.approx(4 * n * beta)
    # one NIC a rank (None): each queue alone on its own; the server's 4 remote workers
    # queue n/S each on it: 4·(n/2)·β per phase
    alone = ps_interfaces_time(8, n, 4, (0.0, 1e-12), (0.0, beta), 0.0, servers=2,
                               piece=piece)
    assert alone == pytest.approx(4 * n * beta)
    # S = 8 (every rank serves) on one NIC a node: all four share it both ways
    every = ps_interfaces_time(8, n, 4, (0.0, 1e-12), (0.0, beta), 0.0, servers=8,
                               piece=piece, nics=1)
    assert every == pytest.approx(2 * 4 * 4 * (n / 8) * beta)


@pytest.mark.slow
def test_hierarchical_shares_nics_as_the_clock_does_when_they_do_not_divide_the_node(tmp_path):
    """2 nodes x 4 behind 3 NICs a node: the 4 ranks of a node cross at once in hierarchical's
    ring across nodes, so some NIC carries 2 of them (``queues.interface_share``: ⌈4/3⌉, what
    the clock charges). Before, the predictor took 4/3 (``max(1, local/nics)``) and predicted
    hierarchical 1.4x faster than the clock ran it."""
    nics = ["--nics-per-node", "3"]
    measured = _bench(tmp_path, "hierarchical", [], nics)["hierarchical"]
    predicted, _ = _predict("hierarchical", [], nics)
    assert 0.9 <= measured / predicted <= 1.1, (measured, predicted)
