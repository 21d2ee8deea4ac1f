"""``--help`` that shows every default exactly once (one formatter for every command)."""

from __future__ import annotations

import argparse

__all__ = ["DefaultsFormatter"]


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Append ``(default: X)`` unless the help already says its default, or there is none.

    On/off switches (default off) and options without a default (None) get no
    suffix: "(default: None)" tells nothing, and a help text that explains its
    default ("default: ask MPI") must not get a second one.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.nargs == 0 or action.default is None or action.default is argparse.SUPPRESS
                or "default" in text or "%(default)" in text):
            return text
        return super()._get_help_string(action)
