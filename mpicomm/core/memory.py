"""How much memory this host can still give, and a floor under what a run will take.

A size the host cannot hold is refused in one line before anything is allocated (``bench
-e 1000G`` died in NumPy's MemoryError, ``train --layers 200000,200000,10`` was killed by the
kernel with no word). The checks are floors, not promises: a run that passes may still need
more than they count.
"""

from __future__ import annotations

import os

__all__ = ["available_memory", "ranks_on_this_host"]

# launchers that say how many ranks share this host (MPICH's Hydra, Open MPI, Slurm)
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def available_memory() -> int | None:
    """Bytes this host can still give (``MemAvailable`` of /proc/meminfo, else the free
    physical pages); None where neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def ranks_on_this_host(default: int = 1) -> int:
    """The ranks the launcher put on this host (its environment), else ``default``; no
    message (a collective split is exact: ``bench`` uses one)."""
    for name in _LOCAL_SIZE_VARS:
        try:
            n = int(os.environ.get(name, ""))
        except ValueError:
            continue
        if n >= 1:
            return n
    return default
