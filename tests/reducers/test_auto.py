"""auto (recursive doubling below the crossover, ring above) against the NumPy reference."""

import pytest
from mpi_harness import run_mpi, run_script

LENGTHS = "1,2,p-1,1000,1000003"


@pytest.mark.parametrize("nranks", [1, 2, 3, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in (4, 5))])  # 4-5: 9-12 CPU-s
def test_auto_matches_numpy(nranks):
    """Crossover from the cost model (measured at construction)."""
    res = run_script(nranks, "check_reducer.py", "auto", "{}", "--lengths", LENGTHS, timeout=180)
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)


@pytest.mark.parametrize("nranks", [2, 3, pytest.param(5, marks=pytest.mark.slow)])
def test_auto_both_paths(nranks):
    """At 4096 B: 1000 float32 (4000 B) take recursive doubling, 1000 float64 the ring."""
    res = run_script(nranks, "check_reducer.py", "auto", '{"crossover_bytes": 4096}',
                     "--lengths", "1000,1000003", timeout=180)
    res.expect_ok()


CHOICE = """
from mpi_harness import report
import mpicomm
r = mpicomm.make_reducer("auto")
report(ok=True, crossover=r.describe()["crossover_bytes"])
r.close()
"""


@pytest.mark.parametrize("nranks", [2, 3])
def test_auto_crossover_agreed(nranks):
    """Every rank switches at the same, plausible size (a split choice would deadlock)."""
    res = run_mpi(nranks, ["-c", CHOICE], timeout=120).expect_ok()
    xs = {r["crossover"] for r in res.records}
    assert len(xs) == 1, f"ranks disagree on the crossover: {xs}"
    (x,) = xs
    assert 8 <= x <= 1 << 31
