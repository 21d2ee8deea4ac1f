"""Bad input: a clear error on every rank, never a hang or a wrong sum.

Also: a raising rank ends the whole job.
"""

import json
import time

import pytest
from mpi_harness import STRATEGY_CASES, run_mpi, run_script

CASES = STRATEGY_CASES


@pytest.mark.parametrize("nranks", [1, 3])
@pytest.mark.parametrize(
    "strategy,options", CASES, ids=lambda c: json.dumps(c) if isinstance(c, dict) else c
)
def test_bad_input_errors_on_every_rank(strategy, options, nranks):
    # S servers need S ranks; a dedicated server also needs a worker beside it
    nranks = max(nranks, options.get("servers", 1) + int(options.get("dedicated", False)))
    res = run_script(nranks, "check_errors.py", strategy, json.dumps(options), timeout=90)
    res.expect_ok()
    workers = [r for r in res.records if r.get("role") != "server"]
    if len(workers) > 1:
        for rec in workers:
            assert (
                "1024 elements" in rec["mismatch_message"]
                or "1000 elements" in rec["mismatch_message"]
            )


def test_unknown_strategy_option_and_values():
    run_script(3, "check_options.py", timeout=90).expect_ok()


def test_agreement_check_never_hangs_and_catches_seen_and_new_shapes():
    """Default validate=True checks every call (shapes seen before, or new to one rank);
    validate=False still checks the first call."""
    res = run_script(3, "check_validate.py", timeout=90)
    res.expect_ok()


def test_raising_rank_ends_the_job_quickly():
    """Rank 1 raises while the others wait inside allreduce: the job must end non-zero, fast."""
    t0 = time.monotonic()
    res = run_mpi(
        3,
        [
            "-m",
            "mpi4py",
            "-c",
            (
                "import numpy as np, mpicomm\n"
                "from mpi4py import MPI\n"
                "r = mpicomm.make_reducer('ring')\n"
                "if MPI.COMM_WORLD.rank == 1: raise RuntimeError('boom on rank one')\n"
                "r.allreduce(np.ones(10))\n"
            ),
        ],
        timeout=60,
    )
    assert not res.timed_out, "a raising rank left the job hanging"
    assert res.returncode != 0
    assert "boom on rank one" in res.stderr
    assert time.monotonic() - t0 < 30


def test_cli_guard_names_the_rank_and_aborts():
    """mpicomm.cli.guarded (used by every `python -m mpicomm` command) aborts all ranks."""
    res = run_mpi(
        3,
        [
            "-c",
            (
                "import numpy as np, mpicomm\n"
                "from mpi4py import MPI\n"
                "from mpicomm.cli.main import guarded\n"
                "def main():\n"
                "    r = mpicomm.make_reducer('ps')\n"
                "    if MPI.COMM_WORLD.rank == 2: raise ValueError('bad gradient on two')\n"
                "    r.allreduce(np.ones(10))\n"
                "guarded(main)\n"
            ),
        ],
        timeout=60,
    )
    assert not res.timed_out
    assert res.returncode != 0
    assert "mpicomm: rank 2: ValueError: bad gradient on two -- aborting job" in res.stderr


def test_config_error_is_one_line_and_exit_2():
    """A bad option on every rank: one message (rank 0), no traceback, exit code 2."""
    res = run_mpi(
        3,
        ["-m", "mpicomm", "train", "--strategy", "ps", "--servers", "4", "--steps", "2"],
        timeout=60,
    )
    assert not res.timed_out
    assert res.returncode == 2
    assert res.stderr.count("ps: servers=4 exceeds the 3 ranks") == 1
    assert "Traceback" not in res.stderr


def test_config_error_on_one_rank_still_ends_the_job():
    """A config error on rank 1 only (rank-dependent environment) names the rank, no hang."""
    res = run_mpi(
        3,
        [
            "-c",
            (
                "import os\n"
                "from mpi4py import MPI\n"
                "if MPI.COMM_WORLD.rank == 1: os.environ['MPICOMM_RANKS_PER_NODE'] = 'x'\n"
                "import mpicomm\n"
                "from mpicomm.cli.main import guarded\n"
                "import numpy as np\n"
                "guarded(lambda: mpicomm.make_reducer('hierarchical').allreduce(np.ones(3)))\n"
            ),
        ],
        timeout=60,
    )
    assert not res.timed_out
    assert res.returncode == 2
    # every rank raises (the others name rank 1 and its reason): rank 0 prints it
    assert "rank 1" in res.stderr and "MPICOMM_RANKS_PER_NODE='x'" in res.stderr
