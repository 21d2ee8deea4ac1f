"""Errors of configuration: a bad strategy name or option, the same on every rank.

They are raised before any message is sent, from arguments every rank shares,
so every rank raises the same one; ``python -m mpicomm`` then prints it once,
without a traceback, and ends the job with exit code 2 (see ``cli.guarded``).
``ConfigError`` is a ``ValueError`` and ``ConfigTypeError`` also a ``TypeError``,
so callers may catch the built-in kinds.
"""

__all__ = ["ConfigError", "ConfigTypeError"]


class ConfigError(ValueError):
    """A bad strategy, option value or environment setting."""


class ConfigTypeError(ConfigError, TypeError):
    """An option of the wrong type, or an unknown option name."""
