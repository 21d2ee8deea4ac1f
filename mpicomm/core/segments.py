"""MPI's shared-memory segments: unlink them when a rank ends the job, so none is left behind.

MPICH keeps its ranks' shared memory in one file per host, ``/dev/shm/mpich_shm_*``
(Open MPI: ``/dev/shm/sm_segment.*``), and removes it only when every rank finalizes.
A job ended by ``MPI_Abort`` or a signal leaves the file: memory held until reboot, 2 MiB
for 2 ranks and 270 MB for 256 (measured: ``mpiexec -n 2`` with one rank calling
``Abort``; after a day of test runs this host's ``/dev/shm`` held 2,264 of them, 5.5 GB).

``unlink_mapped()``, called by the rank about to abort (``abort_job``), removes the names of
the segments this process has mapped. Every rank on the host mapped them at
``MPI_Init``, so unlinking the name takes nothing from a rank still running: its mapping
stays, and the memory goes when the last rank exits (as for any unlinked file). The job is
ending, so no rank will open them by name again. Only this host's: the segments of other
hosts, whose ranks ``MPI_Abort`` kills, stay (as a signal leaves them on any host).

``remove_leaked(before)`` is the clean-up of whoever launched a job that a signal ended (a
test harness's timeout, a namespace host killed under a job): the segments that appeared
since ``before`` and that no live process maps.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["PREFIXES", "SHM", "abort_job", "mapped", "mapped_anywhere", "present",
           "release_singleton", "remove_leaked", "unlink_mapped"]

SHM = "/dev/shm/"
PREFIXES = ("mpich_shm_", "sm_segment.")  # MPICH's and Open MPI's segments


def mapped(maps: str = "/proc/self/maps") -> set[str]:
    """The MPI segments (paths under ``/dev/shm``) that ``maps`` lists: this process's by
    default; empty where there is no ``/proc``."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    paths = {parts[5] for parts in (line.split(None, 5) for line in lines if SHM in line)
             if len(parts) == 6}
    return {p for p in paths if p.startswith(SHM) and p[len(SHM):].startswith(PREFIXES)
            and not p.endswith(" (deleted)")}


def present() -> set[str]:
    """MPI's shared-memory segments now in ``/dev/shm`` (``PREFIXES``)."""
    try:
        return {SHM + n for n in os.listdir(SHM) if n.startswith(PREFIXES)}
    except OSError:
        return set()


def mapped_anywhere() -> set[str]:
    """The MPI segments some live process on this host maps."""
    live: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else ()):
        live |= mapped(f"/proc/{pid}/maps")
    return live


def remove_leaked(before: set[str], settle_s: float = 10.0) -> list[str]:
    """Unlink the segments that appeared since ``before`` and no live process maps: a job
    killed by a signal cannot unlink its own; a job of another user still running keeps its
    mapped ones. A launcher may return before the ranks it killed are gone (their mappings
    stay in /proc until they exit), so a new segment still mapped is looked at again, every
    0.1 s for up to ``settle_s``."""
    deadline = time.monotonic() + settle_s
    gone: list[str] = []
    while True:
        new = present() - before
        free = sorted(new - mapped_anywhere())
        for path in free:
            try:
                os.unlink(path)
            except OSError:
                pass
        gone += free
        if len(free) == len(new) or time.monotonic() > deadline:
            return gone
        time.sleep(0.1)


def unlink_mapped() -> list[str]:
    """Unlink the MPI segments this process maps; return the paths removed."""
    gone = []
    for path in sorted(mapped()):
        try:
            os.unlink(path)
            gone.append(path)
        except OSError:  # already removed (by another rank ending the job), or not ours
            pass
    return gone


def release_singleton() -> list[str]:
    """At a clean end of a process that ran MPI alone (no launcher: ``python -m mpicomm
    info``, a test session) under Open MPI, unlink the segments it maps; return them. Open
    MPI 5's launcher removes a job's segments, and a singleton has none: each such run left
    a 16 MB ``sm_segment.*`` (5.0.11, measured). MPICH's ``MPI_Finalize`` removes its own,
    so it is left to it. Nothing where mpi4py was never imported."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return []
    if mpi.COMM_WORLD.Get_size() > 1 or "Open MPI" not in mpi.Get_library_version():
        return []
    return unlink_mapped()


def abort_job(code: int, grace_s: float = 0.0) -> None:
    """End the whole job with ``code`` from this rank: flush, wait ``grace_s`` (so the
    launcher forwards the last lines), unlink the host's segments, ``MPI_Abort``."""
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    if grace_s:
        time.sleep(grace_s)
    unlink_mapped()
    MPI.COMM_WORLD.Abort(code)
