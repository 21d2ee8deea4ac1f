"""mpicomm's double binary tree as the virtual clock runs it: its step recurrence, in closed form.

The tree reducer (``reducers/tree.py``) reduces chunk j of tree t up at step j + (its height
in t), then broadcasts it down at step j + (its depth in t). At a step a rank waits (one
wait over both trees) for that step's chunks from its children (its parent's, going down)
and its own sends of the step before, adds each child's chunk (a kernel:
``stepwise.add_seconds``) and sends up (down to each child). The clock charges each message
as every other (``p2p/virtual.py``, ``costmodel.queues``): the sends a rank posts in a row
share its send queue of their link class fairly (``fair_ends``), a message arrives α after
its last byte left and no sooner than the receiver's queue of the class has a gap of its
bytes (``first_gap``), and across nodes β is multiplied by the node's share of its NICs
for that phase and direction (``algos.tree_crossings``, ``queues.interface_share``). So,
with T_r the clock of rank r, every step of every rank:

    T_r = max(T_r, arrivals of the step's chunks, ends of the last step's sends)
    going up: T_r += adds; each send posted at T_r (tree 0's before tree 1's adds)

``tree_cluster_time`` runs it over all ranks, step by step, and returns the last rank's end:
the pipeline's pace (the busiest queue's messages a step, α paid once a level, not a step),
its fill and drain, and the steps where only one tree has a chunk come out as the clock
charges them. O(p·(k + depth)) for k chunks a tree, k at most 4·depth + 4 (then
extrapolated from the steady state: ``tree_cluster_time``).
"""

from __future__ import annotations

import math
from functools import lru_cache

from mpicomm.costmodel.algos import (
    _tree_crossings_all,
    _tree_levels_all,
    double_binary_tree,
    tree_chunk_bytes,
    tree_depth,
)
from mpicomm.costmodel.queues import book_receive, fair_ends, interface_share
from mpicomm.costmodel.stepwise import add_seconds

__all__ = ["tree_cluster_time", "tree_allreduce_time"]


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """Double binary tree on one link class: ``tree_cluster_time`` with every rank on one node."""
    return tree_cluster_time(p, n, p, (alpha, beta), (alpha, beta), gamma)


class _Ranks:
    """Every rank's clock, send queues (free from) and receive queues (busy intervals and
    the floor of those forgotten), per link class (0 intra, 1 inter), and the β multipliers
    of its queues across nodes."""

    def __init__(self, p: int, node_of: list[int], links, nics: int | None) -> None:
        self.node_of, self.links = node_of, links
        self.clock = [0.0] * p
        self.send_free = [[0.0, 0.0] for _ in range(p)]
        self.busy: list[list[list]] = [[[], []] for _ in range(p)]
        self.floor = [[0.0, 0.0] for _ in range(p)]
        # per rank: share of (edges to parents, edges to children) across nodes
        self.shares = [tuple(interface_share(*x, nics) for x in crossing)
                       for crossing in _tree_crossings_all(node_of)]

    def send(self, r: int, posts: list[tuple], share: float, sent: dict) -> float:
        """Book one batch of sends (post time, peer, bytes, tree, chunk) on r's queues, each
        into ``sent`` as (start, end, r, bytes); return the last one's end."""
        node, last = self.node_of, 0.0
        classes: tuple[list, list] = ([], [])
        for post in posts:
            classes[node[post[1]] != node[r]].append(post)
        for c, batch in enumerate(classes):
            if not batch:
                continue
            beta = self.links[c][1] * (share if c else 1.0)
            free = self.send_free[r][c]
            starts = [t0 if t0 > free else free for t0, *_ in batch]
            ends = fair_ends(starts, [post[2] * beta for post in batch])
            for (_, dst, nbytes, t, j), start, end in zip(batch, starts, ends, strict=True):
                sent[t, j, r, dst] = (start, end, r, nbytes)
            free = self.send_free[r][c] = max(ends)
            last = free if free > last else last
        return last

    def receive(self, r: int, msgs: list[tuple], share: float) -> float:
        """Book messages (start, end, source, bytes) on r's receive queues; the last arrival."""
        last = 0.0
        for start, end, src, nbytes in sorted(msgs):
            c = int(self.node_of[src] != self.node_of[r])
            alpha, beta = self.links[c]
            wire = nbytes * beta * (share if c else 1.0)
            t, self.floor[r][c] = book_receive(self.busy[r][c], self.floor[r][c],
                                               start + alpha, wire)
            last = max(last, end + alpha, t + wire)
        return last


def tree_cluster_time(p: int, n: float, ranks_per_node: int, intra: tuple[float, float],
                      inter: tuple[float, float], gamma: float, launch: float = 0.0,
                      nics: int | None = None) -> float:
    """Seconds of mpicomm's tree allreduce of ``n`` bytes over ``p`` ranks in nodes of
    ``ranks_per_node`` consecutive ranks, as the virtual clock charges it (module docstring).

    ``intra``/``inter``: (α, β) of each class; ``gamma``, ``launch``: an add's seconds a byte
    and its kernel's launch (``core.flops.add``); ``nics``: interfaces a node (None: one a
    rank), shared by the tree's edges across nodes in each phase (``algos.tree_crossings``).

    Past ``4·depth + 2`` chunks a tree the chunks are all ``TREE_CHUNK_BYTES`` and the
    pipeline is in its steady state: each more chunk adds the same time. The recurrence then
    runs at K, K + 1 and K + 2 chunks (the same last chunk) and, where the two differences
    agree, the time is extrapolated from them (else it runs at the full k): so the sizes of a
    sweep above that share three runs, cached.
    """
    if p <= 1 or n <= 0:
        return 0.0
    depth = tree_depth(p)
    chunk = tree_chunk_bytes(n, depth)
    k = max(math.ceil(n / 2 / chunk), 1)
    last = n / 2 - (k - 1) * chunk  # each tree's half: k - 1 whole chunks and this one
    args = (p, max(ranks_per_node, 1), intra, inter, gamma, launch, nics, chunk, last)
    big = 4 * depth + 2
    if k <= big + 2:
        return _recurrence(*args, k)
    a, b, c = (_recurrence(*args, m) for m in (big, big + 1, big + 2))
    if abs((c - b) - (b - a)) <= 1e-9 * c:
        return a + (k - big) * (b - a)
    return _recurrence(*args, k)


@lru_cache(maxsize=256)  # a step's buckets and a sweep's sizes ask again: O(p·(k + depth))
def _recurrence(p: int, local: int, intra: tuple[float, float], inter: tuple[float, float],
                gamma: float, launch: float, nics: int | None, chunk: float, last: float,
                k: int) -> float:
    """The recurrence (module docstring) over k chunks a tree: k - 1 of ``chunk`` bytes,
    then ``last``; the last rank's end."""
    node_of = [r // local for r in range(p)]
    sizes = [float(chunk)] * (k - 1) + [last]
    shapes = [double_binary_tree(p, r) for r in range(p)]
    levels = _tree_levels_all(p)  # per tree: (heights, depths)
    ranks = _Ranks(p, node_of, (intra, inter), nics)
    _phase(ranks, shapes, [h for h, _ in levels], sizes, True, gamma, launch)
    _phase(ranks, shapes, [d for _, d in levels], sizes, False, gamma, launch)
    return max(ranks.clock)


def _phase(ranks: _Ranks, shapes, level, sizes: list[float], up: bool, gamma: float,
           launch: float) -> None:
    """One phase over every rank, step by step: going ``up`` chunk j of tree t at step
    j + height (children's chunks in, adds, a send to the parent), else at j + depth (the
    parent's chunk in, a send to each child). ``level[t][r]``: r's height or depth in t."""
    p, k = len(shapes), len(sizes)
    edges = []  # per rank, per tree: (the ranks it receives from, the ranks it sends to)
    for r in range(p):
        per = []
        for parent, children in shapes[r]:
            parents = [parent] if parent >= 0 else []
            per.append((children, parents) if up else (parents, children))
        edges.append(per)
    adds = [add_seconds(b, gamma, launch) if up else 0.0 for b in sizes]  # a child's chunk
    sent: dict = {}  # (tree, chunk, sender, receiver) -> (start, end, sender, bytes)
    pending = [0.0] * p  # each rank's last sends' end
    out_share = [s[0] if up else s[1] for s in ranks.shares]  # its sends' NIC share
    in_share = [s[1] if up else s[0] for s in ranks.shares]
    for step in range(max(k + lv for tree in level for lv in tree)):
        for r in range(p):
            chunks = [(t, step - level[t][r]) for t in (0, 1) if 0 <= step - level[t][r] < k]
            if not chunks:
                continue
            msgs = [sent.pop((t, j, src, r)) for t, j in chunks for src in edges[r][t][0]]
            now = max(ranks.clock[r], pending[r])  # one wait: the chunks and the last sends
            if msgs:
                now = max(now, ranks.receive(r, msgs, in_share[r]))
            posts = []
            for t, j in chunks:
                sources, targets = edges[r][t]
                now += len(sources) * adds[j]
                posts += [(now, dst, sizes[j], t, j) for dst in targets]
            ranks.clock[r] = now
            pending[r] = ranks.send(r, posts, out_share[r], sent)
    for r in range(p):
        ranks.clock[r] = max(ranks.clock[r], pending[r])
