"""α-β-γ cost model of every strategy; ``python -m mpicomm model`` holds it against measurement.

Symbols as in DESIGN.md: p ranks, n bytes, α seconds per message, β seconds per
byte on a link, γ seconds per byte to reduce (``np.add``).

Formulas (pure functions below, checked by hand in ``tests/test_costmodel.py``):

    ring                2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ
    recursive doubling  lg P·(α + nβ + nγ)  [+ 2(α + nβ) + nγ to fold p ≠ P],  P = 2^⌊lg p⌋
    Rabenseifner        2 lg P·α + 2(P-1)/P·nβ + (P-1)/P·nγ  [+ the same fold]
    native              min(recursive doubling, Rabenseifner): MPICH's two choices
    ps, S servers       2(W-1)α + 2(W-1)·(n/S)β + (W-1)·(n/S)γ   (W workers; dedicated
                        servers hear from all W: 2Wα + 2W·(n/S)β + (W-1)·(n/S)γ)
    hierarchical        L ranks per node, m nodes:
      reduce_scatter    ring(L, n) on intra links + ring(m, n/L) on inter links
      leader            reduce + bcast in the node (MPI's best of binomial tree and
                        scatter/gather) + ring(m, n) among leaders on inter links
    auto                recursive doubling below its crossover, ring from it on

Parameters, measured (``measure``):

1. α and β by ping-pong between a pair of ranks: half a round trip of m bytes
   takes α + m·β. α comes from a least-squares fit over the small sizes; β(m) =
   (t(m) - α)/m is kept per measured size, because caches and MPI's protocol
   switches change it by several times between 64 KiB and 64 MiB. An intra-node
   and an inter-node pair are measured separately when ``Topology`` finds
   several (real or simulated) nodes.
2. γ(m) by ``np.add(a, b, out=a)`` on float32 arrays of m bytes, on all ranks at
   once (they share the memory system, as during a reduction); slowest rank.

A formula takes β and γ at the size each of its messages has (ring: n/p), by
interpolation in log m.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from mpi4py import MPI

__all__ = [
    "ring_time", "recursive_doubling_time", "rabenseifner_time", "native_time", "ps_time",
    "hierarchical_time", "fit_alpha_beta", "LinkModel", "ModelParams", "predict",
    "auto_crossover", "measure", "quick_params", "pingpong", "measure_gamma", "add_arguments",
    "run",
]


# --------------------------------------------------------------- formulas
def ring_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """Ring reduce-scatter + allgather: 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma


def _fold(p: int, n: float, alpha: float, beta: float, gamma: float) -> tuple[int, float]:
    """(P, cost of folding p ranks onto P = 2^⌊lg p⌋ and unfolding): 2(α + nβ) + nγ if p ≠ P."""
    pof2 = 1 << (max(p, 1).bit_length() - 1)
    return pof2, (0.0 if pof2 == p else 2 * (alpha + n * beta) + n * gamma)


def recursive_doubling_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """lg P rounds of whole-buffer exchange + add, plus the fold: lg P·(α + nβ + nγ) [+ fold]."""
    pof2, fold = _fold(p, n, alpha, beta, gamma)
    return math.log2(pof2) * (alpha + n * beta + n * gamma) + fold


def rabenseifner_time(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    """Recursive-halving reduce-scatter + recursive-doubling allgather (MPICH, large n)."""
    pof2, fold = _fold(p, n, alpha, beta, gamma)
    if pof2 == 1:
        return fold
    share = (pof2 - 1) / pof2 * n
    return 2 * math.log2(pof2) * alpha + 2 * share * beta + share * gamma + fold


def native_time(p: int, n: float, alpha: float, beta_whole: float, beta_part: float,
                gamma_whole: float, gamma_part: float) -> float:
    """MPICH's best choice: recursive doubling (β, γ at n) or Rabenseifner (at n/p)."""
    return min(recursive_doubling_time(p, n, alpha, beta_whole, gamma_whole),
               rabenseifner_time(p, n, alpha, beta_part, gamma_part))


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

    def beta_at(self, m: float) -> float:
        return _interp(self.sizes, self.beta, m)

    @classmethod
    def from_pingpong(cls, sizes, times, pair=None, alpha_max_bytes: int = 4096) -> LinkModel:
        """α from a fit over sizes <= ``alpha_max_bytes``; β(m) = (t(m) - α)/m, at least 0."""
        sizes = [int(s) for s in sizes]
        small = [i for i, s in enumerate(sizes) if s <= alpha_max_bytes] or [0, 1]
        alpha, _ = fit_alpha_beta([sizes[i] for i in small], [times[i] for i in small])
        alpha = max(alpha, 0.0)
        _, beta_fit = fit_alpha_beta(sizes, times)
        beta = [max((t - alpha) / s, 0.0) for s, t in zip(sizes, times, strict=True)]
        return cls(alpha, sizes, beta, beta_fit, pair)


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

    def gamma_at(self, m: float) -> float:
        return _interp(self.gamma_sizes, self.gamma, m)

    def flat_link(self) -> LinkModel:
        """The link a flat algorithm's steps cross: inter-node when there are several nodes."""
        return self.inter if self.num_nodes > 1 else self.intra


def auto_crossover(p: int, params: ModelParams, sizes=None) -> int:
    """Smallest power-of-two size at which the ring beats recursive doubling, by the model.

    Uses the link's single fitted β (the straight α-β line, robust to the noise
    of one ping-pong size) and γ at each algorithm's add size.
    """
    sizes = sizes or [1 << k for k in range(3, 31)]
    link = params.flat_link()
    a, b = link.alpha, max(link.beta_fit, 0.0)
    for n in sizes:
        ring = ring_time(p, n, a, b, params.gamma_at(n / p))
        if ring < recursive_doubling_time(p, n, a, b, params.gamma_at(n)):
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
    a, g = link.alpha, params.gamma_at
    if p <= 1:
        return 0.0
    if strategy == "ring":
        part = n / p
        return ring_time(p, n, a, link.beta_at(part), g(part))
    if strategy == "recursive_doubling":
        return recursive_doubling_time(p, n, a, link.beta_at(n), g(n))
    if strategy == "native":
        return native_time(p, n, a, link.beta_at(n), link.beta_at(n / p), g(n), g(n / p))
    if strategy == "ps":
        s = int(o.get("servers") or 1)
        return ps_time(p, n, a, link.beta_at(n / s), g(n / s), s, bool(o.get("dedicated")))
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
        return hierarchical_time(n, local, nodes, (intra.alpha, intra.beta_at(m_in)),
                                 (inter.alpha, inter.beta_at(m_out)), g(m_in), variant)
    return None


# ------------------------------------------------------------- measuring
def _iters(m: int, scale: float = 1.0) -> int:
    return max(3, int(scale * (300 if m <= 1 << 16 else 60 if m <= 1 << 20 else 12)))


def pingpong(comm: MPI.Comm, a: int, b: int, sizes: list[int], scale: float = 1.0) -> list[float]:
    """Half round-trip seconds (median) of ``sizes`` bytes between ranks a and b; collective.

    Other ranks wait. ``scale`` multiplies the repetitions. Returns the times on every rank.
    """
    me = comm.Get_rank()
    buf = np.zeros(max(sizes), dtype=np.uint8)
    out = np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        view = buf[:m]
        iters = _iters(m, scale)
        times = np.empty(iters)
        comm.Barrier()
        if me in (a, b):
            other = b if me == a else a
            for i in range(-3, iters):  # 3 warm-up round trips
                t0 = time.perf_counter()
                if me == a:
                    comm.Send(view, other, 7)
                    comm.Recv(view, other, 7)
                else:
                    comm.Recv(view, other, 7)
                    comm.Send(view, other, 7)
                if i >= 0:
                    times[i] = time.perf_counter() - t0
            out[k] = float(np.median(times)) / 2
    comm.Bcast(out, root=a)
    return [float(x) for x in out]


def measure_gamma(comm: MPI.Comm, sizes: list[int], scale: float = 1.0) -> list[float]:
    """Seconds per byte of ``np.add(a, b, out=a)`` on float32 arrays of each size; collective.

    All ranks add at once; the slowest rank's median counts.
    """
    a = np.ones(max(max(sizes) // 4, 1), dtype=np.float32)
    b = np.ones_like(a)
    out = np.zeros(len(sizes))
    for k, m in enumerate(sizes):
        x, y = a[: max(m // 4, 1)], b[: max(m // 4, 1)]
        iters = _iters(m, scale)
        times = np.empty(iters)
        comm.Barrier()
        for i in range(-3, iters):
            t0 = time.perf_counter()
            np.add(x, y, out=x)
            if i >= 0:
                times[i] = time.perf_counter() - t0
        out[k] = float(np.median(times)) / x.nbytes
    comm.Allreduce(MPI.IN_PLACE, out, MPI.MAX)
    return [float(v) for v in out]


def measure(comm: MPI.Comm, max_bytes: int, ranks_per_node: int | None = None) -> ModelParams:
    """Measure α, β(m) (intra- and inter-node pairs) and γ(m) up to ``max_bytes``; collective."""
    from mpicomm.topology import Topology

    topo = Topology(comm, ranks_per_node=ranks_per_node)
    sizes = [1 << k for k in range(3, max(max_bytes, 8).bit_length())]
    if sizes[-1] < max_bytes:
        sizes.append(max_bytes)
    node0 = topo.nodes[0]
    intra_pair = (node0[0], node0[1]) if len(node0) > 1 else None
    inter_pair = (node0[0], topo.nodes[1][0]) if topo.num_nodes > 1 else None
    links = {}
    for kind, pair in (("intra", intra_pair), ("inter", inter_pair)):
        if pair is not None:
            links[kind] = LinkModel.from_pingpong(sizes, pingpong(comm, *pair, sizes), pair)
    if not links:  # one rank: nothing travels; keep the formulas finite
        links["intra"] = LinkModel(0.0, sizes, [0.0] * len(sizes))
    intra = links.get("intra") or links["inter"]
    inter = links.get("inter") or intra
    gamma = measure_gamma(comm, sizes)
    params = ModelParams(intra, inter, sizes, gamma, topo.num_nodes, max(topo.node_sizes))
    topo.free()
    return params


def quick_params(comm: MPI.Comm, sizes=(8, 512, 4096, 32768, 262144, 1 << 20),
                 scale: float = 0.1) -> ModelParams:
    """A few-millisecond calibration for ``auto``: ping-pong between ranks 0 and p-1, γ(m)."""
    sizes = list(sizes)
    p = comm.Get_size()
    if p == 1:
        link = LinkModel(0.0, sizes, [0.0] * len(sizes))
    else:
        times = pingpong(comm, 0, p - 1, sizes, scale)
        link = LinkModel.from_pingpong(sizes, times, (0, p - 1))
    return ModelParams(link, link, sizes, measure_gamma(comm, sizes, scale))


# ---------------------------------------------------------------- command
def add_arguments(p: argparse.ArgumentParser) -> None:
    from mpicomm.bench import add_arguments as bench_arguments

    bench_arguments(p)
    p.set_defaults(minbytes=4096, iters=20)


def run(args: argparse.Namespace) -> int:
    from mpicomm import bench
    from mpicomm.info import environment

    world = MPI.COMM_WORLD
    names = bench.chosen_strategies(args)
    if names is None:
        return 2
    cfg = bench.BenchConfig(
        sizes=tuple(bench.size_list(args.minbytes, args.maxbytes, args.stepfactor)),
        iters=args.iters, warmup=args.warmup_iters, check=args.check, dtype=args.datatype,
        op=args.op, seed=args.seed)
    options = bench.reducer_options(args)
    # 1. parameters; 2. measurements; 3. the table, rank 0
    params = measure(world, max(cfg.sizes), args.ranks_per_node)
    p = world.Get_size()
    if options["crossover_bytes"] is None:  # auto switches where this model says
        options["crossover_bytes"] = auto_crossover(p, params)
    rows = bench.run_bench(names, options, cfg, args.baseline)
    if world.Get_rank() != 0:
        return 0
    for row in rows:
        t = predict(row["strategy"], p, row["bytes"], params, options, options["crossover_bytes"])
        row["predicted_us"] = None if t is None else t * 1e6
        row["measured_over_predicted"] = None if not t else row["time_us"] / (t * 1e6)
    print_model(params, rows, options["crossover_bytes"])
    meta = {"command": "model", "argv": sys.argv, "environment": environment(),
            "params": asdict(params), "options": options, "config": asdict(cfg),
            "auto_crossover_bytes": options["crossover_bytes"], "world_ranks": p}
    bench.write_records(rows, meta, args.json, args.csv)
    return 0


def print_model(params: ModelParams, rows: list[dict], crossover: int) -> None:
    for kind in ("intra", "inter"):
        link = getattr(params, kind)
        shown = [(s, b) for s, b in zip(link.sizes, link.beta, strict=True) if s >= 4096][::2]
        print(f"# {kind}-node link {link.pair}: alpha {link.alpha * 1e6:.2f} us, "
              f"fitted beta {1e-9 / link.beta_fit if link.beta_fit > 0 else float('inf'):.2f} GB/s;"
              " beta(m) GB/s: " + ", ".join(f"{s >> 10}K {1e-9 / b:.1f}" for s, b in shown if b))
    print("# gamma(m) GB/s: " + ", ".join(
        f"{s >> 10}K {1e-9 / g:.1f}" for s, g in zip(params.gamma_sizes, params.gamma, strict=True)
        if s >= 4096 and g)[::1])
    print(f"# nodes {params.num_nodes}, ranks per node {params.local_size}; "
          f"auto crossover {crossover} B")
    print(f"#{'size (B)':>11} {'strategy':>20} {'predicted':>10} {'measured':>10} "
          f"{'meas/pred':>9} {'busbw':>7}")
    print(f"#{'':>11} {'':>20} {'(us)':>10} {'(us)':>10} {'':>9} {'(GB/s)':>7}")
    for row in sorted(rows, key=lambda r: (r["bytes"], r["strategy"])):
        pred, ratio = row["predicted_us"], row["measured_over_predicted"]
        print(f"{row['bytes']:>12} {row['strategy']:>20} "
              f"{'-' if pred is None else f'{pred:.2f}':>10} {row['time_us']:>10.2f} "
              f"{'-' if ratio is None else f'{ratio:.2f}':>9} {row['busbw_gbps']:>7.2f}")
