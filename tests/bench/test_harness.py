"""tests/mpi_harness.py: it launches with the MPI that mpi4py uses, MPICH or Open MPI."""

from __future__ import annotations

import os
import subprocess
import sys

from mpi_harness import launcher_env, launcher_family, mpiexec, run_mpi

LIBRARY = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
           "print(MPI.Get_library_version().splitlines()[0])")


def mpi4py_library() -> str:
    out = subprocess.run([sys.executable, "-c", LIBRARY], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


def test_launcher_family_matches_the_library_mpi4py_loads():
    library = mpi4py_library()
    family = launcher_family(mpiexec())
    assert family == ("openmpi" if "Open MPI" in library else "other"), (mpiexec(), library)


def test_open_mpi_gets_oversubscription_and_root_permission_only():
    env = launcher_env(mpiexec())
    if launcher_family(mpiexec()) != "openmpi":
        assert env == {}
        return
    for key in ("PRTE_MCA_rmaps_default_mapping_policy", "OMPI_MCA_rmaps_base_oversubscribe"):
        assert key in env or key in os.environ
    root_keys = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
    if os.geteuid() != 0:
        assert not any(k in env for k in root_keys)
    elif not any(k in os.environ for k in root_keys):
        assert all(env.get(k) == "1" for k in root_keys), env


def test_more_ranks_than_cores_start_and_each_rank_is_distinct():
    n = max(5, (os.cpu_count() or 1) + 1)  # oversubscribed whatever the machine
    code = "from mpi4py import MPI; from mpi_harness import report; c = MPI.COMM_WORLD; " \
           "report(ok=True, size=c.Get_size())"
    res = run_mpi(n, ["-c", code], timeout=180).expect_ok()
    ranks = sorted(int(r["rank"]) for r in res.records)
    assert ranks == list(range(n)) and all(r["size"] == n for r in res.records), res.tail()
