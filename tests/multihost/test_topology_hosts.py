"""Topology by host name: nodes, local ranks and leaders of real hosts (namespaces)."""

import pytest
from across import hosts, run_script_across


def expected(slots):
    """Hosts fill in order: host k holds the next slots[k] ranks."""
    nodes, r = [], 0
    for s in slots:
        if s:
            nodes.append(list(range(r, r + s)))
            r += s
    return nodes


@pytest.mark.parametrize("slots", [[2, 1], [1, 3, 2, 1]], ids=["2hosts", "4hosts"])
def test_nodes_local_ranks_leaders_by_host(slots):
    with hosts(len(slots), rate=None) as net:
        res = run_script_across(net, slots, "topology_report.py", timeout=90).expect_ok()
    nodes = expected(slots)
    assert len(res.records) == sum(slots)
    for rec in res.records:
        node = next(i for i, members in enumerate(nodes) if rec["rank"] in members)
        assert rec["num_nodes"] == len(nodes), rec
        assert rec["nodes"] == nodes, rec
        assert rec["node_id"] == node and rec["node_sizes"] == [len(m) for m in nodes], rec
        assert rec["local_rank"] == nodes[node].index(rec["rank"]), rec
        assert rec["local_size"] == rec["intra_size"] == len(nodes[node]), rec
        assert rec["is_leader"] == (rec["local_rank"] == 0), rec
        assert rec["leaders_size"] == (len(nodes) if rec["is_leader"] else None), rec
