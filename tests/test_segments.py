"""A job that a rank ends leaves none of MPI's shared-memory segments in /dev/shm
(``mpicomm.core.segments``): MPICH removes its segment only when every rank finalizes, so
each aborted job held its memory until reboot (2,264 files, 5.5 GB, on this host)."""

import pytest
from mpi_harness import launcher_family, mpiexec, run_mpi

from mpicomm.core.segments import mapped_anywhere
from mpicomm.core.segments import present as mpi_segments

ENDS = r"""
import sys
from mpi4py import MPI
from mpi_harness import report

comm = MPI.COMM_WORLD
report(ok=True)
comm.Barrier()  # every rank has MPI_Init's segment mapped
if comm.Get_rank() == 1:
    if sys.argv[1] == "mpicomm":  # the CLI's end of a job whose rank raised
        from mpicomm.cli.main import _abort
        _abort(3)
    comm.Abort(3)  # what the CLI did before
comm.Barrier()  # rank 0 waits here until the abort ends it
"""


def _left_by(how: str) -> set[str]:
    before = mpi_segments()
    # run_mpi's own clean-up runs after a failed job: read /dev/shm before it does
    import mpi_harness
    seen: list[set[str]] = []
    real = mpi_harness.remove_leaked_segments
    mpi_harness.remove_leaked_segments = lambda b: (seen.append(mpi_segments() - b), real(b))[1]
    try:
        res = run_mpi(2, ["-c", ENDS, how], timeout=60)
    finally:
        mpi_harness.remove_leaked_segments = real
    assert res.returncode not in (0, None), res.tail()  # the job was ended by rank 1
    new = seen[0] if seen else mpi_segments() - before
    return new - mapped_anywhere()


def test_a_job_ended_by_mpicomm_leaves_no_segment():
    assert _left_by("mpicomm") == set()


@pytest.mark.skipif(launcher_family(mpiexec()) == "openmpi",
                    reason="the control is MPICH's behaviour: one segment a host")
def test_the_control_plain_abort_leaves_mpichs_segment():
    """What the test above guards against is real here: MPI_Abort alone leaves it (and
    ``run_mpi`` removes it after the failed job, as after a killed one)."""
    left = _left_by("plain")
    assert len(left) == 1 and next(iter(left)).startswith("/dev/shm/mpich_shm_"), left
    assert not (left & mpi_segments())  # removed by the harness's clean-up


SINGLETON = r"""
import importlib, sys
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()  # MPI_Init made this process's segment
cli = importlib.import_module("mpicomm.cli.main")  # the package's face exports main()
cli._exit(2) if sys.argv[1] == "exit" else cli._abort(1)
"""


@pytest.mark.parametrize("how", ["exit", "abort"])
def test_a_singleton_that_mpicomm_ends_leaves_no_segment(how):
    """One process, no mpiexec (``python -m mpicomm ...`` as most users first run it): its
    error exits (``_exit``: a refused flag after MPI_Init; ``_abort``: a rank that raised)
    skip MPI_Finalize, which would have removed the segment MPI_Init made."""
    import subprocess
    import sys

    before = mpi_segments()
    res = subprocess.run([sys.executable, "-c", SINGLETON, how], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == (2 if how == "exit" else 1), res.stderr
    assert (mpi_segments() - before) - mapped_anywhere() == set()


def test_a_singleton_run_that_ends_cleanly_leaves_no_segment():
    """``python -m mpicomm info`` without mpiexec: Open MPI 5.0.11 left its 16 MB
    ``sm_segment.*`` after each such run (MPICH's MPI_Finalize removes its own)."""
    import subprocess
    import sys

    before = mpi_segments()
    res = subprocess.run([sys.executable, "-m", "mpicomm", "info"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (mpi_segments() - before) - mapped_anywhere() == set()
