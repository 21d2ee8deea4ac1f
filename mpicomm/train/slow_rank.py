"""Slow-rank report: per rank, the mean wait inside reducer calls and how often it came last.

From the stall inspector's per-call log (``Channel.take_log``: entry wall time
and seconds inside each call) of every participating rank. Call k of every
rank is the same collective call (all ranks call in the same order); the rank
whose entry time is the latest is the last to arrive at it. A rank "holds the
others back" when ``analysis.verdict.late_rank`` says it is last beyond chance:
in at least max(50%, 1.5/P) of the calls and with a binomial chance below 1%/P
(by chance each of P ranks is last in 1/P of them), and when the others wait at
least 10% longer per call than it does (``analysis.verdict.holds_back``: last by a
few microseconds at every call holds nobody back); the note gives its mean wait
beside the others' (it usually waits least: it arrives, finds everyone there).
Entry times are wall clocks: on one host exact, across hosts as good as their
clock sync (NTP: about a millisecond).

Collective over ``comm``; non-participants (parameter servers) contribute nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.analysis.verdict import holds_back, late_rank
from mpicomm.train import metrics

__all__ = ["report"]

MAX_CALLS = 20000  # the first calls of a very long run suffice


def report(comm: Any, enter: np.ndarray, waited: np.ndarray, participant: bool,
           others_wait: bool = True) -> dict:
    """Return ``wait_mean_s_by_rank``, ``last_to_arrive_by_rank``, ``slow_rank`` and a note.

    ``others_wait`` False (an async parameter server): call k is each worker's
    k-th push, nobody waits for it, and the note names the slowest worker as such.
    """
    size = comm.Get_size()
    mine = len(enter) if participant else MAX_CALLS
    n = int(-metrics.max_over_ranks(comm, np.array([-min(mine, MAX_CALLS)]))[0])
    head = enter[:n] if participant else np.zeros(n)
    summary = np.array([float(participant), waited.mean() if waited.size else 0.0, waited.size])
    rows = metrics.gather_rows(comm, np.concatenate([summary, head]))
    who = np.flatnonzero(rows[:, 0] > 0)
    waits = {int(r): float(rows[r, 1]) for r in who}
    out: dict[str, Any] = {
        "wait_mean_s_by_rank": [waits.get(r) for r in range(size)],
        "last_to_arrive_by_rank": [None] * size,
        "slow_rank": None,
        "slow_rank_note": None,
    }
    if who.size < 2 or n == 0:
        return out
    last = who[np.argmax(rows[who, 3:], axis=0)]
    share = np.bincount(last, minlength=size) / n
    for r in who:
        out["last_to_arrive_by_rank"][int(r)] = float(share[r])
    late = late_rank([float(share[r]) if r in waits else None for r in range(size)], n)
    if late is not None and others_wait and not holds_back(
            waits[late], float(np.median([waits[int(r)] for r in who if r != late]))):
        late = None  # last by a hair: the others wait no longer than it does
    if late is None and not others_wait:  # async: a straggler shows as few pushes
        late = _fewest_calls(rows, who, top=int(who[np.argmax(share[who])]))
    if late is not None:
        top = late
        others = [waits[int(r)] for r in who if r != top]
        out["slow_rank"] = top
        waits_text = (f"it waits {1e3 * waits[top]:.2f} ms per call, the others "
                      f"{1e3 * float(np.median(others)):.2f} ms")
        out["slow_rank_note"] = (
            f"rank {top} holds the others back: last to arrive in {100 * share[top]:.0f}% of "
            f"{n} calls; {waits_text}" if others_wait else
            f"rank {top} is the slowest worker: it reached its k-th push last for "
            f"{100 * share[top]:.0f}% of k = 1..{n}; async, so nobody waited for it "
            f"({waits_text})")
    return out


def _fewest_calls(rows: np.ndarray, who: np.ndarray, top: int) -> int | None:
    """Async: ``top`` (last at most of its pushes) when it also made at most half the pushes
    of every other worker; nobody waits in async, so a slow worker pushes less often, and a
    factor of two in a count of its own calls is no scheduling noise."""
    counts = {int(r): float(rows[r, 2]) for r in who}
    others = [c for r, c in counts.items() if r != top]
    return top if others and 2 * counts[top] <= min(others) else None
