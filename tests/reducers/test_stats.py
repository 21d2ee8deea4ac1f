"""reducer.stats: bytes are conserved (what ranks send, ranks receive) and calls are counted.

Uneven segments make per-rank send and receive counts differ, so the test
sums over ranks: a strategy that counts the wrong slice on some rank (e.g.
its own segment instead of its neighbour's) breaks the equality.
"""

import json

import pytest
from mpi_harness import STRATEGY_CASES, run_script


@pytest.mark.parametrize("nranks", [3, 5])
@pytest.mark.parametrize("strategy,options", STRATEGY_CASES, ids=str)
def test_bytes_sent_equal_bytes_received_over_ranks(strategy, options, nranks):
    res = run_script(
        nranks,
        "check_reducer.py",
        strategy,
        json.dumps(options),
        "--lengths",
        "7,1001",
        "--dtypes",
        "float32",
        "--ops",
        "sum",
        "--repeat",
        "1",
        timeout=120,
    ).expect_ok()
    sent = sum(r["bytes_sent"] for r in res.records)
    recv = sum(r["bytes_recv"] for r in res.records)
    assert sent == recv > 0
    workers = [r for r in res.records if r.get("role") != "server"]
    assert all(r["calls"] == 2 for r in workers)


def test_hierarchical_on_one_node_counts_exactly_like_the_ring():
    """One node of 3 ranks: the 2-D form is the ring, byte for byte, per rank
    (uneven segments at n = 7, 1001 make sent and received differ per rank)."""
    args = ("--lengths", "7,1001", "--dtypes", "float32", "--ops", "sum", "--repeat", "1")
    ring = run_script(3, "check_reducer.py", "ring", "{}", *args, timeout=120).expect_ok()
    hier = run_script(
        3, "check_reducer.py", "hierarchical", '{"ranks_per_node": 3}', *args, timeout=120
    ).expect_ok()
    per_rank = {r["rank"]: (r["bytes_sent"], r["bytes_recv"]) for r in ring.records}
    assert len({v for v in per_rank.values()}) > 1  # the uneven case really is uneven
    for r in hier.records:
        assert (r["bytes_sent"], r["bytes_recv"]) == per_rank[r["rank"]]
