"""The hostfiles in hostfiles/ as written, on hosts named as in them (node01, node02).

Each two-node file's example command runs with its launcher options as written (hostfile,
ranks, mapping), only the ssh stand-in's options added (``Hosts.standin``) and ``python -m
mpicomm info`` as the program, which must show ranks 0-3 on node01 and 4-7 on node02 as the
file says. The example's own program (``compare``, ``bench -e 64M``: 8 ranks on 2 shared
cores, over 400 s here at load 17) is not run; its flags are parsed, so a renamed flag fails.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from across import hosts
from mpi_harness import ROOT, launcher_family, mpiexec

from mpicomm.cli.main import build_parser

FILES = {"two-nodes.mpich": "mpich", "two-nodes.openmpi": "openmpi"}
RUN_TIMEOUT_S = 180
SLOTS_PER_NODE = 4
# launcher options that cannot take effect on this machine, and what replaces them (the one
# allowlist): both "nodes" share this machine's cores, so where it has fewer cores than a
# node's slots, Open MPI cannot bind each rank to a core of its own ("Out of resource")
SUBSTITUTES = {"--bind-to core": "--bind-to none"} if (os.cpu_count() or 1) < SLOTS_PER_NODE \
    else {}


def example_commands(path: Path) -> list[str]:
    """The ``mpiexec``/``mpirun`` lines of a hostfile's comments (``\\`` continues)."""
    found, pending = [], ""
    for line in path.read_text().splitlines():
        text = line.lstrip("#").strip()
        if not (pending or re.match(r"(mpiexec|mpirun) ", text)):
            continue
        pending += text.rstrip("\\").rstrip() + " "
        if not text.endswith("\\"):
            found.append(pending.strip())
            pending = ""
    return found


def split(cmd: str) -> tuple[list[str], list[str]]:
    """(launcher and its options, the mpicomm command's arguments) of an example."""
    words = shlex.split(cmd)
    at = words.index("python")
    assert words[at + 1 : at + 3] == ["-m", "mpicomm"], cmd
    return words[:at], words[at + 3 :]


CASES = [(f, c) for f in FILES for c in example_commands(ROOT / "hostfiles" / f)]


@pytest.mark.parametrize("name,cmd", CASES)
def test_example_flags_parse(name, cmd):
    build_parser().parse_args(split(cmd)[1])  # exits 2 on an unknown flag


@pytest.mark.parametrize("name", list(FILES))
def test_hostfile_places_ranks_as_it_says(name):
    family = FILES[name]
    if (launcher_family(mpiexec()) == "openmpi") != (family == "openmpi"):
        pytest.skip(f"{name} is for {family}; this venv's MPI is another")
    cmd = example_commands(ROOT / "hostfiles" / name)[0]
    for old, new in SUBSTITUTES.items():
        cmd = cmd.replace(old, new)
    launcher = split(cmd)[0]
    with hosts(2, rate="800mbit", names=["node01", "node02"]) as net:
        flags, env = net.standin(family)
        env |= {"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
                "PYTHONPATH": str(ROOT)}
        argv = [launcher[0], *flags, *launcher[1:], "python", "-m", "mpicomm", "info"]
        res = net.run(net.inside("node01", argv), RUN_TIMEOUT_S, env=env, cwd=str(ROOT))
    assert res.returncode == 0, f"{argv}: {res}"
    placed = re.findall(r"rank +(\d+) +host (\S+) +node (\d+) +local_rank (\d+)", res.stdout)
    assert sorted((int(r), h, int(n), int(lr)) for r, h, n, lr in placed) == [
        (r, f"node0{1 + r // SLOTS_PER_NODE}", r // SLOTS_PER_NODE, r % SLOTS_PER_NODE)
        for r in range(2 * SLOTS_PER_NODE)], res.stdout
