"""Versions and MPI facts stamped into every result file."""

from __future__ import annotations

import platform

import mpi4py
import numpy as np
from mpi4py import MPI

__all__ = ["environment"]


def environment() -> dict:
    """Return versions and MPI facts for result files (collective: no; local)."""
    return {
        "python": platform.python_version(),
        "mpi4py": mpi4py.__version__,
        "numpy": np.__version__,
        "mpi_library": " ".join(MPI.Get_library_version().splitlines()[0].split()),
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "thread_level": {
            MPI.THREAD_SINGLE: "single",
            MPI.THREAD_FUNNELED: "funneled",
            MPI.THREAD_SERIALIZED: "serialized",
            MPI.THREAD_MULTIPLE: "multiple",
        }.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "host": platform.node(),
    }
