"""Real hosts on one Linux machine: network namespaces joined by shaped veth links.

``Hosts(n, rate="800mbit")`` is a context manager that builds n "hosts" h0..h(n-1), each a
network namespace with its own host name, a private address on ``eth0`` and a
shaped link into a bridge; MPICH or Open MPI then starts ranks across them through an ssh
stand-in, so MPI's network transport, host-name topology and hostfiles really run.

Set-up (about 0.3-0.5 s), in order:
  1. refuse what cannot work, each in one line: not root / no CAP_NET_ADMIN and
     CAP_SYS_ADMIN / no ``ip``, ``tc`` or ``unshare`` (``NetnsUnavailable``: callers skip);
     a rate of 0 or one ``tc`` cannot read, a namespace name that already exists
     (``NetnsError``: the harness never touches what it did not create);
  2. a switch namespace ``PREFIX-sw`` holding a bridge ``br0``: the bridge, like every
     address, exists only inside namespaces (nothing is added to the host's own network);
  3. per host hK: a namespace ``PREFIX-hK``, a veth pair made inside the namespaces
     (``eth0`` in hK, ``hK`` in the switch, enslaved to the bridge), ``10.213.0.(K+1)/24``
     on ``eth0``, ``lo`` up, and ``/etc/netns/PREFIX-hK/hosts`` naming every host (``ip
     netns exec`` mounts it over ``/etc/hosts``; the real file is never edited);
  4. ``tc qdisc replace dev VETH root tbf rate R burst 256kb latency 50ms`` on both ends
     of every link (``burst`` below 256kb costs MPI traffic over a third of the rate);
  5. the ssh stand-in: ``WRAPPER HOST CMD...`` runs ``ip netns exec PREFIX-HOST unshare
     --uts sh -c "hostname HOST; CMD"`` (no inner ``exec``: Open MPI's daemon command is a
     shell list).

Tear-down (always: on an error, a timeout, Ctrl-C or SIGTERM): kill what still runs in
the namespaces, remove the MPI shared-memory segments their killed ranks left in
``/dev/shm`` (``core.segments.remove_leaked``: new since set-up and mapped by no live
process), delete the namespaces (their veths and the bridge go with them), remove the hosts
files and the wrapper, and unmount ``/run/netns`` when this harness created it. One
harness at a time holds a lock, so that last step cannot pull the mount from under another.

Command line (set up, run one MPI job across the hosts, tear down)::

    python -m mpicomm.testing.netns --hosts 2 --slots 2 --rate 800mbit -- \\
        python -m mpicomm info
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mpicomm.core import segments

__all__ = ["Hosts", "NetnsError", "NetnsUnavailable", "parse_rate", "unavailable_reason",
           "leftovers", "JobResult", "SUBNET", "BURST_BYTES", "mpi_family"]

SUBNET = "10.213.0"  # the /24 every harness uses; it exists only inside its namespaces
BURST = "256kb"  # tbf's bucket: 64kb gave MPI traffic 466 of 800 Mbit/s here (issue 33)
BURST_BYTES = 256 * 1024  # tc reads "kb" as 1024 bytes: a full bucket passes this at line speed
TBF_LATENCY = "50ms"
NETNS_DIR = Path("/run/netns")
ETC_NETNS = Path("/etc/netns")
LOCK = Path(tempfile.gettempdir()) / "mpicomm-netns.lock"
LOCK_WAIT_S = 120.0
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21
RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
# Open MPI's options for hosts that are namespaces of one machine (issue 33): yield while
# idle (the "hosts" share the cores; launch() also binds nothing), TCP between hosts on eth0
OPENMPI_OPTIONS = ["--mca", "mpi_yield_when_idle", "true",
                   "--mca", "pml", "ob1", "--mca", "btl", "tcp,self,sm",
                   "--mca", "btl_tcp_if_include", "eth0",
                   "--prtemca", "oob_tcp_if_include", "eth0"]
# MPICH (CH4 over UCX) sees one physical machine and would use shared memory between the
# namespaces: 0 bytes on the links. TCP puts the traffic on the wire.
MPICH_ENV = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}
OPENMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


class NetnsError(ValueError):
    """Bad input to the harness (a rate, a name that exists): one line."""


class NetnsUnavailable(RuntimeError):
    """This machine or user cannot make namespaces: one line saying why (tests skip)."""


def parse_rate(text: str) -> float:
    """Return a link rate in bits per second from ``tc``'s notation (``800mbit``, ``1gbit``).

    Raises:
        NetnsError: zero, negative, or not a number with one of bit, kbit, mbit, gbit, tbit.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]+)\s*", str(text).lower())
    if not m or m.group(2) not in RATE_UNITS:
        raise NetnsError(f"rate {text!r}: expected a number and one of "
                         f"{', '.join(RATE_UNITS)} (e.g. 800mbit)")
    bits = float(m.group(1)) * RATE_UNITS[m.group(2)]
    if bits < 8000:  # tc's tbf cannot shape below 1 kB/s, and 0 would stop the link
        raise NetnsError(f"rate {text!r}: must be at least 8kbit (a rate of 0 stops the link)")
    return bits


def _capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def unavailable_reason(euid: int | None = None, caps: int | None = None) -> str | None:
    """Why namespaces cannot be made here, in one line; None when they can.

    ``euid`` and ``caps`` (an effective capability mask) default to this process's; a test
    passes others to see the refusal of a user who is not root.
    """
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return f"network namespaces need root (running as uid {euid})"
    caps = _capabilities() if caps is None else caps
    missing = [name for bit, name in ((CAP_NET_ADMIN, "CAP_NET_ADMIN"),
                                      (CAP_SYS_ADMIN, "CAP_SYS_ADMIN")) if not caps >> bit & 1]
    if missing:
        return f"network namespaces need {' and '.join(missing)}, which this process lacks"
    tools = [t for t in ("ip", "tc", "unshare") if shutil.which(t) is None]
    if tools:
        return f"network namespaces need {', '.join(tools)} (iproute2, util-linux) on PATH"
    return None


def leftovers(prefix: str) -> list[str]:
    """What of a harness with ``prefix`` is still on this machine: namespaces, hosts files."""
    found = [f"namespace {p.name}" for p in NETNS_DIR.glob(f"{prefix}-*")] \
        if NETNS_DIR.is_dir() else []
    found += [f"{p}" for p in ETC_NETNS.glob(f"{prefix}-*")] if ETC_NETNS.is_dir() else []
    return found


def _mounted(path: Path) -> bool:
    text = Path("/proc/self/mountinfo").read_text()
    return any(line.split()[4] == str(path) for line in text.splitlines())


def mpi_family(mpiexec: str) -> str:
    """``"openmpi"`` when ``mpiexec --version`` names Open MPI (PRRTE, OpenRTE), else
    ``"mpich"``."""
    out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL)
    text = out.stdout + out.stderr
    return "openmpi" if any(k in text for k in ("Open MPI", "OpenRTE", "PRRTE")) else "mpich"


@dataclass
class JobResult:
    """A command run inside the hosts: exit status (None after a timeout) and output."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class Hosts:
    """N hosts h0..h(N-1) on this machine, joined by shaped links (a context manager).

    Args:
        n: number of hosts (1-250).
        rate: each link's rate in ``tc`` notation (``"800mbit"``), or None for unshaped.
        prefix: the namespaces' names begin with it (default ``mc`` and this process id).
        names: the host names (default h0, h1, ...).
    """

    def __init__(self, n: int, rate: str | None = "800mbit", prefix: str | None = None,
                 names: Sequence[str] | None = None) -> None:
        if not 1 <= n <= 250:
            raise NetnsError(f"hosts: expected 1 to 250, got {n}")
        self.rate_bits = None if rate is None else parse_rate(rate)
        self.rate = rate
        self.prefix = prefix or f"mc{os.getpid()}"
        self.names = list(names or (f"h{k}" for k in range(n)))
        if len(self.names) != n or len(set(self.names)) != n or not all(
                re.fullmatch(r"[a-z][a-z0-9-]{0,14}", x) for x in self.names):
            raise NetnsError(f"host names {self.names}: need {n} distinct lower-case names "
                             "of at most 15 letters, digits and dashes")
        self.switch = f"{self.prefix}-sw"
        self.created: list[str] = []  # namespaces this harness made, in order
        self.dir: Path | None = None
        self._lock = None
        self._made_netns_dir = self._made_etc_netns = False
        self._etc: list[Path] = []  # hosts files' folders this harness made
        self._segments: set[str] | None = None  # MPI's segments at set-up

    # --- names -----------------------------------------------------------------------
    def ns(self, host: str) -> str:
        """The namespace of ``host``."""
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return f"{SUBNET}.{self.names.index(host) + 1}"

    @property
    def wrapper(self) -> str:
        """The ssh stand-in: ``WRAPPER HOST CMD...``."""
        assert self.dir is not None, "set up first (with Hosts(...) as net)"
        return str(self.dir / "ssh")

    # --- set-up and tear-down ----------------------------------------------------------
    def __enter__(self) -> Hosts:
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def setup(self) -> None:
        """Build the hosts (steps 1-5 of the module's docstring); tear down on any failure."""
        reason = unavailable_reason()
        if reason:
            raise NetnsUnavailable(reason)
        self._refuse_existing()  # before waiting for the lock: a clash is refused at once
        self._take_lock()
        self._segments = segments.present()
        try:
            self._refuse_existing()
            self._made_netns_dir = not NETNS_DIR.exists()
            self._made_etc_netns = not ETC_NETNS.exists()
            self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
            self._add_ns(self.switch)
            self._ip(self.switch, "link", "add", "br0", "type", "bridge")
            self._ip(self.switch, "link", "set", "br0", "up")
            for host in self.names:
                self._add_host(host)
            self._write_wrapper()
        except BaseException:
            self.teardown()
            raise

    def _take_lock(self) -> None:
        self._lock = open(LOCK, "a")  # noqa: SIM115 - held until teardown
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._lock.close()
                    self._lock = None
                    raise NetnsUnavailable(f"another harness held {LOCK} for "
                                           f"{LOCK_WAIT_S:.0f} s") from None
                time.sleep(0.2)

    def _refuse_existing(self) -> None:
        taken = [x for x in [self.switch, *map(self.ns, self.names)]
                 if (NETNS_DIR / x).exists() or (ETC_NETNS / x).exists()]
        if taken:
            raise NetnsError(f"namespace {taken[0]} already exists: refusing to touch what "
                             "this harness did not create (pick another prefix)")

    def _add_ns(self, name: str) -> None:
        _sh("ip", "netns", "add", name)
        self.created.append(name)
        self._ip(name, "link", "set", "lo", "up")

    def _add_host(self, host: str) -> None:
        ns = self.ns(host)
        etc = ETC_NETNS / ns
        etc.mkdir(parents=True)
        self._etc.append(etc)
        lines = ["127.0.0.1 localhost"] + [f"{self.address(h)} {h}" for h in self.names]
        (etc / "hosts").write_text("\n".join(lines) + "\n")
        self._add_ns(ns)
        # made inside the namespaces: no interface ever appears in the host's own
        _sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", host,
            "netns", self.switch)
        self._ip(self.switch, "link", "set", host, "master", "br0")
        self._ip(self.switch, "link", "set", host, "up")
        self._ip(ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
        self._ip(ns, "link", "set", "eth0", "up")
        if self.rate is not None:
            for where, dev in ((ns, "eth0"), (self.switch, host)):
                _sh("tc", "-n", where, "qdisc", "replace", "dev", dev, "root", "tbf",
                    "rate", self.rate, "burst", BURST, "latency", TBF_LATENCY)

    def _write_wrapper(self) -> None:
        cases = "\n".join(f"  {h}) ns={self.ns(h)} ;;" for h in self.names)
        text = f"""#!/bin/sh
# ssh stand-in for the hosts of {self.prefix}: WRAPPER [ssh options] HOST CMD...
while [ $# -gt 0 ]; do
  case $1 in -o|-p|-l|-i) shift 2 ;; -*) shift ;; *) break ;; esac
done
host=$1; shift
case $host in
{cases}
  *) echo "netns ssh stand-in: unknown host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $host; $*"
"""
        path = Path(self.wrapper)
        path.write_text(text)
        path.chmod(0o755)

    def teardown(self) -> None:
        """Remove all this harness made (safe to call twice, and after a failed set-up)."""
        try:
            for ns in reversed(self.created):
                self._kill_inside(ns)
            if self._segments is not None:  # every process inside is gone: one look
                segments.remove_leaked(self._segments, settle_s=0.0)
                self._segments = None
            for ns in reversed(self.created):
                subprocess.run(["ip", "netns", "delete", ns], capture_output=True,
                               stdin=subprocess.DEVNULL)
            self.created.clear()
            for etc in self._etc:
                shutil.rmtree(etc, ignore_errors=True)
            self._etc.clear()
            if self._made_etc_netns and ETC_NETNS.is_dir() and not any(ETC_NETNS.iterdir()):
                ETC_NETNS.rmdir()
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
            self._unmount_netns_dir()
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _unmount_netns_dir(self) -> None:
        if not (self._made_netns_dir and NETNS_DIR.is_dir()) or any(NETNS_DIR.iterdir()):
            return
        if _mounted(NETNS_DIR):
            subprocess.run(["umount", str(NETNS_DIR)], capture_output=True,
                           stdin=subprocess.DEVNULL)
        try:
            NETNS_DIR.rmdir()
        except OSError:
            pass

    def _kill_inside(self, ns: str, wait_s: float = 5.0) -> None:
        """SIGKILL every process left in ``ns`` (all started by this harness's jobs)."""
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids(ns)
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def kill_host(self, host: str, only: str | None = None) -> list[int]:
        """SIGKILL every process on ``host`` (as if it died), or only those whose command
        line holds ``only`` (its ranks, leaving the launcher's daemon); returns their ids."""
        if only is None:
            pids = self.pids(self.ns(host))
            self._kill_inside(self.ns(host))
            return pids
        pids = [p for p in self.pids(self.ns(host)) if only in _cmdline(p)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    @staticmethod
    def pids(ns: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
        return [int(x) for x in out.stdout.split()] if out.returncode == 0 else []

    def _ip(self, ns: str, *args: str) -> None:
        _sh("ip", "-n", ns, *args)

    # --- running -----------------------------------------------------------------------
    def inside(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` as a command running on ``host`` (its namespace and host name)."""
        return ["ip", "netns", "exec", self.ns(host), "unshare", "--uts", "sh", "-c",
                f'hostname {host}; exec "$@"', "sh", *argv]

    def standin(self, family: str) -> tuple[list[str], dict[str, str]]:
        """The launcher options and environment that start ranks on these hosts through the
        ssh stand-in and put MPI's traffic between hosts on their links (``family``:
        ``"mpich"`` or ``"openmpi"``, see ``mpi_family``)."""
        if family == "openmpi":
            return ["--prtemca", "plm_ssh_agent", self.wrapper, *OPENMPI_OPTIONS], \
                dict(OPENMPI_ENV)
        return ["-launcher", "rsh", "-launcher-exec", self.wrapper], dict(MPICH_ENV)

    def launch(self, slots: Sequence[int], argv: Sequence[str], mpiexec: str,
               family: str | None = None) -> tuple[list[str], dict[str, str]]:
        """The command line and environment that start ``argv`` under MPI across the hosts,
        ``slots[k]`` ranks on host k (filled in order), from inside the first host used.

        Returns:
            (argv, extra environment variables) for ``run``.
        """
        if len(slots) > len(self.names) or any(s < 0 for s in slots) or sum(slots) < 1:
            raise NetnsError(f"slots {list(slots)}: one count >= 0 per host "
                             f"(at most {len(self.names)}), at least one rank")
        family = family or mpi_family(mpiexec)
        used = [(h, s) for h, s in zip(self.names, slots, strict=False) if s > 0]
        spec, n = ",".join(f"{h}:{s}" for h, s in used), str(sum(s for _, s in used))
        flags, env = self.standin(family)
        hosts = ["--host", spec, "--bind-to", "none"] if family == "openmpi" else \
            ["-hosts", spec]
        return self.inside(used[0][0], [mpiexec, *flags, *hosts, "-np", n, *argv]), env

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None) -> JobResult:
        """Run ``argv`` (from ``inside``/``launch``), killing it and everything it left in
        the hosts after ``timeout`` seconds."""
        full = dict(os.environ) | (env or {})
        t0 = time.monotonic()
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, env=full, cwd=cwd,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
            _killpg(proc.pid)
            for ns in self.created:
                self._kill_inside(ns)
            out, err = proc.communicate()
        except BaseException:
            _killpg(proc.pid)
            raise
        finally:
            for ns in self.created:
                self._kill_inside(ns)
        return JobResult(list(argv), code, out, err, time.monotonic() - t0)

    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes each host sent and received on its link so far (the switch's veth ports:
        what host K sends is what port hK receives)."""
        out = _sh("ip", "-n", self.switch, "-s", "-j", "link", "show", "type", "veth")
        ports = {x["ifname"]: x["stats64"] for x in json.loads(out)}
        return {h: {"sent": ports[h]["rx"]["bytes"], "received": ports[h]["tx"]["bytes"]}
                for h in self.names}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _sh(*argv: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {(out.stderr or out.stdout).strip()}")
    return out.stdout


# --- command line ---------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mpicomm.testing.netns",
        description="Set up N hosts (network namespaces, shaped links), run one MPI job "
                    "across them, tear everything down.")
    p.add_argument("--hosts", type=int, default=2, help="number of hosts (default 2)")
    p.add_argument("--slots", default="2",
                   help="ranks per host: one count for all, or one per host (2,1)")
    p.add_argument("--rate", default="800mbit", help="link rate, tc notation, or none")
    p.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"),
                   help="the MPI launcher (default: beside this Python)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the job is "
                   "killed (default 600)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Set up, run one job, tear down; the job's exit status (2 for bad input, 77 when
    namespaces are unavailable here, 124 after the timeout)."""
    args = _parser().parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if not cmd:
            raise NetnsError("no command: give one after --")
        counts = [int(x) for x in args.slots.split(",")]
        slots = counts * args.hosts if len(counts) == 1 else counts
        rate = None if args.rate.lower() == "none" else args.rate
        signal.signal(signal.SIGTERM, _raise_interrupt)
        with Hosts(args.hosts, rate=rate) as net:
            job, env = net.launch(slots, cmd, args.mpiexec)
            # ``python`` in the command is this one (the venv's, whichever MPI it holds)
            env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
            print(f"netns: {args.hosts} hosts {', '.join(net.names)} ({net.prefix}-*), "
                  f"links {args.rate}, ranks {slots}: {' '.join(cmd)}", file=sys.stderr)
            res = net.run(job, args.timeout, env=env)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        if res.timed_out:
            print(f"netns: timed out after {args.timeout:.0f} s", file=sys.stderr)
            return 124
        return res.returncode or 0
    except (NetnsError, ValueError) as exc:
        print(f"netns: {exc}", file=sys.stderr)
        return 2
    except NetnsUnavailable as exc:
        print(f"netns: skipped: {exc}", file=sys.stderr)
        return 77


def _raise_interrupt(signum, frame):  # SIGTERM tears down like Ctrl-C
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
