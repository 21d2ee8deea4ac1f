"""Test jobs across namespace hosts (``mpicomm.testing.netns``), read like ``run_mpi``'s.

``hosts(n)`` skips the test in one line where namespaces cannot be made (not root, no
CAP_NET_ADMIN / CAP_SYS_ADMIN, no iproute2); ``run_across`` starts a job with the MPI beside
this Python (MPICH or Open MPI, whichever venv runs pytest) and returns an ``MPIResult``
whose ``expect_ok()`` names the failing or silent ranks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_harness import ROOT, SCRIPTS, MPIResult, job_env, mpiexec, parse_records

from mpicomm.testing.netns import ETC_NETNS, NETNS_DIR, Hosts, _mounted, unavailable_reason


def require_netns() -> None:
    """Skip the test, in one line, where namespaces cannot be made."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


def hosts(n: int, rate: str | None = "800mbit", **kw) -> Hosts:
    """A ``Hosts`` to use in a ``with``; skips the test where namespaces are unavailable."""
    require_netns()
    return Hosts(n, rate=rate, **kw)


def run_across(net: Hosts, slots: list[int], argv: list[str], timeout: float = 120.0,
               env: dict[str, str] | None = None) -> MPIResult:
    """Run ``python ARGV...`` with ``slots[k]`` ranks on host k, under a hard timeout."""
    launcher = mpiexec()
    cmd, extra = net.launch(slots, [sys.executable, *argv], launcher)
    res = net.run(cmd, timeout, env=job_env(launcher, extra | (env or {})), cwd=str(ROOT))
    return MPIResult(nranks=sum(slots), argv=[*argv, f"(hosts {slots})"],
                     returncode=res.returncode, stdout=res.stdout, stderr=res.stderr,
                     seconds=res.seconds, timed_out=res.timed_out,
                     records=parse_records(res.stdout))


def run_script_across(net: Hosts, slots: list[int], script: str, *args: str,
                      timeout: float = 120.0, env: dict[str, str] | None = None) -> MPIResult:
    """``tests/scripts/SCRIPT`` under ``python -m mpi4py`` across the hosts."""
    return run_across(net, slots, ["-m", "mpi4py", str(SCRIPTS / script), *map(str, args)],
                      timeout=timeout, env=env)


def machine_state() -> dict:
    """What a harness could leave behind: namespaces, the /run/netns mount, hosts files,
    and the interfaces of this (the host's own) network namespace."""
    links = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    return {
        "namespaces": sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir()
        else None,
        "netns_mounted": _mounted(NETNS_DIR),
        "etc_netns": sorted(p.name for p in ETC_NETNS.iterdir()) if ETC_NETNS.is_dir()
        else None,
        "interfaces": sorted(x["ifname"] for x in json.loads(links)),
    }


def repo_path(*parts: str) -> Path:
    return ROOT.joinpath(*parts)
