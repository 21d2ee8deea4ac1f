"""Moved to ``mpicomm.analysis.verdict`` (no MPI, below bench and train); this name still works."""

from mpicomm.analysis.verdict import *  # noqa: F401,F403
from mpicomm.analysis.verdict import __all__  # noqa: F401
