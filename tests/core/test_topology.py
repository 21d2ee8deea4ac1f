"""Topology: simulated blocks of ranks (even and uneven) and the real shared-memory split."""

import pytest
from mpi_harness import run_script


def expected_nodes(nranks, k):
    return [list(range(s, min(s + k, nranks))) for s in range(0, nranks, k)]


@pytest.mark.parametrize("nranks,k", [(1, 1), (4, 2), (5, 2), (5, 3), (3, 1), (4, 8)])
def test_simulated_layout(nranks, k):
    res = run_script(nranks, "topology_report.py", str(k), timeout=60).expect_ok()
    nodes = expected_nodes(nranks, k)
    assert len(res.records) == nranks
    for rec in res.records:
        r = rec["rank"]
        node = next(i for i, members in enumerate(nodes) if r in members)
        assert rec["nodes"] == nodes
        assert rec["node_id"] == node
        assert rec["local_rank"] == nodes[node].index(r)
        assert rec["local_size"] == rec["intra_size"] == len(nodes[node])
        assert rec["num_nodes"] == len(nodes)
        assert rec["is_leader"] == (rec["local_rank"] == 0)
        assert rec["leaders_size"] == (len(nodes) if rec["is_leader"] else None)
        # cross: same local rank on every node that has one
        peers = [n for n in nodes if len(n) > rec["local_rank"]]
        assert rec["cross_size"] == len(peers)
        assert rec["cross_rank"] == node


def test_real_split_is_one_node_here():
    """Without ranks_per_node, MPI's shared-memory split puts all local ranks on one node."""
    res = run_script(3, "topology_report.py", timeout=60, env={"MPICOMM_RANKS_PER_NODE": ""})
    res.expect_ok()
    for rec in res.records:
        assert rec["num_nodes"] == 1 and rec["node_sizes"] == [3]
        assert rec["local_rank"] == rec["rank"]


def test_bad_ranks_per_node_env_is_a_clear_error():
    res = run_script(2, "topology_report.py", timeout=60, env={"MPICOMM_RANKS_PER_NODE": "two"})
    assert res.returncode != 0 and not res.timed_out
    assert "MPICOMM_RANKS_PER_NODE='two'" in res.stderr


def test_a_link_no_message_crosses_is_named():
    from mpicomm.core.topology import unreached_link

    one_node, two_nodes, singles = [0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 2, 3]
    assert "--inter-link 20us,1GB/s: the 4 rank(s) of this job are on one node" in \
        unreached_link(one_node, "20us,1GB/s", None)
    assert "--intra-link 1us,10GB/s: every node of this job holds one rank" in \
        unreached_link(singles, None, "1us,10GB/s")
    assert unreached_link(two_nodes, "20us,1GB/s", "1us,10GB/s") is None
    assert unreached_link(singles, "20us,1GB/s", None) is None
    assert unreached_link(one_node, None, "1us,10GB/s") is None
    assert unreached_link(one_node, None, None) is None
    # --nics-per-node on one node: no message leaves it (it was accepted and did nothing)
    assert "--nics-per-node 2: the 4 rank(s) of this job are on one node" in \
        unreached_link(one_node, None, None, 2)
    assert unreached_link(two_nodes, None, None, 2) is None


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["compare", "--strategies", "ring,hierarchical", "--clock", "virtual", "--steps", "5",
     "--repeats", "1", "--no-baseline"],
    ["bench", "--strategies", "ring", "-b", "1M", "-e", "1M", "-n", "2"],
])
def test_an_inter_link_on_one_real_node_is_refused_on_every_rank(command):
    """`compare --strategies ring,hierarchical --inter-link 20us,1GB/s --clock virtual` on one
    host said "ring beats hierarchical: 1.16x": the ring ran on one node and never crossed the
    link (comm 0.55 ms against a model of 2.70), hierarchical on compare's nodes of 2 paid it;
    `bench` printed the link in its header and timed the ring without it."""
    from mpi_harness import run_mpi

    res = run_mpi(4, ["-m", "mpicomm", *command, "--inter-link", "20us,1GB/s"], timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("--inter-link 20us,1GB/s: the 4 rank(s) of this job are on one node") == 1, \
        res.tail()
    assert "Traceback" not in out and "beats" not in out and "ring     4" not in out, res.tail()


@pytest.mark.slow
def test_compare_under_an_inter_link_variable_on_one_host_is_refused():
    """With MPICOMM_INTER_LINK set and no --ranks-per-node, compare timed hierarchical on its
    nodes of 2 across the link and the ring on one node, never across it."""
    from mpi_harness import run_mpi

    res = run_mpi(4, ["-m", "mpicomm", "compare", "--strategies", "ring,hierarchical",
                      "--steps", "5", "--repeats", "1", "--no-baseline"], timeout=120,
                  env={"MPICOMM_INTER_LINK": "20us,1GB/s"})
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("MPICOMM_INTER_LINK on one host without --ranks-per-node") == 1, res.tail()
    assert "beats" not in out and "Traceback" not in out, res.tail()
