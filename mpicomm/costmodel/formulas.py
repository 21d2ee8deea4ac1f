"""α-β-γ cost model of every strategy; ``python -m mpicomm model`` holds it against measurement.

Symbols as in DESIGN.md: p ranks, n bytes, α seconds per message, β seconds per
byte on a link, γ seconds per byte to reduce (``np.add``).

Formulas (pure functions below, checked by hand in ``tests/costmodel/test_costmodel.py``):

    ring                2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ
    recursive doubling  lg P·(α + nβ + nγ)  [+ 2(α + nβ) + nγ to fold p ≠ P],  P = 2^⌊lg p⌋
    Rabenseifner        2 lg P·α + 2(P-1)/P·nβ + (P-1)/P·nγ  [+ the same fold]
    native              MPICH's pick (``native.mpi_collective_time``): recursive doubling
                        below 2 KiB, Rabenseifner from there
    ps, S servers       2(W-1)α + 2(W-1)·(n/S)β + (W-1)·(n/S)γ   (W workers; dedicated
                        servers hear from all W: 2Wα + 2W·(n/S)β + (W-1)·(n/S)γ)
    hierarchical        L ranks per node, m nodes:
      reduce_scatter    ring(L, n) on intra links + ring(m, n/L) on inter links
      leader            reduce + bcast in the node (MPI's best of binomial tree and
                        scatter/gather) + ring(m, n) among leaders on inter links
    auto                recursive doubling below its crossover, ring from it on

Parameters, measured (``measure``) between a pair of ranks:

1. α and β by ping-pong: half a round trip of m bytes takes α + m·β. α comes
   from a least-squares fit over the small sizes; β(m) = (t(m) - α)/m is kept
   per measured size, because caches and MPI's protocol switches change it by
   several times between 64 KiB and 64 MiB. An intra-node and an inter-node
   pair are measured separately when ``Topology`` finds several (real or
   simulated) nodes.
2. α_x and β_x(m) the same way from an *exchange* (both ranks ``Sendrecv`` m
   bytes at once), the step of ring, recursive doubling and hierarchical; on a
   shared-memory node both directions share the memory system, so β_x ≠ β.
3. γ(m) from ``np.add(x, y, out=x)`` right after such an exchange, x being the
   buffer the peer has just read — as in every reduction step, where the caches
   must first take x back from the peer (on this machine that alone costs up to
   3-4x, depending on where the host places the two cores). ``gamma_local``, a
   plain ``np.add`` on data no one else touched, is kept for reference.

A formula takes β and γ at the size its messages have (ring: the segment n/p;
recursive doubling: n; one parameter server: pushes and pulls of n, one way at a
time, so ping-pong β), by interpolation in log m.

Emulated links (``inter_link``/``intra_link``, see docs/links.md): for an
emulated class α is the link's latency and β its 1/bandwidth — or the real
link's, at sizes where the real transfer is slower, since emulation never
speeds a message up (``emulated_link``). The emulation holds the *sender's*
interface only, so a parameter server's pushes from W workers on other nodes
travel in parallel, while its W answers queue on its interface:
``ps_time_interfaces`` counts messages per interface instead of the incast
formula above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mpicomm.costmodel.cluster_formulas import (
    rabenseifner_cluster_time,
    recursive_doubling_cluster_time,
)
from mpicomm.costmodel.native import SHORT_BYTES, mpi_collective_time

__all__ = [
    "ring_time", "recursive_doubling_time", "rabenseifner_time", "ps_time",
    "hierarchical_time", "fit_alpha_beta", "LinkModel", "ModelParams", "predict",
    "auto_crossover", "emulated_link", "with_emulated_links", "ps_time_interfaces",
]


# --------------------------------------------------------------- formulas
def ring_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """Ring reduce-scatter + allgather: 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma


def recursive_doubling_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """lg P rounds of whole-buffer exchange + add, plus the fold: lg P·(α + nβ + nγ) [+ fold]
    (one link class: ``cluster_formulas.recursive_doubling_cluster_time``, its one cost)."""
    return recursive_doubling_cluster_time(p, n, p, (alpha, beta), (alpha, beta), gamma)


def rabenseifner_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """Recursive-halving reduce-scatter + recursive-doubling allgather (MPICH, large n; one
    link class: ``cluster_formulas.rabenseifner_cluster_time``, its one cost)."""
    return rabenseifner_cluster_time(p, n, p, (alpha, beta), (alpha, beta), gamma)


def ps_time(p: int, n: float, alpha: float, beta: float, gamma: float, servers: int = 1,
            dedicated: bool = False) -> float:
    """Parameter server with S shards: the busiest server link (push, sum, pull)."""
    s = servers
    w = p - s if dedicated else p
    senders = w if dedicated else w - 1
    return 2 * senders * alpha + 2 * senders * (n / s) * beta + (w - 1) * (n / s) * gamma


def hierarchical_time(n: float, local: int, nodes: int, intra: tuple[float, float],
                      inter: tuple[float, float], gamma: float,
                      variant: str = "reduce_scatter") -> float:
    """Two-level allreduce; ``intra``/``inter`` are (α, β) pairs, L=``local``, m=``nodes``.

    reduce_scatter: ring(L, n) inside nodes + ring(m, n/L) across them.
    leader: reduce + bcast inside the node, each the better of a binomial tree,
    lg L·(α + nβ) (+ lg L·nγ for the reduce), and scatter/gather,
    (lg L + L - 1)·α + 2(L-1)/L·nβ (+ (L-1)/L·nγ); then ring(m, n) among leaders.
    """
    (ai, bi), (ae, be) = intra, inter
    if variant == "reduce_scatter":
        return ring_time(local, n, ai, bi, gamma) + ring_time(nodes, n / local, ae, be, gamma)
    in_node = 0.0
    if local > 1:
        lg = math.ceil(math.log2(local))
        tree = 2 * lg * (ai + n * bi) + lg * n * gamma
        split = 2 * ((lg + local - 1) * ai + 2 * (local - 1) / local * n * bi) \
            + (local - 1) / local * n * gamma
        in_node = min(tree, split)
    return in_node + ring_time(nodes, n, ae, be, gamma)


# ----------------------------------------------------------------- fitting
def fit_alpha_beta(sizes, times) -> tuple[float, float]:
    """Fit t = α + m·β to ping-pong times, minimising relative error; returns (α, β)."""
    m = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    a = np.stack([1.0 / t, m / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(alpha), float(beta)


def _interp(sizes, values, m: float) -> float:
    """Value at ``m`` by linear interpolation in log size (clamped at the ends)."""
    return float(np.interp(math.log(max(m, 1.0)), np.log(np.asarray(sizes, float)), values))


@dataclass
class LinkModel:
    """α and the measured β(m) of one kind of link (intra- or inter-node)."""

    alpha: float
    sizes: list[int]
    beta: list[float]
    beta_fit: float = 0.0  # the single β of the α-β fit over all sizes, for reference
    pair: tuple[int, int] | None = None
    beta_x: list[float] | None = None  # β(m) when both directions move at once (exchange)
    alpha_x: float | None = None  # α of an exchange step (Sendrecv), when measured
    beta_x_fit: float | None = None  # the single β of the α-β fit to the exchange times
    emulated: str | None = None  # the emulated link ("20us,1GB/s") this model stands for
    # the same tables with the data out of the caches (``calibrate.cold_bytes``): alpha, beta,
    # alpha_x, beta_x and cache_bytes (the last-level cache the data went past)
    cold: dict | None = None

    def beta_at(self, m: float) -> float:
        """β of one-way traffic (ping-pong) at message size m."""
        return _interp(self.sizes, self.beta, m)

    def beta_x_at(self, m: float) -> float:
        """β of a two-way exchange (both ranks send m at once); ping-pong β if not measured."""
        return _interp(self.sizes, self.beta_x or self.beta, m)

    def exchange_alpha(self) -> float:
        return self.alpha if self.alpha_x is None else self.alpha_x

    @staticmethod
    def split(sizes, times, alpha_max_bytes: int = 4096) -> tuple[float, list[float]]:
        """α from a fit over sizes <= ``alpha_max_bytes``; β(m) = (t(m) - α)/m, at least 0."""
        small = [i for i, s in enumerate(sizes) if s <= alpha_max_bytes] or [0, 1]
        alpha, _ = fit_alpha_beta([sizes[i] for i in small], [times[i] for i in small])
        alpha = max(alpha, 0.0)
        return alpha, [max((t - alpha) / s, 0.0) for s, t in zip(sizes, times, strict=True)]

    @classmethod
    def from_pingpong(cls, sizes, times, pair=None, swaps=None) -> LinkModel:
        """A link from ping-pong times (and exchange times ``swaps``, when measured)."""
        sizes = [int(s) for s in sizes]
        alpha, beta = cls.split(sizes, times)
        _, beta_fit = fit_alpha_beta(sizes, times)
        link = cls(alpha, sizes, beta, beta_fit, pair)
        if swaps is not None:
            link.alpha_x, link.beta_x = cls.split(sizes, swaps)
            link.beta_x_fit = max(fit_alpha_beta(sizes, swaps)[1], 0.0)
        return link


@dataclass
class ModelParams:
    """Everything ``predict`` needs: links, γ(m), and the node layout."""

    intra: LinkModel
    inter: LinkModel
    gamma_sizes: list[int]
    gamma: list[float]
    num_nodes: int = 1
    local_size: int = 1
    extra: dict = field(default_factory=dict)
    gamma_local: list[float] | None = None  # np.add on data no other rank touched (reference)

    def gamma_at(self, m: float) -> float:
        return _interp(self.gamma_sizes, self.gamma, m)

    def flat_link(self) -> LinkModel:
        """The link a flat algorithm's steps cross: inter-node when there are several nodes."""
        return self.inter if self.num_nodes > 1 else self.intra


def emulated_link(real: LinkModel, latency: float, bandwidth: float,
                  text: str | None = None) -> LinkModel:
    """The link a message sees through an emulated interface of (latency, bandwidth).

    Per size m: t(m) = max(latency + m/bandwidth, the real link's t(m)) — the
    emulation holds a message at least to its link's time and never shortens a
    slower real transfer. Returned as α = latency, β(m) = (t(m) - α)/m, for
    ping-pong and exchange alike (each direction holds its own sender's interface).
    """
    sizes = list(real.sizes)

    def betas(alpha_real: float, beta_real: list[float]) -> list[float]:
        out = []
        for m, b in zip(sizes, beta_real, strict=True):
            t = max(latency + m / bandwidth, alpha_real + m * b)
            out.append(max(t - latency, 0.0) / m)
        return out

    beta = betas(real.alpha, real.beta)
    beta_x = betas(real.exchange_alpha(), real.beta_x or real.beta)
    return LinkModel(latency, sizes, beta, 1.0 / bandwidth, real.pair, beta_x, latency,
                     1.0 / bandwidth, text or f"{latency:g}s,{bandwidth:g}B/s")


def with_emulated_links(params: ModelParams, inter=None, intra=None) -> ModelParams:
    """``params`` with the emulated classes replaced (``inter``/``intra``: objects with
    ``latency`` and ``bandwidth``, e.g. ``core.links.LinkSpec``; None keeps the measured)."""
    from dataclasses import replace

    links = {}
    for kind, spec in (("inter", inter), ("intra", intra)):
        if spec is not None:
            links[kind] = emulated_link(getattr(params, kind), spec.latency, spec.bandwidth,
                                        str(spec))
    return replace(params, **links)


def ps_time_interfaces(n: float, servers: list[int], workers: list[int], node_of: list[int],
                       link_of, gamma: float, piece: float | None = None) -> float:
    """Parameter server over emulated interfaces (each rank's messages queue per link class).

    ``link_of(remote: bool) -> LinkModel``; a class whose model has ``emulated``
    set holds the sender's interface (its messages queue, receivers do not),
    a real class is charged at the receiver (its incoming messages queue, as the
    shared memory of a node does). ``piece``: colocated servers take pushes in
    pieces of at most this many bytes, one round per piece; dedicated servers
    (``piece`` None) take whole shards, each after an 8·4-byte command header.

    1. push, per round: the slowest interface — a worker's emulated one sends a
       piece to each server of that class; a server's real one receives one from
       each worker of that class; the add of a round overlaps the next round's
       transfer, so a round takes max(transfer, add);
    2. pull: each server sends its shard to every other worker; per class, the
       messages of one server queue.
    """
    shard = n / len(servers)
    rounds = 1 if piece is None else max(math.ceil(shard / piece), 1)
    m = shard if piece is None else min(shard, piece)

    def queue(remote: bool, count: int, size: float, header: bool = False) -> float:
        if count == 0:
            return 0.0
        link = link_of(remote)
        one = link.alpha + size * link.beta_at(size)
        return count * (one + (link.alpha if header else 0.0))

    def peers(r: int, among: list[int], remote: bool) -> int:
        return sum(1 for x in among if x != r and (node_of[x] != node_of[r]) == remote)

    push = 0.0
    for remote in (False, True):
        if link_of(remote).emulated:  # the sender's interface: a worker's pushes queue
            t = max(queue(remote, peers(w, servers, remote), m, piece is None) for w in workers)
        else:  # the receiver's memory: a server's incoming pushes queue
            t = max(queue(remote, peers(s, workers, remote), m, piece is None) for s in servers)
        push = max(push, t)
    senders = max(len([w for w in workers if w not in servers]) if piece is None
                  else len(workers) - 1, 1)
    add = senders * m * gamma
    push = rounds * max(push, add) + min(push, add)
    pull = max(queue(remote, peers(s, workers, remote), shard)
               for s in servers for remote in (False, True))
    return push + pull


def auto_crossover(p: int, params: ModelParams, sizes=None) -> int:
    """Smallest power-of-two size from which the ring is predicted faster than recursive
    doubling, at that size and the next two.

    Both run exchange steps, so the comparison uses the exchange α_x and the one
    β_x fitted over all sizes (a straight line: one noisy size cannot move the
    switch), with γ at each algorithm's add size. On 2 ranks this is n* ≈ 2α/γ.
    """
    sizes = sizes or [1 << k for k in range(3, 31)]
    link = params.flat_link()
    a = link.exchange_alpha()
    b = link.beta_x_fit if link.beta_x_fit is not None else max(link.beta_fit, 0.0)
    g = params.gamma_at
    ring_wins = [ring_time(p, n, a, b, g(n / p)) < recursive_doubling_time(p, n, a, b, g(n))
                 for n in sizes]
    for i, n in enumerate(sizes):
        if all(ring_wins[i : i + 3]):
            return int(n)
    return int(sizes[-1]) * 2


def predict(strategy: str, p: int, n: float, params: ModelParams, options: dict | None = None,
            crossover: int | None = None) -> float | None:
    """Predicted seconds of one allreduce of n bytes over p ranks; None without a formula.

    Args:
        strategy: a strategy name; ``options`` are its ``ReducerOptions`` fields
            (servers, dedicated, variant, ranks_per_node).
        p: ranks in the job (for a dedicated ps, workers + servers).
        crossover: auto's switch size (default: ``auto_crossover``).
    """
    o = options or {}
    link = params.flat_link()
    a, g, bx = link.exchange_alpha(), params.gamma_at, link.beta_x_at
    if p <= 1:
        return 0.0
    if strategy == "ring":
        # β and γ at the segment size n/p: the ring streams each segment through the
        # caches (also in pieces), so a segment's size decides where its bytes come from
        part = n / p
        return ring_time(p, n, a, bx(part), g(part))
    if strategy == "recursive_doubling":
        return recursive_doubling_time(p, n, a, bx(n), g(n))
    if strategy == "native":  # MPICH's pick (``native.mpi_collective_time``), β at its pieces
        m = n if n < SHORT_BYTES else n / p
        return mpi_collective_time("allreduce", n, p, p, (a, bx(m)), (a, bx(m)), g(m))
    if strategy == "ps" and (params.inter.emulated or params.intra.emulated):
        return _ps_emulated(p, n, params, o)
    if strategy == "ps":
        # one server: pushes, then pulls, one direction at a time; S > 1: both at once
        s = int(o.get("servers") or 1)
        if s == 1:
            return ps_time(p, n, link.alpha, link.beta_at(n), g(n), 1, bool(o.get("dedicated")))
        return ps_time(p, n, a, bx(n / s), g(n / s), s, bool(o.get("dedicated")))
    if strategy == "auto":
        x = auto_crossover(p, params) if crossover is None else crossover
        return predict("recursive_doubling" if n < x else "ring", p, n, params)
    if strategy == "hierarchical":
        local = max(1, min(int(o.get("ranks_per_node") or params.local_size), p))
        nodes = -(-p // local)
        intra, inter = params.intra, params.inter
        variant = o.get("variant") or "reduce_scatter"
        # β at the messages each level sends: ring pieces, or whole buffers for the leader
        m_in = n / local if variant == "reduce_scatter" else n
        m_out = n / local / nodes if variant == "reduce_scatter" else n / nodes
        return hierarchical_time(n, local, nodes, (intra.exchange_alpha(), intra.beta_x_at(m_in)),
                                 (inter.exchange_alpha(), inter.beta_x_at(m_out)), g(m_in),
                                 variant)
    return None


_PIECE_BYTES = 1 << 20  # reducers.ring.PIECE_BYTES (the model does not import the reducers)


def _ps_emulated(p: int, n: float, params: ModelParams, o: dict) -> float:
    """ps on the ranks' interfaces: the placement of ``reducers.ps`` on ``ranks_per_node`` nodes."""
    s = int(o.get("servers") or 1)
    dedicated = bool(o.get("dedicated"))
    local = max(1, int(o.get("ranks_per_node") or params.local_size))
    node_of = [r // local for r in range(p)]
    if dedicated:
        servers, workers = list(range(p - s, p)), list(range(p - s))
    else:
        servers, workers = [k * p // s for k in range(s)], list(range(p))

    def link_of(remote: bool) -> LinkModel:
        return params.inter if remote else params.intra

    return ps_time_interfaces(n, servers, workers, node_of, link_of, params.gamma_at(n / s),
                              None if dedicated else _PIECE_BYTES)
