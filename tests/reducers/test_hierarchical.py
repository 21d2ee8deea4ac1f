"""hierarchical (2-D reduce-scatter and leader variants) against the NumPy reference.

Simulated nodes of 1, 2 and 3 ranks cover: one rank per node (pure inter-node
ring), one node holding every rank (pure intra-node ring), and uneven nodes
(5 ranks in nodes of 2 -> [2, 2, 1]; 4 ranks in nodes of 3 -> [3, 1]).
"""

import json

import pytest
from mpi_harness import run_script

LENGTHS = "1,2,p-1,1000,1000003"


@pytest.mark.parametrize("variant", ["reduce_scatter", "leader"])
@pytest.mark.parametrize("nranks", [1, 2, 3, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in (4, 5))])  # 4-5 ranks: the slow tier
def test_hierarchical_matches_numpy(nranks, variant):
    opts = json.dumps({"ranks_per_node": 2, "variant": variant})
    res = run_script(
        nranks, "check_reducer.py", "hierarchical", opts, "--lengths", LENGTHS, timeout=180
    )
    res.expect_ok()


@pytest.mark.parametrize("variant", ["reduce_scatter", "leader"])
@pytest.mark.parametrize("nranks,ranks_per_node", [(3, 1), (4, 3), *(
    pytest.param(5, k, marks=pytest.mark.slow) for k in (3, 5, 4))])
def test_hierarchical_node_shapes(nranks, ranks_per_node, variant):
    opts = json.dumps({"ranks_per_node": ranks_per_node, "variant": variant})
    res = run_script(
        nranks,
        "check_reducer.py",
        "hierarchical",
        opts,
        "--lengths",
        "1,p-1,7,1001,65537",
        timeout=180,
    )
    res.expect_ok()


def test_hierarchical_env_var_sets_ranks_per_node():
    """MPICOMM_RANKS_PER_NODE selects the simulated layout without code changes."""
    res = run_script(4, "topology_report.py", env={"MPICOMM_RANKS_PER_NODE": "3"}, timeout=60)
    res.expect_ok()
    for rec in res.records:
        assert rec["node_sizes"] == [3, 1]
        assert rec["node_id"] == (0 if rec["rank"] < 3 else 1)
