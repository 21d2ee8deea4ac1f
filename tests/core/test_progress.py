"""Progress: a bar only on a terminal that no MPI launcher stands between; plain lines (no
carriage return) otherwise. Under Open MPI a rank's output is the launcher's pseudo-terminal,
and the bar's carriage returns landed in logs (issue 35)."""

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios

import pytest
from mpi_harness import ROOT

from mpicomm.core.progress import LAUNCHER_VARIABLES

LOOP = ("from mpicomm.core.progress import Progress\n"
        "p = Progress(3, 'measuring')\n"
        "for k in range(3):\n"
        "    p.begin(f'unit {k}')\n"
        "    p.done()\n"
        "p.close()\n")


def on_a_terminal(**env: str) -> str:
    """What the loop writes with stdout and stderr on a pseudo-terminal, as under Open MPI."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns
    clean = {k: v for k, v in os.environ.items()
             if k not in LAUNCHER_VARIABLES and k != "MPICOMM_PROGRESS"}
    proc = subprocess.Popen([sys.executable, "-c", LOOP], cwd=ROOT, stdout=slave, stderr=slave,
                            env={**clean, **env})
    os.close(slave)
    chunks = []
    while proc.poll() is None or select.select([master], [], [], 0.2)[0]:
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunks.append(os.read(master, 4096))
            except OSError:  # the child closed the terminal
                break
    assert proc.wait(timeout=60) == 0
    os.close(master)
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.parametrize("launcher", ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])
def test_under_a_launcher_plain_lines_even_on_a_terminal(launcher):
    out = on_a_terminal(**{launcher: "2"})
    assert "\r" not in out, repr(out)
    assert [ln.split(" (")[0] for ln in out.splitlines()] == [
        "measuring: unit 0", "measuring: unit 1", "measuring: unit 2"], out


def test_a_terminal_alone_gets_the_bar_and_the_variable_decides():
    pytest.importorskip("tqdm")
    assert "\r" in on_a_terminal()  # the control: this check sees a bar when one is drawn
    assert "\r" not in on_a_terminal(MPICOMM_PROGRESS="lines")
    assert "\r" in on_a_terminal(MPICOMM_PROGRESS="bar", OMPI_COMM_WORLD_SIZE="2")
