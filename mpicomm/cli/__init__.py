"""The command line on top of everything: ``python -m mpicomm <command>``."""

from mpicomm.cli.main import COMMANDS, guarded, main

__all__ = ["COMMANDS", "guarded", "main"]
