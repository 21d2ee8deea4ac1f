"""The DDP communication hook: N steps of DDP in float64 with mpicomm's ring, ps and
hierarchical reducing every bucket end with the parameters DDP's own gloo allreduce reaches
(to 1e-9), at 2 and 3 ranks; the hook really is what DDP applies (op="sum" diverges)."""

import json

import pytest

pytest.importorskip("torch")
from mpi_harness import run_script  # noqa: E402

STEPS = 8
RUNS = [
    ["ring", "ring", {}],
    ["ps_S2", "ps", {"servers": 2}],
    ["ps_S1", "ps", {}],
    ["hierarchical", "hierarchical", {"ranks_per_node": 2}],
    ["hierarchical_leader", "hierarchical", {"ranks_per_node": 2, "variant": "leader"}],
    ["native", "native", {}],
    ["auto", "auto", {}],
    ["sum_control", "ring", {"op": "sum"}],  # gradients p× too large: must NOT match
]


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [2, 3])
def test_hook_matches_ddp_gloo_allreduce(nranks):
    res = run_script(nranks, "torch_ddp_agree.py", STEPS, json.dumps(RUNS), timeout=240)
    res.expect_ok()
    by_label = {}
    for rec in res.records:
        if "label" in rec:
            by_label.setdefault(rec["label"], []).append(rec)
    assert sorted(by_label) == sorted(r[0] for r in RUNS)
    for label, recs in by_label.items():
        assert len(recs) == nranks, f"{label}: {len(recs)} ranks reported"
        for rec in recs:
            assert rec["moved"] > 1e-2  # training moved the params: agreement means something
            assert rec["iterations"] == STEPS and rec["buckets"] >= 2  # the hook ran per bucket
            assert rec["calls"] >= STEPS * rec["buckets"] - rec["buckets"]
            if label == "sum_control":
                assert rec["diff"] > 1e-3, "op='sum' should change the result: is the hook used?"
            else:
                assert rec["diff"] <= 1e-9, f"{label} rank {rec['rank']}: {rec['diff']:.3g}"
