"""How messages share a link class's queues: the one rule the virtual clock and the predictor use.

Each rank has, per link class, a send and a receive queue (``p2p/virtual.py``):

- ``fair_ends``: the messages a rank posts in a row share its send queue fairly (processor
  sharing, as a NIC interleaves them);
- ``first_gap``: a message takes the first gap of its wire time in the receiver's queue (a
  list of busy intervals), so incast queues at the receiver;
- ``interface_share``: a node's ranks that cross node boundaries at once share its NICs, β
  across nodes multiplied by their share.

``p2p.virtual.VirtualTransport`` books every message by them; the tree's predictor
(``costmodel.tree_steps``) runs the same recurrence in closed form.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from operator import itemgetter

__all__ = ["fair_ends", "first_gap", "book_receive", "interface_share", "RECV_INTERVALS"]

_end = itemgetter(1)
RECV_INTERVALS = 64  # busy intervals a receive queue remembers; before them it counts as busy


def fair_ends(starts: list[float], wires: list[float]) -> list[float]:
    """Each message's end on one interface shared fairly (processor sharing): message i
    joins at ``starts[i]`` needing ``wires[i]`` seconds of the whole interface, and the k in
    flight each move at 1/k of its rate, so the one with the least left ends first. Equal
    messages posted together all end at start + k·wire; one posted after the others have
    ended runs alone from its own start (never ends before it was posted)."""
    if len(starts) == 1:  # alone on the interface
        return [starts[0] + wires[0]]
    order = sorted(range(len(starts)), key=starts.__getitem__)
    ends = [0.0] * len(starts)
    left: dict[int, float] = {}  # in flight: seconds of the whole interface still to move
    t, j = starts[order[0]], 0
    while j < len(order) or left:
        while j < len(order) and starts[order[j]] <= t:  # 1. the messages posted by now join
            left[order[j]] = wires[order[j]]
            j += 1
        if not left:  # 2. the interface idles until the next post
            t = starts[order[j]]
            continue
        k, least = len(left), min(left.values())
        done = t + k * least
        join = starts[order[j]] if j < len(order) else math.inf
        if join < done:  # 3. one joins before any ends: each has moved (join - t)/k
            moved = (join - t) / k
            for i in left:
                left[i] -= moved
            t = join
            continue
        for i in [i for i, w in left.items() if w == least]:  # 4. the least left end
            ends[i] = done
            del left[i]
        for i in left:
            left[i] -= least
        t = done
    return ends


def first_gap(busy: list[tuple[float, float]], t: float, wire: float) -> float:
    """Book ``wire`` seconds in ``busy`` (a receive queue's intervals, sorted by start and
    disjoint) in the first gap from ``t`` on; return the booking's start. Touching intervals
    merge."""
    k = len(busy)
    for i in range(bisect_right(busy, t, key=_end), k):  # the intervals still busy at t on
        b0, b1 = busy[i]
        if b0 >= t + wire:
            k = i
            break
        t = b1
    lo, hi = t, t + wire
    if k < len(busy) and busy[k][0] <= hi:  # touches the next interval
        hi = busy.pop(k)[1]
    if k > 0 and busy[k - 1][1] >= lo:  # touches the previous one
        k -= 1
        lo = busy.pop(k)[0]
    busy.insert(k, (lo, hi))
    return t


def book_receive(busy: list[tuple[float, float]], floor: float, t: float,
                 wire: float) -> tuple[float, float]:
    """Book ``wire`` seconds on a receive queue (``busy``, and ``floor``: the end of the
    intervals it forgot) from ``t`` on: (the booking's start, the new floor). Past
    ``RECV_INTERVALS`` the oldest interval is forgotten and everything before its end counts
    as busy (a forgotten interval is never a gap)."""
    t = first_gap(busy, floor if floor > t else t, wire)
    if len(busy) > RECV_INTERVALS:
        floor = busy.pop(0)[1]
    return t, floor


def interface_share(own: int, ranks: int, messages: int, nics: int | None) -> float:
    """β across nodes is multiplied by this on a rank's queue of one direction, when its node's
    ``nics`` interfaces (None: one a rank) carry ``messages`` messages of ``ranks`` ranks at
    once, ``own`` of them this rank's (which already follow one another on its own queue).

    Up to one rank an interface, each rank has its own: 1. More ranks than interfaces spread
    the node's messages evenly, ⌈messages/nics⌉ on each, and no fewer than a rank's own:
    max(own, ⌈messages/nics⌉)/own. With one message a rank that is ⌈k/c⌉ for k ranks on c
    interfaces (every algorithm but the tree, whose ranks send one or two across at once).
    The virtual clock (``VirtualTransport.cross_at_once``) and the predictor both take it."""
    if own <= 0 or nics is None or ranks <= nics:
        return 1.0
    return max(own, math.ceil(messages / nics)) / own
