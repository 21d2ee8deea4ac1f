"""native (MPI's in-place Allreduce) against the NumPy reference, 1-5 ranks."""

import pytest
from mpi_harness import run_script

LENGTHS = "1,2,p-1,1000,1000003"


@pytest.mark.parametrize("nranks", [1, 2, 3, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in (4, 5))])  # 4-5 ranks: the slow tier
def test_native_matches_numpy(nranks):
    res = run_script(nranks, "check_reducer.py", "native", "{}", "--lengths", LENGTHS, timeout=180)
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)
