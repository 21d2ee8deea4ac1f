"""All strategies agree with each other to floating-point reordering."""

import pytest
from mpi_harness import run_script


@pytest.mark.parametrize("nranks", [3, pytest.param(5, marks=pytest.mark.slow)])
def test_all_strategies_agree(nranks):
    res = run_script(nranks, "check_agreement.py", "1,2,4,999,100003", timeout=180).expect_ok()
    compared = res.records[0]["compared"]
    for name in ("native", "ring", "hierarchical", "ps"):
        assert name in compared
