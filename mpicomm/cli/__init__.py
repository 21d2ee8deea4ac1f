"""The command line on top of everything: ``python -m mpicomm <command>``.

One module per command (``train``, ``compare``, ``bench``, ``model``, ``info``, ``plot``,
``experiments``), registered in ``main.COMMANDS``; ``main.guarded`` ends the job on an error.
"""

from mpicomm.cli.main import COMMANDS, guarded, main

__all__ = ["COMMANDS", "guarded", "main"]
