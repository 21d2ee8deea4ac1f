"""Shapes and byte counts of the multi-channel ring and the double binary tree (pure, no MPI).

The reducers ``mpicomm.reducers.multiring`` and ``mpicomm.reducers.tree`` take
their ring orders and tree shapes from here, so the costs count the very messages
the reducers send (``tests/reducers/test_tree.py`` and ``test_multiring.py`` hold
the byte counts against the transport's). Their times:

    multiring  ``cluster_predict.cluster_time("ring", ...)`` with channels, the one
               multi-channel ring formula (``multichannel_ring_time`` pipelined)
    tree       ``tree_steps.tree_cluster_time``: the clock's step recurrence over
               these shapes, each phase's NIC share from ``tree_crossings``
"""

from __future__ import annotations

import math

__all__ = [
    "TREE_CHUNK_BYTES", "TREE_MIN_CHUNK_BYTES", "tree_chunk_bytes", "btree",
    "double_binary_tree", "tree_depth", "tree_levels", "channel_rings", "tree_chunks",
    "multiring_bytes_sent",
    "tree_bytes_sent", "tree_messages_sent", "tree_crossings",
]

# the tree cuts each half of the buffer into about 4·depth chunks of these bounds (tree_chunk_bytes)
TREE_CHUNK_BYTES = 1 << 20
TREE_MIN_CHUNK_BYTES = 1 << 16

Shape = tuple[int, list[int]]  # (parent or -1 at the root, children in reduction order)
# across node boundaries at once, one direction: (this rank's messages, its node's ranks
# that send some, its node's messages) — ``queues.interface_share``'s arguments
Crossing = tuple[int, int, int]


def btree(p: int, rank: int) -> Shape:
    """Return (parent, children) of ``rank`` in NCCL's in-order binary tree over p ranks.

    Rank r's level is its lowest set bit b; its parent is (r XOR b) | 2b (or
    r XOR b when that is >= p), its children r - b/2 and r + b/2 (the latter
    moved down a level while >= p). Rank 0 is the root with one child. Leaves
    are the odd ranks; the depth is ⌈lg p⌉.
    """
    if p <= 1:
        return -1, []
    bit = 1
    while bit < p and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, [bit >> 1]
    up = (rank ^ bit) | (bit << 1)
    if up >= p:
        up = rank ^ bit
    low = bit >> 1
    if low == 0:
        return up, []
    children = [rank - low]
    while rank + low >= p and low:
        low >>= 1
    if low:
        children.append(rank + low)
    return up, children


def double_binary_tree(p: int, rank: int) -> tuple[Shape, Shape]:
    """Return ``rank``'s (parent, children) in NCCL's two complementary trees.

    Tree 0 is ``btree``; tree 1 is its mirror (rank r plays p-1-r) when p is
    even, its shift by one (r plays r-1) when p is odd. For even p the leaves of
    one tree (the odd ranks) are the inner ranks of the other, so every rank
    sends about as much as it receives over the two trees together.
    """
    first = btree(p, rank)
    if p % 2 == 0:
        def play(r: int) -> int:
            return p - 1 - r
        back = play
    else:
        def play(r: int) -> int:
            return (r - 1) % p

        def back(r: int) -> int:
            return (r + 1) % p
    up, down = btree(p, play(rank))
    second = (-1 if up < 0 else back(up), [back(c) for c in down])
    return first, second


def tree_depth(p: int) -> int:
    """Return the longest root-to-leaf path (edges) over both trees of ``double_binary_tree``."""
    deepest = 0
    for t in (0, 1):
        for r in range(p):
            d, node = 0, r
            while (up := double_binary_tree(p, node)[t][0]) >= 0:
                d, node = d + 1, up
            deepest = max(deepest, d)
    return deepest


def _tree_levels_all(p: int) -> list[tuple[list[int], list[int]]]:
    """Per tree of ``double_binary_tree``: (height, depth) of every rank, as two lists."""
    shapes = [double_binary_tree(p, r) for r in range(p)]
    levels = []
    for t in (0, 1):
        parent = [shapes[r][t][0] for r in range(p)]
        depth = [0] * p
        for r in range(p):
            node = r
            while parent[node] >= 0:
                depth[r], node = depth[r] + 1, parent[node]
        height = [0] * p
        for r in sorted(range(p), key=lambda r: -depth[r]):  # children before parents
            if parent[r] >= 0:
                height[parent[r]] = max(height[parent[r]], height[r] + 1)
        levels.append((height, depth))
    return levels


def tree_levels(p: int, rank: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Return ``rank``'s (height, depth) in each tree of ``double_binary_tree``.

    Height: edges of the longest path down to a leaf (0 at a leaf); depth: edges
    up to the root (0 at the root). The tree reducer works on chunk j of a tree at
    step j + height (reduce) and j + depth (broadcast).
    """
    (h0, d0), (h1, d1) = _tree_levels_all(p)
    return (h0[rank], d0[rank]), (h1[rank], d1[rank])


def _tree_crossings_all(node_of: list[int]) -> list[tuple[Crossing, Crossing]]:
    """``tree_crossings`` of every rank (one pass over the trees, then one over the nodes)."""
    p = len(node_of)
    across = []  # per rank: (edges to its parents, edges to its children) leaving its node
    for r in range(p):
        ups = downs = 0
        for up, children in double_binary_tree(p, r):
            ups += up >= 0 and node_of[up] != node_of[r]
            downs += sum(node_of[ch] != node_of[r] for ch in children)
        across.append((ups, downs))
    nodes: dict[int, list[int]] = {}  # node -> [ranks up, messages up, ranks down, messages down]
    for r, (ups, downs) in enumerate(across):
        t = nodes.setdefault(node_of[r], [0, 0, 0, 0])
        t[0], t[1], t[2], t[3] = t[0] + (ups > 0), t[1] + ups, t[2] + (downs > 0), t[3] + downs
    return [((ups, *nodes[node_of[r]][:2]), (downs, *nodes[node_of[r]][2:]))
            for r, (ups, downs) in enumerate(across)]


def tree_crossings(node_of: list[int], rank: int) -> tuple[Crossing, Crossing]:
    """Return ``rank``'s tree edges across node boundaries, toward its parents and toward its
    children, over both trees of ``double_binary_tree``: each (its own edges, the ranks of its
    node with such an edge, the edges of its node in all).

    In a pipelined step of the reduce phase every rank sends a chunk up each tree and
    receives one from each child, so the first is what leaves the node through its
    interfaces at once and the second what arrives; the broadcast phase the other way round.
    ``node_of``: the node of every rank. The reducer sets them on the virtual clock per phase
    (``cross_at_once``) and ``tree_cluster_time`` charges them (``queues.interface_share``).
    """
    return _tree_crossings_all(node_of)[rank]


def channel_rings(node_of: list[int], channels: int) -> list[list[int]]:
    """Return the ring order (a list of ranks) of each channel.

    Ranks are grouped by node (nodes in order of their lowest rank, ranks in
    order inside a node). Channel c visits every node in turn and, inside node
    j of L_j ranks, starts at its local rank c mod L_j. So the ring leaves node j
    from local rank (c-1) mod L_j and enters the next node at local rank
    c mod L_{j+1}: for K <= L the K channels cross each node boundary through K
    different rank pairs (K > L reuses them, channel c like c - L).
    """
    groups: dict[int, list[int]] = {}
    for r, node in enumerate(node_of):
        groups.setdefault(node, []).append(r)
    nodes = list(groups.values())
    rings = []
    for c in range(channels):
        rings.append([g[(c + i) % len(g)] for g in nodes for i in range(len(g))])
    return rings


def tree_chunk_bytes(nbytes: float, depth: int) -> int:
    """Return the chunk size for a tree allreduce of ``nbytes`` over trees ``depth`` deep.

    About 4·depth chunks per half, so the pipeline fill (depth - 1 chunk steps)
    adds at most ~25%, bounded to [``TREE_MIN_CHUNK_BYTES``, ``TREE_CHUNK_BYTES``]:
    smaller chunks would be all per-message cost, larger ones no longer pipeline.
    """
    want = math.ceil(nbytes / 2 / (4 * max(depth, 1)))
    chunk = min(max(want, TREE_MIN_CHUNK_BYTES), TREE_CHUNK_BYTES)
    return chunk + (-chunk % 8)


def tree_chunks(items: int, itemsize: int, chunk_bytes: int) -> list[int]:
    """Return the offsets cutting ``items`` elements into chunks of at most ``chunk_bytes``."""
    step = max(chunk_bytes // itemsize, 1)
    return list(range(0, items, step)) + [items]


def _halves(n_items: int) -> list[int]:
    """Items of each tree's half: the first half gets the odd item."""
    return [n_items - n_items // 2, n_items // 2]


def _segment(items: int, parts: int, j: int) -> int:
    """Length of part j when ``items`` is cut like ``np.array_split`` into ``parts``."""
    base, extra = divmod(items, parts)
    return base + (j < extra)


# ------------------------------------------------------------------ bytes sent
def multiring_bytes_sent(n_items: int, itemsize: int, node_of: list[int], channels: int,
                         rank: int) -> int:
    """Bytes ``rank`` sends in one multi-channel ring allreduce of ``n_items`` elements.

    Channel c's ring runs on slice c (``np.array_split`` into K) cut into p
    segments; at ring position q a rank sends every segment but q in the
    reduce-scatter and every one but q+1 in the allgather.
    """
    p = len(node_of)
    if p == 1 or n_items == 0:
        return 0
    total = 0
    for c, ring in enumerate(channel_rings(node_of, channels)):
        items = _segment(n_items, channels, c)
        q = ring.index(rank)
        total += 2 * items - _segment(items, p, q) - _segment(items, p, (q + 1) % p)
    return total * itemsize


def tree_bytes_sent(n_items: int, itemsize: int, p: int, rank: int) -> int:
    """Bytes ``rank`` sends in one double-binary-tree allreduce of ``n_items`` elements.

    In tree t (half t of the buffer) a rank sends its half once up (unless it is
    the root) and once down to each child.
    """
    if p == 1:
        return 0
    total = 0
    for half, (up, children) in zip(_halves(n_items), double_binary_tree(p, rank), strict=True):
        total += half * ((up >= 0) + len(children))
    return total * itemsize


def tree_messages_sent(n_items: int, itemsize: int, p: int, rank: int) -> int:
    """Messages ``rank`` sends in one tree allreduce: per chunk, as ``tree_bytes_sent`` per half."""
    if p == 1:
        return 0
    step = tree_chunk_bytes(n_items * itemsize, tree_depth(p))
    total = 0
    for half, (up, children) in zip(_halves(n_items), double_binary_tree(p, rank), strict=True):
        total += (len(tree_chunks(half, itemsize, step)) - 1) * ((up >= 0) + len(children))
    return total
