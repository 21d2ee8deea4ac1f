"""Moved to ``mpicomm.core.outputs`` (train, compare and bench all check their output paths
first); this name still works."""

from mpicomm.core.outputs import OUTPUT_FLAGS, check_output_path, check_outputs  # noqa: F401

__all__ = ["check_outputs", "check_output_path", "OUTPUT_FLAGS"]
