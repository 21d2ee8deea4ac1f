"""Stall inspector: a stalled rank is named within warn + 2 s, the job ends within abort + 5 s."""

import re
import time

import pytest
from mpi_harness import run_mpi, run_script

from mpicomm.p2p.stall import settings

WARN, ABORT = 1.0, 4.0
ENV = {"MPICOMM_STALL_WARN_S": str(WARN), "MPICOMM_STALL_ABORT_S": str(ABORT)}


def _check(res, t_stall, strategy_label, stalled, startup=0.0):
    t_end = time.time()
    assert not res.timed_out and res.returncode not in (0, None), res.tail()
    warns = re.findall(r"mpicomm stall warning: rank (\d+) has waited ([\d.]+) s in (\S+) call "
                       r"(\d+).*?ranks not arrived: ([^\n;(]*)", res.stderr)
    assert warns, res.tail()
    for rank, waited, label, _call, missing in warns:
        assert int(rank) != stalled and label == strategy_label
        assert float(waited) <= WARN + 2, warns
        assert str(stalled) in missing.split(", "), warns
    assert "aborting the job" in res.stderr
    assert t_end - t_stall <= ABORT + 5 + startup, (t_end - t_stall, res.tail())
    return warns


@pytest.mark.parametrize("strategy", ["native", "ring"])
def test_stalled_rank_named_and_job_aborted(strategy):
    res = run_script(3, "stall_rank.py", strategy, "2", timeout=60, env=ENV)
    starts = [r["t_stall"] for r in res.records if r.get("phase") == "stall"]
    assert starts, res.tail()
    warns = _check(res, max(starts), strategy, 2)
    assert {int(w[3]) for w in warns} == {4}  # the 4th call of the reducer


def test_ps_worker_stall_named():
    """The parameter-server driver: worker 1 sleeps in its first step's compute."""
    t0 = time.time()
    res = run_mpi(4, ["-m", "mpicomm", "train", "--strategy", "ps", "--ps-mode", "sync",
                      "--layers", "16,16,4", "--steps", "5", "--straggler", "1:60000",
                      "--log-every", "0"], timeout=90, env=ENV)
    # bounded from the job's start: allow 10 s of start-up (import, data, model) on a busy host
    _check(res, t0, "ps:sync", 1, startup=10.0) if res.returncode else pytest.fail(res.tail())


def test_settings_parse_and_refuse():
    assert settings({}) == (60.0, None)
    assert settings({"MPICOMM_STALL_WARN_S": "2", "MPICOMM_STALL_ABORT_S": "5"}) == (2.0, 5.0)
    with pytest.raises(ValueError, match="MPICOMM_STALL_WARN_S"):
        settings({"MPICOMM_STALL_WARN_S": "soon"})
