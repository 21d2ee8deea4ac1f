"""mpicomm's own ring as the virtual clock runs it: one blocking exchange a step, an add a kernel.

The clock (``p2p/virtual.py``) times every message: a rank's send starts when it posts it
(its queue is free: the last step's send ended before its wait did), its last byte leaves
b·β later, and it arrives α after that; a rank's ``sendrecv`` ends at the later of its own
send's end and its receive's arrival. A reduce-scatter step then adds what arrived: one
kernel on the device model (``core.flops.add``: a launch plus 3 bytes moved a byte,
``Cluster.launch_s`` and γ). So, with t_i(k) when rank i posts step k and (α_i, β_i) the
link from rank i to its right neighbour:

    t_i(k+1) = max(t_{i−1}(k) + α_{i−1} + b·β_{i−1},  t_i(k) + b·β_i) + add(b)

1. a rank waits for its left neighbour only, not for the slowest link of the ring: on a ring
   of fast intra-node and slow inter-node links the boundary rank's sends (b·β_inter a step)
   pace it, and the inter-node α is paid once, not at every step;
2. every reduce-scatter step pays the add's launch (3 µs on the default device), which the
   step-by-step α-β-γ ring (``formulas.ring_time``) leaves out;
3. a segment above ``PIECE_BYTES`` moves as pieces, each its own exchange and add (the
   reducers' ``PIECE_BYTES``; a test holds the two equal); the allgather sends whole
   segments, with no add.

The ranks of a node are consecutive, so when L divides p every node is alike and one node's
L timelines (the left neighbour of its first rank being its last) are the whole ring's.
The collective ends when the last rank does. ``ring_stepwise_time`` is the ring's cost,
``ring_phase_time`` one uniform ring's (hierarchical's rings inside and across nodes);
``cluster_predict`` reads them for a cluster that is not ``pipelined``.
"""

from __future__ import annotations

import math

__all__ = ["ring_stepwise_time", "ring_phase_time", "add_seconds", "PIECE_BYTES"]

PIECE_BYTES = 1 << 20  # reducers.ring.PIECE_BYTES: a reduce-scatter step's largest message


def add_seconds(nbytes: float, gamma: float, launch: float) -> float:
    """One local add of ``nbytes`` (the buffer's bytes): γ a byte (3 bytes moved a byte at the
    device's memory bandwidth) and one kernel launch, as ``core.flops.add`` charges it."""
    return launch + nbytes * gamma


def _steps(p: int, n: float, gamma: float, launch: float) -> list[tuple[float, float]]:
    """(bytes, add seconds) of every exchange of the ring: the reduce-scatter's pieces, each
    added, then the allgather's whole segments."""
    seg = n / p
    pieces = max(1, math.ceil(seg / PIECE_BYTES))
    sizes = [min(PIECE_BYTES, seg - j * PIECE_BYTES) for j in range(pieces)]
    rs = [(b, add_seconds(b, gamma, launch)) for b in sizes] * (p - 1)
    return rs + [(seg, 0.0)] * (p - 1)


def _run(links: list[tuple[float, float]], steps: list[tuple[float, float]]) -> float:
    """The recurrence (module docstring) over one period of ranks; the last rank's end."""
    width = len(links)
    t = [0.0] * width
    for b, add in steps:
        sent = [ti + b * beta for ti, (_, beta) in zip(t, links, strict=True)]
        t = [max(sent[i - 1] + links[i - 1][0], sent[i]) + add for i in range(width)]
    return max(t)


def ring_stepwise_time(p: int, n: float, local: int, intra: tuple[float, float],
                       inter: tuple[float, float], gamma: float, launch: float = 0.0) -> float:
    """Seconds of mpicomm's ring allreduce of ``n`` bytes over ``p`` ranks, nodes of ``local``
    consecutive ranks, as the virtual clock charges it (module docstring).

    ``intra``/``inter``: (α, β) of a rank's link inside its node and of the one that leaves
    it (β already shared by the ranks crossing a NIC at once); ``gamma``, ``launch``: the
    add's seconds a byte and a kernel's launch.
    """
    if p <= 1:
        return 0.0
    local = max(1, min(local, p))
    nodes = -(-p // local)
    width = local if p % local == 0 else p  # one node is the whole ring when all are alike
    links = [inter if nodes > 1 and (i + 1) % local == 0 else intra for i in range(width)]
    if nodes > 1 and width == p:  # an uneven last node: its last rank crosses too
        links[-1] = inter
    return _run(links, _steps(p, n, gamma, launch))


def ring_phase_time(q: int, n: float, link: tuple[float, float], gamma: float,
                    launch: float = 0.0, reduce: bool = True, gather: bool = True) -> float:
    """A uniform ring of ``q`` ranks on one link class: (q−1) reduce-scatter exchanges and
    adds (its pieces) and (q−1) allgather exchanges of n/q bytes, each α + b·β (+ the add):
    the recurrence with every rank alike. ``reduce``/``gather``: which halves run."""
    if q <= 1:
        return 0.0
    steps = _steps(q, n, gamma, launch)
    half = len(steps) - (q - 1)
    chosen = (steps[:half] if reduce else []) + (steps[half:] if gather else [])
    return _run([link], chosen)
