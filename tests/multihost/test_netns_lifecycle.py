"""The harness builds real hosts and leaves nothing behind: after a job, an error, a
timeout, Ctrl-C or SIGTERM; and it refuses a name it did not create."""

import json
import signal
import subprocess
import sys
import time

import pytest
from across import hosts, machine_state, require_netns

from mpicomm.testing.netns import NETNS_DIR, NetnsError


def test_hosts_have_names_addresses_and_shaped_links():
    before = machine_state()
    with hosts(3, rate="200mbit") as net:
        for h in net.names:
            res = net.run(net.inside(h, ["sh", "-c", "hostname; getent hosts h0 h1 h2"]), 20)
            lines = res.stdout.split("\n")
            assert lines[0] == h, res
            assert "10.213.0.1 " in res.stdout and "10.213.0.3 " in res.stdout, res
            for ns, dev in ((net.ns(h), "eth0"), (net.switch, h)):  # both ends shaped
                q = subprocess.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev],
                                   capture_output=True, text=True, check=True).stdout
                tbf = [x for x in json.loads(q) if x["kind"] == "tbf"]
                assert tbf and tbf[0]["options"]["rate"] == 25_000_000, q  # bytes/s
        during = machine_state()
        assert during["interfaces"] == before["interfaces"]  # nothing in the host's own
        assert {net.ns(h) for h in net.names} <= set(during["namespaces"])
    assert machine_state() == before


def test_error_and_timeout_leave_nothing():
    before = machine_state()
    with pytest.raises(RuntimeError, match="boom"), hosts(2) as net:
        t0 = time.monotonic()
        res = net.run(net.inside("h1", ["sleep", "60"]), timeout=1.0)
        assert res.timed_out and time.monotonic() - t0 < 10
        assert net.pids(net.ns("h1")) == []  # the job's processes are gone with it
        raise RuntimeError("boom")
    assert machine_state() == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_command_line_tears_down(sig):
    before = machine_state()
    proc = subprocess.Popen([sys.executable, "-m", "mpicomm.testing.netns", "--hosts", "2",
                             "--slots", "1", "--", "sleep", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ns = NETNS_DIR / f"mc{proc.pid}-h1"
    deadline = time.monotonic() + 30
    while not ns.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ns.exists(), proc.communicate(timeout=30)
    time.sleep(0.5)  # the job is running
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert machine_state() == before


def test_existing_name_refused_and_left_alone():
    require_netns()
    before = machine_state()
    subprocess.run(["ip", "netns", "add", "mcother-h1"], check=True)
    try:
        with pytest.raises(NetnsError, match="mcother-h1 already exists"):
            with hosts(2, prefix="mcother"):
                pass
        assert (NETNS_DIR / "mcother-h1").exists()  # not touched
        with hosts(2, prefix="mcfirst"), pytest.raises(NetnsError, match="already exists"):
            with hosts(2, prefix="mcfirst"):
                pass
    finally:
        subprocess.run(["ip", "netns", "delete", "mcother-h1"], check=True)
    after = machine_state()
    if not before["netns_mounted"]:  # ip netns add mounted it; the harness did not
        subprocess.run(["umount", str(NETNS_DIR)], check=False)
        NETNS_DIR.rmdir()
        after = machine_state()
    assert after == before
