"""Bytes on each host's link (the switch's veth counters): hierarchical's intra-node phase
stays inside a host, only its inter-node phase crosses; the flat ring crosses more."""

import pytest
from across import hosts, run_script_across

N = 2_000_003  # float32 elements per call
CALLS = 4
SLOTS = [2, 2]  # 2 hosts x 2 ranks


def crossing_bytes(strategy: str) -> float:
    """Bytes each host sends to the other per call, from the algorithm (not the code).

    hierarchical (2 hosts, 2 local ranks): each local rank runs a 2-rank ring over its half,
    sending (N_hosts-1)/N_hosts of it twice: 2 * 1/2 * n/2 per rank, n/2 per rank, n per
    host; its intra phase sends n per rank too, but on the host's own loopback.
    ring (4 ranks, 0-1 | 2-3): 2(p-1) chunks of n/p per rank; ranks 1 and 3 send across:
    1.5 n per host.
    """
    n = 4 * N
    return {"hierarchical": 1.0 * n, "ring": 1.5 * n}[strategy]


@pytest.mark.parametrize("strategy", ["hierarchical", "ring"])
def test_only_the_inter_node_phase_crosses_the_links(strategy):
    with hosts(len(SLOTS), rate="1gbit") as net:
        before = net.link_bytes()
        res = run_script_across(net, SLOTS, "check_reducer.py", strategy, "{}",
                                "--lengths", str(N), "--dtypes", "float32", "--ops", "sum",
                                "--repeat", str(CALLS), timeout=180)
        after = net.link_bytes()
    res.expect_ok()
    model = CALLS * crossing_bytes(strategy)
    by_rank = {r["rank"]: r for r in res.records}
    for k, host in enumerate(net.names):
        sent = after[host]["sent"] - before[host]["sent"]
        counted = sum(by_rank[r]["inter_bytes_sent"] for r in range(2 * k, 2 * k + 2))
        # TCP/IP headers add about 4 %; the job's start-up traffic well under 2 MB
        assert model <= sent <= 1.08 * model + 2e6, (host, sent, model)
        assert counted == pytest.approx(model, rel=1e-3), (host, counted, model)
