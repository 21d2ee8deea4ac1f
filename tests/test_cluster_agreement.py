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
