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
