"""Moved to ``mpicomm.analysis.reading`` (no MPI, below train); this name still works."""

from mpicomm.analysis.reading import *  # noqa: F401,F403
from mpicomm.analysis.reading import __all__  # noqa: F401
