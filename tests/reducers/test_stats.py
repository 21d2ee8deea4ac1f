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


@pytest.mark.slow
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


N_BYTES = 4000  # 1000 float32: divisible by every segment count below
INTER_CASES = [
    # (strategy, options, {rank: (inter bytes sent, inter bytes received)}) at 4 ranks,
    # nodes {0, 1} and {2, 3}, one call of N_BYTES
    # ring: only 1 -> 2 and 3 -> 0 cross; each crossing carries 2(p-1)/p·n
    ("ring", {}, {0: (0, 6000), 1: (6000, 0), 2: (0, 6000), 3: (6000, 0)}),
    # reduce_scatter: every rank runs a 2-rank inter ring on n/L: 2(m-1)/m·n/L = n/2 each way
    ("hierarchical", {}, {r: (2000, 2000) for r in range(4)}),
    # leader: the leaders 0 and 2 run a 2-rank ring on all n: n each way
    ("hierarchical", {"variant": "leader"}, {0: (4000, 4000), 1: (0, 0), 2: (4000, 4000),
                                             3: (0, 0)}),
    # one colocated server on rank 0: workers 2, 3 push n across and pull n back
    ("ps", {}, {0: (8000, 8000), 1: (0, 0), 2: (4000, 4000), 3: (4000, 4000)}),
]


@pytest.mark.parametrize("strategy,options,expected", INTER_CASES, ids=str)
def test_inter_node_bytes_match_the_formulas(strategy, options, expected):
    """4 ranks as 2 nodes x 2: the transport's inter-node split per rank, exactly;
    the hierarchical form moves 8000 inter-node bytes in all, the flat ring 12000."""
    res = run_script(
        4, "check_reducer.py", strategy, json.dumps({"ranks_per_node": 2, **options}),
        "--lengths", "1000", "--dtypes", "float32", "--ops", "sum", "--repeat", "1", timeout=120,
    ).expect_ok()
    got = {r["rank"]: (r["inter_bytes_sent"], r["inter_bytes_recv"]) for r in res.records}
    assert got == expected
    for r in res.records:  # intra + inter = total: the split never exceeds the total
        assert r["inter_bytes_sent"] <= r["bytes_sent"] and r["inter_bytes_recv"] <= r["bytes_recv"]
