"""tree: NCCL's double binary tree AllReduce — latency lg p instead of the ring's p.

Two complementary binary trees over the p ranks (``costmodel.algos.double_binary_tree``):
tree 0 is NCCL's in-order binary tree (rank 0 the root, the odd ranks its
leaves); tree 1 its mirror (rank r plays p-1-r) for even p, its shift by one for
odd p. For even p a leaf of one tree is an inner rank of the other, so over the
two trees every rank sends and receives about 2n, like the ring. Tree t reduces
half t of the buffer (the first half takes the odd element), cut into about
4·D chunks (``tree_chunk_bytes``: 64 KiB to 1 MiB); the two trees work at the same time.

1. Reduce up, pipelined in steps: a rank handles chunk j of tree t at step
   j + (its height in t) (``costmodel.algos.tree_levels``; leaves 0). At each
   step it posts the receives of that step's chunks from its children in both
   trees (into preallocated scratch, one chunk per child), waits for them
   together with its sends of the previous step (one wait over both trees), adds
   the children's chunks into the buffer in a fixed order (own + first child +
   second child) and sends each chunk to its parent (``isend``, completed at the
   next step). A child's height is below its parent's, so every message waited
   for at a step was sent at an earlier one: one wait over both trees cannot
   deadlock, even where a rank sits above another in one tree and below it in
   the other (p = 2). Handling chunk j of both trees in the same step instead
   (heights ignored) makes the root of one tree, a leaf of the other, hold
   its leaf chunk j until its root chunk j is complete: a cycle through both
   trees that took 3.75x the formula on one link (docs/tree_and_channels.md).
2. (op="mean") the root of each tree scales each chunk once it is complete.
3. Broadcast down, the same way at step j + (depth in t): receive chunk j from
   the parent of each tree straight into the buffer (one wait, with the previous
   step's sends), then send it to the children. Every element is summed once, at
   its root, and copied down: every rank ends bit-identical.

Across nodes (``costmodel.algos.tree_crossings``): the reduce sends each rank's edges to
its parents that leave its node and receives those to its children, the broadcast the other
way round; before each phase the rank sets them on its transport (``cross_at_once``), so
under ``--nics-per-node c`` a queue across nodes takes β_e x
``costmodel.queues.interface_share`` of its node's edges crossing at once in that phase:
⌈M/c⌉ of the node's M messages an interface, never fewer than the rank's own. At 2 nodes x 2
on one NIC a node the reduce sends across from one rank a node (two messages), the broadcast
from two (one each); counting every rank of a node had charged 2.2x the NIC's bytes.

Cost (D = depth = ⌈lg p⌉, k chunks per tree of c = n/(2k) bytes; a queue (link class and
direction) of a rank carries q ≤ 2 chunks a step over both trees, each c·β·s, s its NIC
share in the phase; P = the busiest queue's q·c·β·s; A = a reduce step's adds, one kernel
a child's chunk (c·γ + launch), which run while the next chunks are on the wire):

    T_tree ≈ (k - 1)·(max(P, A) + P) + 2·D·(α + c·β)

A rank's sends wait for its own last ones, not for its parent, so α is paid once a level
(the fill), not once a step: ≈ 2·⌈lg p⌉·α for small n (k = 1) against the ring's 2(p-1)·α,
and ≈ 2n·β for large n (k ≫ D: each rank sends at most 2n bytes, the ring 2(p-1)/p·n). It
wins where latency dominates — small and medium buffers at many ranks; the ring wins for
large buffers on few ranks. ``costmodel.tree_steps.tree_cluster_time`` (the predictor's
tree) runs the clock's own recurrence over both trees' steps, the steps where only one
tree has a chunk and the receive queues included; ``costmodel.algos.tree_bytes_sent``
gives each rank's bytes exactly.

NCCL builds the trees over nodes with a chain inside each node; here they span
ranks directly.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import clock, flops, tags
from mpicomm.core.backend import array_module, sync_device
from mpicomm.costmodel.algos import (
    double_binary_tree,
    tree_chunk_bytes,
    tree_chunks,
    tree_crossings,
    tree_depth,
    tree_levels,
)
from mpicomm.reducers.base import Reducer

__all__ = ["TreeReducer"]

_TAG_UP, _TAG_DOWN = tags.TREE_UP, tags.TREE_DOWN  # + tree index


class _Plan:
    """Per (length, dtype, array type): each tree's chunk offsets and the children's scratch."""

    __slots__ = ("chunks", "scratch")

    def __init__(self, chunks, scratch) -> None:
        self.chunks = chunks  # per tree: absolute offsets cutting its half into chunks
        self.scratch = scratch  # per tree, per child: one chunk of scratch


def _folded(chunk_bytes: int, itemsize: int) -> int:
    """A chunk of the unfolded run's elements, 1/F of them under ``--fold F`` (rounded up,
    so a tree's half is cut into as many chunks as unfolded)."""
    f = clock.fold()
    return chunk_bytes if f == 1 else -(-(chunk_bytes // itemsize) // f) * itemsize


class TreeReducer(Reducer):
    """Double binary tree AllReduce, pipelined in chunks (see module docstring)."""

    name = "tree"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self._trees = double_binary_tree(self.size, self.rank)  # ((parent, children), ...)
        self._depth = tree_depth(self.size)
        self._levels = tree_levels(self.size, self.rank)  # per tree: (height, depth)
        # the edges that leave this rank's node at once, to parents and to children: the
        # reduce sends the first and receives the second, the broadcast the other way
        self._across = tree_crossings(self.p2p.node_of, self.rank)
        self._plans: dict[tuple, _Plan] = {}
        self._store: dict = {}  # array module name -> scratch for every child's chunk

    def _plan(self, flat) -> _Plan:
        key = (flat.size, flat.dtype.char, type(flat))
        plan = self._plans.get(key)
        if plan is None:
            first = flat.size - flat.size // 2
            step = tree_chunk_bytes(clock.fold() * flat.nbytes, self._depth)  # every rank's
            step = _folded(step, flat.itemsize)
            chunks = [[lo + o for o in tree_chunks(hi - lo, flat.itemsize, step)]
                      for lo, hi in ((0, first), (first, flat.size))]
            plan = self._plans[key] = _Plan(chunks, self._scratch(flat, chunks))
        return plan

    def _scratch(self, flat, chunks):
        """One chunk of scratch per child of each tree, views into one reused buffer."""
        widest = max((b - a for c in chunks for a, b in zip(c[:-1], c[1:], strict=True)), default=1)
        need = max(widest, 1) * flat.itemsize
        need += -need % 8
        nkids = sum(len(children) for _, children in self._trees)
        xp = array_module(flat)
        raw = self._store.get(xp.__name__)
        if raw is None or raw.nbytes < max(nkids, 1) * need:  # at most 4 chunks of 1 MiB
            raw = self._store[xp.__name__] = xp.empty(max(nkids, 1) * need, dtype=np.uint8)
            self._plans.clear()  # older plans view the old buffer: drop them
        views, i = [], 0
        for _, children in self._trees:
            views.append([raw[(i + j) * need:(i + j + 1) * need].view(flat.dtype)
                          for j in range(len(children))])
            i += len(children)
        return views

    def _allreduce(self, flat, scale) -> None:
        # one rank: both trees are a lone root, which scales; n = 0: no chunks
        plan = self._plan(flat)
        self._reduce_up(flat, plan, scale, not isinstance(flat, np.ndarray))
        self._broadcast_down(flat, plan)

    def _active(self, plan: _Plan, step: int, level: int):
        """Yield (tree, parent, children, chunk bounds) of the trees with a chunk at ``step``.

        Tree t's chunk j comes at step j + (height in t) going up (level 0) and
        j + (depth in t) going down (level 1)."""
        for t, (up, children) in enumerate(self._trees):
            bounds = plan.chunks[t]
            j = step - self._levels[t][level]
            if 0 <= j < len(bounds) - 1:
                yield t, up, children, bounds[j], bounds[j + 1]

    def _steps(self, plan: _Plan, level: int) -> int:
        """Steps this rank takes in one phase: up to its last chunk of either tree."""
        return max(len(b) - 1 + lv[level] for b, lv in zip(plan.chunks, self._levels, strict=True))

    def _reduce_up(self, flat, plan: _Plan, scale, on_device: bool) -> None:
        """Steps 1-2: stream the chunks up both trees; the roots scale for op="mean"."""
        p2p, pending = self.p2p, []  # the sends of the previous step
        p2p.cross_at_once(*self._across)
        for step in range(self._steps(plan, 0)):
            posted, reqs = [], []
            for t, up, children, lo, hi in self._active(plan, step, 0):
                got = [s[:hi - lo] for s in plan.scratch[t]]
                reqs += [p2p.irecv(g, c, _TAG_UP + t) for g, c in zip(got, children, strict=True)]
                posted.append((up, flat[lo:hi], got, t))
            if not posted:
                continue
            p2p.waitall(reqs + pending)  # one wait over both trees: sent a step or more ago
            pending = []
            for up, chunk, got, t in posted:
                for g in got:
                    np.add(chunk, g, out=chunk)
                    flops.add(chunk.size)
                if up < 0 and scale is not None:
                    chunk *= scale
                    flops.scale(chunk.size)
                if on_device:
                    sync_device(chunk)
                if up >= 0:
                    pending.append(p2p.isend(chunk, up, _TAG_UP + t))
        p2p.waitall(pending)

    def _broadcast_down(self, flat, plan: _Plan) -> None:
        """Step 3: stream the reduced chunks from each root down its tree."""
        p2p, pending = self.p2p, []
        p2p.cross_at_once(*self._across[::-1])
        for step in range(self._steps(plan, 1)):
            posted, reqs = [], []
            for t, up, children, lo, hi in self._active(plan, step, 1):
                chunk = flat[lo:hi]
                if up >= 0:
                    reqs.append(p2p.irecv(chunk, up, _TAG_DOWN + t))
                posted.append((children, chunk, t))
            if not posted:
                continue
            p2p.waitall(reqs + pending)
            pending = [p2p.isend(chunk, c, _TAG_DOWN + t)
                       for children, chunk, t in posted for c in children]
        p2p.waitall(pending)
