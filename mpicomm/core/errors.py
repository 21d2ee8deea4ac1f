"""Errors of configuration: a bad strategy name or option, the same on every rank.

They are raised before any message is sent, from arguments every rank shares,
so every rank raises the same one; ``python -m mpicomm`` then prints it once,
without a traceback, and ends the job with exit code 2 (see ``cli.guarded``).
``ConfigError`` is a ``ValueError`` and ``ConfigTypeError`` also a ``TypeError``,
so callers may catch the built-in kinds.
"""

__all__ = ["ConfigError", "ConfigTypeError"]


class ConfigError(ValueError):
    """A bad strategy, option value or environment setting.

    ``on_every_rank``: True when every rank of ``MPI.COMM_WORLD`` is known to raise one at
    the same point (``make_reducer``'s agreement decides it collectively): every rank may
    then end without ``MPI_Abort``, and ``python -m mpicomm`` exits 2 with rank 0's line
    and no abort banner.
    """

    on_every_rank: bool = False


class ConfigTypeError(ConfigError, TypeError):
    """An option of the wrong type, or an unknown option name."""
