"""The stall warning's "ranks not arrived" from one survey of every participant's state.

A survey (``stall.Channel.survey``) is a table with a row per rank of the communicator:

    call    the number of the rank's current (or last) reducer call
    inside  1.0 while it is inside that call, 0.0 between calls
    in_s    seconds it has been inside the call
    quiet_s seconds inside the call since its last finished wait (its last progress)

and NaN where the rank did not answer in time. ``describe`` names, for the rank at ``call``:

1. the participants behind it (their counter below ``call``): the ranks not arrived;
2. else, when some did not answer: unknown, and which;
3. else, when every participant is inside ``call``: those that moved within ``moving_s`` (a
   slow call, not a stuck one); when none did, the ranks disagree on what the call is (a
   buffer length, dtype or op some have planned and others not);
4. else none behind.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FIELDS", "describe"]

FIELDS = ("call", "inside", "in_s", "quiet_s")


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def describe(table: np.ndarray, call: int, peers: list[int], wait_s: float,
             moving_s: float) -> str:
    """The ranks of ``peers`` not arrived at ``call``, in words, from a survey ``table``
    (``wait_s``: how long the survey waited for answers; ``moving_s``: a peer whose last
    progress is more recent than this is moving)."""
    behind = [r for r in peers if table[r, 0] < call]
    silent = [r for r in peers if np.isnan(table[r, 0])]
    if behind:
        text = ", ".join(map(str, behind))
    elif silent:
        text = "unknown"
    elif all(table[r, 0] == call and table[r, 1] for r in peers):
        moving = [r for r in peers if table[r, 3] < moving_s]
        if moving:
            text = (f"none behind: every rank is inside call {call} and {_ranks(moving)} "
                    f"moved within the last {moving_s:g} s (a slow call, not a stuck one)")
        else:
            text = (f"none behind: every rank is inside call {call}, so they disagree on what "
                    "it is (a buffer length, dtype or op some ranks have planned and others "
                    "not; validate=True checks every call)")
    else:
        text = "none behind"
    if silent:
        text += f" ({_ranks(silent)} did not answer within {wait_s:.1f} s)"
    for r in behind:
        text += f"; rank {r} is at call {int(table[r, 0])}"
    return text
