"""recursive_doubling against the NumPy reference, 1-5 ranks (3 and 5 exercise the fold)."""

import pytest
from mpi_harness import run_script

from mpicomm.reducers.recursive_doubling import fold_plan

LENGTHS = "1,2,p-1,1000,1000003"


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, pytest.param(5, marks=pytest.mark.slow)])
def test_recursive_doubling_matches_numpy(nranks):
    res = run_script(
        nranks, "check_reducer.py", "recursive_doubling", "{}", "--lengths", LENGTHS, timeout=180
    )
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)


@pytest.mark.parametrize("p", [1, 2, 3, 5, 6, 7, 8, 12])
def test_fold_plan_pairs_every_rank(p):
    """Folded ranks pair up; exchange partners are symmetric, one per round, lg pof2 rounds."""
    plans = [fold_plan(p, r) for r in range(p)]
    pof2 = 1 << (p.bit_length() - 1)
    active = [r for r in range(p) if plans[r][1] is None]
    assert len(active) == pof2
    for r, (below, above, partners) in enumerate(plans):
        if above is not None:
            assert plans[above][0] == r and partners == []
        if below is not None:
            assert plans[below][1] == r
        if r in active:
            assert len(partners) == pof2.bit_length() - 1
            for k, q in enumerate(partners):
                assert q in active and plans[q][2][k] == r
