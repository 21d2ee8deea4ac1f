"""Pipelined α-β-γ formulas for a cluster of nodes (NVLink inside, NICs between).

Pure functions, checked by hand in ``tests/costmodel/test_costmodel.py``. ``formulas.py`` keeps the
step-by-step forms a host run measures (one MPI exchange per step, phases one after the
other); these are the forms for GPU clusters, where NCCL-style implementations stream a
message in chunks, so a collective's phases and hops overlap. Symbols: p ranks, L ranks per
node, m = ⌈p/L⌉ nodes, n bytes, c NICs per node, K channels (rings side by side), (αi, βi)
of a rank's intra-node link, (αe, βe) of ONE NIC, γ seconds per byte to add, α0 the per-call
base latency. β already includes the link's efficiency (``cluster.Link.beta``).

Four facts used throughout:

1. Latency along a path, not per step at the slowest link. A chunk of a ring crosses
   2(p−1) hops; between nodes only 2(m−1) of them (a ring visits a node's L ranks in a row).
   The ring's latency is 2(p−m)·αi + 2(m−1)·αe — NCCL's own tuning model
   (src/graph/tuning.cc: ``(nsteps-nInterSteps)*intraLat + nInterSteps*interLat``).
2. Pipelining: a message moves in chunks, so phases and the add overlap; the bandwidth
   term of a pipelined algorithm is the slowest phase's (max), not the sum, and a byte that
   is received and added costs max(β, γ), not β + γ.
3. Channels: K rings over K slices of n, rotated so each crosses a node boundary at a
   different rank, spread the crossing over min(K, c) NICs.
4. Full duplex: a link sends and receives at once, so a server's incoming pushes and
   outgoing answers share no bandwidth.
"""

from __future__ import annotations

import math

from mpicomm.costmodel.queues import interface_share

__all__ = ["ring_latency", "multichannel_ring_time", "tree_time", "tree_inter_factor",
           "hierarchical_pipelined_time", "switch_tree_time",
           "recursive_doubling_cluster_time", "rabenseifner_cluster_time", "ps_interfaces_time"]


def ring_latency(p: int, nodes: int, alpha_intra: float, alpha_inter: float) -> float:
    """2(p−m)·αi + 2(m−1)·αe: a ring's 2(p−1) hops, of which 2(m−1) cross nodes (fact 1)."""
    if p <= 1:
        return 0.0
    m = max(1, min(nodes, p))
    return 2 * (p - m) * alpha_intra + 2 * (m - 1) * alpha_inter


def _reduce_bcast(bytes_: float, beta: float, gamma: float) -> float:
    """Half the bytes reduced on arrival (max(β, γ) each), half only forwarded (β)."""
    return bytes_ / 2 * (max(beta, gamma) + beta)


def multichannel_ring_time(p: int, n: float, nodes: int, intra: tuple[float, float],
                           inter: tuple[float, float], gamma: float, channels: int = 1,
                           nics: int = 1, alpha_call: float = 0.0) -> float:
    """K rotated rings over K slices of n: α0 + ring latency + (p−1)/p·n·(max(b, γ) + b).

    Derivation: each ring moves 2(p−1)/p of its slice n/K across every hop. A rank's link
    carries all K slices: 2(p−1)/p·n bytes at βi. A node boundary is crossed once per ring;
    K rings over min(K, c) NICs put 2(p−1)/p·n/min(K, c) bytes on each NIC at βe. The slower
    of the two paces: b = max(βi, βe/min(K, c)) (b = βi on one node). The reduce-scatter half
    adds as it receives (fact 2). K = 1 is the plain ring: one flow through one NIC.
    """
    if p <= 1:
        return 0.0
    (ai, bi), (ae, be) = intra, inter
    b = bi if nodes <= 1 else max(bi, be / max(1, min(channels, nics)))
    return alpha_call + ring_latency(p, nodes, ai, ae) + _reduce_bcast(2 * (p - 1) / p * n, b,
                                                                        gamma)


def tree_inter_factor(nodes: int) -> float:
    """Bytes of n each node sends (and receives) between nodes in NCCL's double binary tree.

    Two trees each carry n/2. m = 2: each node is one tree's root and the other's leaf; it
    sends n/2 up one and n/2 down the other: 1·n. m > 2: a node is interior in one tree
    (receives 2·n/2 from its children, sends n/2 up, then n/2 in and 2·n/2 down) and a leaf in
    the other (n/2 each way): 2·n each way. One node: 0.
    """
    return 0.0 if nodes <= 1 else 1.0 if nodes == 2 else 2.0


def tree_time(p: int, n: float, local: int, nodes: int, intra: tuple[float, float],
              inter: tuple[float, float], gamma: float, nics: int = 1,
              alpha_call: float = 0.0) -> float:
    """Double binary tree (NCCL): α0 + 2((L−1)αi + ⌈lg m⌉αe) + max(chain, f(m)·n·βe/c).

    Derivation: inside a node the L ranks form a chain; a chunk is reduced up the chain and
    broadcast down it, so each rank's link sends n up and n down: 2n, the up half added on
    arrival (fact 2). Between nodes two binary trees of depth ⌈lg m⌉ each carry n/2 and a node
    moves f(m)·n each way (``tree_inter_factor``) over its c NICs. Reduce and broadcast are
    pipelined over chunks, so the slower part paces. Latency as NCCL's tuning model:
    2·((L−1)·intraLat + log2(m)·interLat).
    """
    if p <= 1:
        return 0.0
    (ai, bi), (ae, be) = intra, inter
    lat = alpha_call + 2 * ((local - 1) * ai + math.ceil(math.log2(max(nodes, 1))) * ae)
    chain = _reduce_bcast(2 * n, bi, gamma) if local > 1 else 0.0
    across = tree_inter_factor(nodes) * n * be / max(1, nics)
    return lat + max(chain, across)


def hierarchical_pipelined_time(n: float, local: int, nodes: int, intra: tuple[float, float],
                                inter: tuple[float, float], gamma: float, nics: int = 1,
                                alpha_call: float = 0.0,
                                variant: str = "reduce_scatter") -> float:
    """Two-level allreduce with its phases pipelined: α0 + Σ latencies + max(phase bytes).

    reduce_scatter: intra ring reduce-scatter → L inter rings (one per local rank, each
    over m nodes on n/L) → intra allgather. Intra: (L−1)/L·n·(max(βi, γ) + βi). Inter: each
    rank moves 2(m−1)/m·n/L; L rings share c NICs, so per rank βe·max(1, L/c). Latency
    2(L−1)αi + 2(m−1)αe.
    leader: reduce to one leader per node and broadcast back (a pipelined chain, 2n per
    link as in ``tree_time``) around a ring of the m leaders on the whole n through ONE NIC.
    Chunks flow through the phases, so the bandwidth term is the slowest phase (fact 2);
    ``formulas.hierarchical_time`` is the same algorithm with its phases one after another.
    """
    if local * nodes <= 1:
        return 0.0
    (ai, bi), (ae, be) = intra, inter
    lat = alpha_call + 2 * (local - 1) * ai + 2 * (nodes - 1) * ae
    if variant == "reduce_scatter":
        inside = _reduce_bcast(2 * (local - 1) / local * n, bi, gamma)
        b = be * max(1.0, local / max(1, nics))
        across = _reduce_bcast(2 * (nodes - 1) / nodes * n / local, b, gamma)
    else:
        inside = _reduce_bcast(2 * n, bi, gamma) if local > 1 else 0.0
        across = _reduce_bcast(2 * (nodes - 1) / nodes * n, be, gamma)
    return lat + max(inside, across)


def switch_tree_time(n: float, local: int, nodes: int, switch: tuple[float, float],
                     inter: tuple[float, float], nics: int = 1, alpha_call: float = 0.0) -> float:
    """In-switch reduction inside the node, tree between nodes (NCCL's NVLS / NVLSTree).

    α0 + αs + 2⌈lg m⌉αe + max(n·βs, f(m)·n·βe/c). Derivation: each rank writes its n into
    the switch, which sums, and reads the n-byte sum back: n each way on its link at the
    switch's achieved rate (βs); no rank adds (γ = 0). Between nodes the node sums travel a
    double binary tree (``tree_time``'s f(m)·n over c NICs). Pipelined: the slower part paces.
    """
    if local * nodes <= 1:
        return 0.0
    (a_s, b_s), (ae, be) = switch, inter
    lat = alpha_call + a_s + 2 * math.ceil(math.log2(max(nodes, 1))) * ae
    inside = n * b_s if local > 1 else 0.0
    return lat + max(inside, tree_inter_factor(nodes) * n * be / max(1, nics))


def _rounds(p: int, local: int) -> tuple[int, int, int]:
    """(P = 2^⌊lg p⌋, rounds inside a node, rounds across) of a distance-doubling exchange."""
    pof2 = 1 << (max(p, 1).bit_length() - 1)
    inside = int(math.log2(1 << (max(1, min(local, pof2)).bit_length() - 1)))
    return pof2, inside, int(math.log2(pof2)) - inside


def recursive_doubling_cluster_time(p: int, n: float, local: int, intra: tuple[float, float],
                                    inter: tuple[float, float], gamma: float,
                                    alpha_call: float = 0.0) -> float:
    """lg P rounds of whole-buffer exchange: the first lg L inside the node, the rest across.

    α0 + r_i(αi + nβi + nγ) + r_e(αe + nβe + nγ) [+ fold 2(αe + nβe) + nγ if p ≠ P]; ``inter``
    carries the NIC share of a round in which all L ranks cross at once.
    """
    if p <= 1:
        return 0.0
    (ai, bi), (ae, be) = intra, inter
    pof2, r_i, r_e = _rounds(p, local)
    fold = 0.0 if pof2 == p else 2 * (ae + n * be) + n * gamma
    return alpha_call + r_i * (ai + n * bi + n * gamma) + r_e * (ae + n * be + n * gamma) + fold


def rabenseifner_cluster_time(p: int, n: float, local: int, intra: tuple[float, float],
                              inter: tuple[float, float], gamma: float,
                              alpha_call: float = 0.0) -> float:
    """Recursive halving + doubling: α0 + 2(r_i αi + r_e αe) + 2(P−1)/P·n·b + (P−1)/P·nγ.

    b is the slower class a round crosses (βe with NIC sharing when r_e > 0): the halving
    rounds' sizes differ, and which class carries the larger ones depends on the rank order,
    so the bound takes the worse.
    """
    if p <= 1:
        return 0.0
    (ai, bi), (ae, be) = intra, inter
    pof2, r_i, r_e = _rounds(p, local)
    b = max(bi, be) if r_e else bi
    share = (pof2 - 1) / pof2 * n
    fold = 0.0 if pof2 == p else 2 * (ae + n * be) + n * gamma
    return alpha_call + 2 * (r_i * ai + r_e * ae) + 2 * share * b + share * gamma + fold


def ps_interfaces_time(p: int, n: float, local: int, intra: tuple[float, float],
                       inter: tuple[float, float], gamma: float, servers: int = 1,
                       dedicated: bool = False, piece: float = float(1 << 20),
                       nics: int | None = None, launch: float = 0.0) -> float:
    """mpicomm's ps over one interface per rank and link class (the virtual clock's model).

    Ranks r on node r // L; colocated servers on ranks s·p//S, dedicated ones the last S.
    Each rank has a send and a receive queue per class (full duplex); the messages one
    ``waitall`` posts to one class share it. Colocated pushes travel in ⌈(n/S)/piece⌉
    rounds, round i of m_i = min(piece, n/S − i·piece) bytes (the last carries the rest, as
    ``reducers/ps.py`` sends it; dedicated: one round of the whole shard):

        round(m) = α + max over ranks and classes c of (messages of class c)·m·β_c
        pull     = α + max over ranks and classes c of (messages of class c)·(n/S)·β_c
        T        = Σ_{i<last} max(round(m_i), adds(m_i)) + round(m_last) + adds(m_last) + pull,
        adds(m)  = senders·(launch + m·γ)  (one kernel a push added, ``core.flops.add``;
                   a round's adds overlap the next round's pushes, the last round's come
                   before the server answers)

    A server's receive (push) and send (pull) queue of a class carry its workers there (not
    itself); a worker's send and receive queue, the servers there (full duplex: the two
    roles of a colocated rank use opposite queues). Intra-node peers queue on the intra
    class only, so a server on a node of L ranks queues p − L inter-node pushes, not p − 1
    (the host form ``ps_time``). With ``nics`` c NICs a node (None: one a rank), a queue
    across nodes shares them with the node's ranks in the same role at once: a server's
    queues β_e·⌈S_j/c⌉ (S_j servers on its node j), a worker's β_e·⌈W_j/c⌉ (W_j workers),
    as the clock's ``cross_at_once(sending, receiving)`` per phase: pushes leave from every
    worker of a node and arrive at its few servers.
    """
    if p <= 1:
        return 0.0
    s = max(1, servers)
    srv = list(range(p - s, p)) if dedicated else [k * p // s for k in range(s)]
    workers = list(range(p - s)) if dedicated else list(range(p))
    shard = n / s
    rounds = 1 if dedicated else max(1, math.ceil(shard / piece))
    sizes = [shard] if dedicated else [min(piece, shard - i * piece) for i in range(rounds)]
    nodes = -(-p // local)
    is_srv, is_wrk = [False] * p, [False] * p
    srv_on, wrk_on = [0] * nodes, [0] * nodes  # servers, workers on each node
    for x in srv:
        is_srv[x], srv_on[x // local] = True, srv_on[x // local] + 1
    for x in workers:
        is_wrk[x], wrk_on[x // local] = True, wrk_on[x // local] + 1

    def beta_e(on_node: int) -> float:  # the NIC share of a role's queue across nodes
        return inter[1] * interface_share(1, on_node, on_node, nics)  # one message a rank

    # per rank and role: (peers on its node, peers elsewhere, that role's β across)
    queues = []
    for r in range(p):
        j = r // local
        if is_srv[r]:  # its workers
            here = wrk_on[j] - is_wrk[r]
            queues.append((here, len(workers) - wrk_on[j], beta_e(srv_on[j])))
        if is_wrk[r]:  # its servers
            here = srv_on[j] - is_srv[r]
            queues.append((here, len(srv) - srv_on[j], beta_e(wrk_on[j])))
    # the busiest queue: α of a class used, plus its messages' bytes (linear in the size)
    alpha = max([intra[0] for h, _, _ in queues if h] + [inter[0] for _, e, _ in queues if e]
                + [0.0])
    per_byte = max([h * intra[1] for h, _, _ in queues] + [e * b for _, e, b in queues] + [0.0])

    def busiest(size: float) -> float:
        return alpha + size * per_byte

    senders = len(workers) - (0 if dedicated else 1)
    def adds(m: float) -> float:
        return senders * (launch + m * gamma)

    # a round's adds run while the next round's pushes arrive; the last round's, before the
    # server's answers leave
    return sum(max(busiest(m), adds(m)) for m in sizes[:-1]) + busiest(sizes[-1]) \
        + adds(sizes[-1]) + busiest(shard)
