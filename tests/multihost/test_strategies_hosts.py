"""Every strategy exact against NumPy across 2 and 4 real hosts, uneven ranks per host
(hierarchical finds the hosts itself: no --ranks-per-node)."""

import json

import pytest
from across import hosts, run_script_across

from mpicomm.reducers import REDUCERS

CASES = [(name, {}) for name in REDUCERS] + [
    ("hierarchical", {"variant": "leader"}),
    ("ps", {"servers": 2}),
    ("ps", {"dedicated": True}),
]
LAYOUTS = {"2hosts": [2, 3], "4hosts": [1, 3, 2, 1]}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("strategy,options", CASES,
                         ids=[f"{s}-{json.dumps(o, separators=(',', ':'))}" for s, o in CASES])
def test_strategy_exact_across_hosts(layout, strategy, options):
    slots = LAYOUTS[layout]
    with hosts(len(slots), rate="1gbit") as net:
        res = run_script_across(net, slots, "check_reducer.py", strategy, json.dumps(options),
                                "--lengths", "1,2,p-1,1000,100003", timeout=180)
    res.expect_ok()
    workers = [r for r in res.records if r.get("role") != "server"]
    assert workers and all(r["calls"] > 0 for r in workers)
    if strategy != "native":
        # a hand-written strategy between hosts: some of its bytes left a node
        assert sum(r["inter_bytes_sent"] for r in res.records) > 0, res.records
