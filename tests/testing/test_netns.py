"""The namespace harness's refusals that need no root (mpicomm.testing.netns)."""

import os
import subprocess
import sys

import pytest

from mpicomm.testing.netns import Hosts, NetnsError, parse_rate, unavailable_reason


@pytest.mark.parametrize("text,bits", [("800mbit", 8e8), ("1gbit", 1e9), ("1.5Gbit", 1.5e9),
                                       ("100kbit", 1e5)])
def test_rate_read_as_tc_writes_it(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["0", "0mbit", "0.0gbit", "-5mbit", "800", "fast", "800mb/s",
                                  "", "1kbit"])
def test_rate_zero_or_unparsable_refused(text):
    with pytest.raises(NetnsError, match="rate"):
        parse_rate(text)
    with pytest.raises(NetnsError, match="rate"):  # before anything is made
        Hosts(2, rate=text)


def test_not_root_gives_one_line_reason():
    reason = unavailable_reason(euid=1000)
    assert "root" in reason and "1000" in reason and "\n" not in reason


def test_missing_capabilities_named():
    reason = unavailable_reason(euid=0, caps=1 << 21)  # SYS_ADMIN only
    assert "CAP_NET_ADMIN" in reason and "CAP_SYS_ADMIN" not in reason
    assert "CAP_SYS_ADMIN" in unavailable_reason(euid=0, caps=1 << 12)
    both = unavailable_reason(euid=0, caps=(1 << 12) | (1 << 21))
    assert both is None or "on PATH" in both  # both present: only the tools may be missing


def _cli(*args, user=None):
    cmd = [sys.executable, "-m", "mpicomm.testing.netns", *args]
    if user is not None:
        cmd = ["setpriv", "--reuid", str(user), "--regid", str(user), "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_cli_refuses_rate_zero_in_one_line():
    out = _cli("--rate", "0", "--", "true")
    assert out.returncode == 2, out
    assert out.stderr.count("\n") == 1 and "rate '0'" in out.stderr


def test_cli_not_root_skips_in_one_line():
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"):
        out = _cli("--", "true")  # an ordinary user: the real case
    else:
        out = _cli("--", "true", user=65534)  # root: drop to nobody to see the refusal
    assert out.returncode == 77, out
    assert out.stderr.startswith("netns: skipped: network namespaces need root")
    assert out.stderr.count("\n") == 1
