"""The hot path (``Reducer.allreduce`` on a layout it has a plan for) keeps every guarantee of
the checked path: same sums and counts, same refusals, the stall log, tracing, emulated links."""

import pytest
from mpi_harness import run_script


@pytest.mark.slow  # several seconds per rank count (CI's slow step)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_hot_path_matches_the_checked_path(nranks):
    run_script(nranks, "check_hot_path.py", timeout=120).expect_ok()
