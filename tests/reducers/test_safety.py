"""The base class's safety: one strategy and options on every rank, one caller at a time,
error-feedback state keyed by the caller's bucket id (never an address), bounded memory."""

import pytest
from mpi_harness import run_mpi, run_script


@pytest.mark.parametrize("nranks", [2, 3])
def test_ranks_asking_for_different_strategies_all_raise(nranks):
    run_script(nranks, "check_strategy_agree.py", timeout=60).expect_ok()


def test_ring_on_rank_0_and_ps_on_rank_1_exits_nonzero_fast():
    code = ("import mpicomm; from mpi4py import MPI; "
            "mpicomm.make_reducer('ring' if MPI.COMM_WORLD.Get_rank() == 0 else 'ps')")
    res = run_mpi(2, ["-c", code], timeout=30)
    assert not res.timed_out and res.returncode != 0, res.tail()
    assert "'ring'" in res.stderr and "'ps'" in res.stderr, res.tail()


@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_one_caller_at_a_time_and_keyed_residuals(nranks):
    run_script(nranks, "check_safety.py", timeout=90).expect_ok()


@pytest.mark.slow  # several seconds (CI's slow step)
def test_topk_state_stays_bounded_over_fresh_buffers():
    res = run_script(4, "check_topk_memory.py", "2000", timeout=240).expect_ok()
    grown = max(r["grown_mb"] for r in res.records)
    assert grown < 20, res.records


@pytest.mark.slow  # launches mpiexec
def test_stall_settings_that_differ_across_ranks_do_not_hang_creation():
    """MPICOMM_STALL_WARN_S on one rank only (a per-node environment): make_reducer returned
    on the others while that rank waited in the stall channel's Dup (a hang)."""
    code = ("import os; from mpi4py import MPI; import numpy as np; import mpicomm\n"
            "from mpi_harness import report\n"
            "os.environ['MPICOMM_STALL_WARN_S'] = '30' if MPI.COMM_WORLD.rank == 0 else '0'\n"
            "with mpicomm.make_reducer('ring') as r:\n"
            "    x = np.ones(5); r.allreduce(x); assert (x == MPI.COMM_WORLD.size).all()\n"
            "report(ok=True)\n")
    run_mpi(2, ["-m", "mpi4py", "-c", code], timeout=60).expect_ok()
