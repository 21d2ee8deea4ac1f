"""Cost model: formulas against hand-computed values, α/β fitting, one `model` run."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi

from mpicomm.costmodel import (
    LinkModel,
    ModelParams,
    auto_crossover,
    fit_alpha_beta,
    hierarchical_time,
    predict,
    ps_time,
    rabenseifner_time,
    recursive_doubling_time,
    ring_time,
)

A, B, G, N = 1e-6, 1e-9, 1e-10, 1e6  # α, β, γ, n


def test_formulas_by_hand():
    # 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ at p=4: 6e-6 + 1.5e-3 + 7.5e-5
    assert ring_time(4, N, A, B, G) == pytest.approx(1.581e-3)
    assert ring_time(1, N, A, B, G) == 0.0
    # lg 4·(α + nβ + nγ) = 2·1.101e-3; p=5 folds onto 4: + 2(α + nβ) + nγ
    assert recursive_doubling_time(4, N, A, B, G) == pytest.approx(2.202e-3)
    assert recursive_doubling_time(5, N, A, B, G) == pytest.approx(2.202e-3 + 2.002e-3 + 1e-4)
    # 2 lg 4·α + 2·3/4·nβ + 3/4·nγ
    assert rabenseifner_time(4, N, A, B, G) == pytest.approx(4e-6 + 1.5e-3 + 7.5e-5)
    # one server: 2(p-1)α + 2(p-1)nβ + (p-1)nγ
    assert ps_time(4, N, A, B, G) == pytest.approx(6e-6 + 6e-3 + 3e-4)
    # dedicated, 4 workers + 1 server: 2·4·α + 2·4·nβ + 3·nγ
    assert ps_time(5, N, A, B, G, servers=1, dedicated=True) == pytest.approx(8e-6 + 8e-3 + 3e-4)
    # hierarchical 2 nodes x 2 ranks: ring(2, n) intra + ring(2, n/2) inter
    intra, inter = (A, B), (1e-5, 1e-8)
    assert hierarchical_time(N, 2, 2, intra, inter, G) == pytest.approx(
        (2e-6 + 1e-3 + 5e-5) + (2e-5 + 5e-3 + 2.5e-5))
    # leader: min(tree 2.102e-3, scatter/gather 2.054e-3) + ring(2, n) among leaders
    assert hierarchical_time(N, 2, 2, intra, inter, G, "leader") == pytest.approx(
        2.054e-3 + (2e-5 + 1e-2 + 5e-5))


def test_ps_shapes():
    """One server grows linearly with p; S = p colocated servers cost exactly the ring."""
    t = [ps_time(p, N, A, B, G) for p in (2, 4, 6, 8)]
    assert np.allclose(np.diff(t), t[1] - t[0])
    for p in (2, 3, 8):
        assert ps_time(p, N, A, B, G, servers=p) == pytest.approx(ring_time(p, N, A, B, G))


def test_fit_recovers_alpha_beta():
    sizes = [8 << k for k in range(24)]
    alpha, beta = 2.5e-6, 1 / 12e9
    exact = [alpha + m * beta for m in sizes]
    a, b = fit_alpha_beta(sizes, exact)
    assert a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6)
    noise = np.random.default_rng(0).uniform(0.97, 1.03, len(sizes))
    a, b = fit_alpha_beta(sizes, np.array(exact) * noise)
    assert a == pytest.approx(alpha, rel=0.1) and b == pytest.approx(beta, rel=0.1)


def _params(alpha=2e-6, beta=1e-10, gamma=1e-10) -> ModelParams:
    sizes = [8 << k for k in range(24)]
    link = LinkModel.from_pingpong(sizes, [alpha + m * beta for m in sizes])
    return ModelParams(link, link, sizes, [gamma] * len(sizes))


def test_link_model_and_predict():
    params = _params()
    assert params.intra.alpha == pytest.approx(2e-6, rel=1e-6)
    assert params.intra.beta_at(12345) == pytest.approx(1e-10, rel=1e-6)
    assert predict("ring", 2, N, params) == pytest.approx(ring_time(2, N, 2e-6, 1e-10, 1e-10))
    assert predict("ps", 4, N, params, {"servers": 2}) == pytest.approx(
        ps_time(4, N, 2e-6, 1e-10, 1e-10, servers=2))
    assert predict("unregistered", 2, N, params) is None


def test_auto_crossover_two_ranks():
    """p=2: both move n bytes; the ring wins once nγ/2 > α, i.e. n > 2α/γ = 40000 B."""
    params = _params()
    x = auto_crossover(2, params)
    assert x == 65536
    assert predict("auto", 2, 32768, params) == predict("recursive_doubling", 2, 32768, params)
    assert predict("auto", 2, x, params) == predict("ring", 2, x, params)


@pytest.mark.slow  # about 7 CPU-s
def test_model_command(tmp_path):
    js = tmp_path / "m.json"
    res = run_mpi(2, ["-m", "mpicomm", "model", "--strategies", "native,ring,ps,auto",
                      "-b", "4K", "-e", "256K", "-f", "8", "-n", "3", "-w", "1",
                      "--json", str(js)], timeout=180)
    assert res.returncode == 0, res.tail()
    data = json.loads(js.read_text())
    assert data["params"]["intra"]["alpha"] > 0
    rows = data["results"]
    assert len(rows) == 4 * 3
    for r in rows:
        assert r["predicted_us"] > 0 and r["time_us"] > 0 and r["wrong"] == 0
    assert "predicted" in res.stdout and "meas/pred" in res.stdout


def _flat_link(alpha, beta, emulated=None):
    sizes = [8 << k for k in range(24)]
    link = LinkModel(alpha, sizes, [beta] * len(sizes), beta, None, [beta] * len(sizes), alpha,
                     beta)
    link.emulated = emulated
    return link


def test_emulated_link_takes_the_slower_of_emulated_and_real():
    from mpicomm.costmodel import emulated_link

    fast = emulated_link(_flat_link(1e-6, 1e-10), 20e-6, 1e9, "20us,1GB/s")
    assert fast.alpha == fast.exchange_alpha() == 20e-6 and fast.emulated == "20us,1GB/s"
    assert fast.beta_at(1 << 20) == pytest.approx(1e-9)
    assert fast.beta_x_at(64) == pytest.approx(1e-9)
    # a real link slower than the emulated one (100 MB/s): the real time stands
    slow = emulated_link(_flat_link(1e-6, 1e-8), 20e-6, 1e9)
    m = 1 << 20
    assert slow.alpha + m * slow.beta_at(m) == pytest.approx(1e-6 + m * 1e-8)


def test_ps_over_interfaces_by_hand():
    """4 ranks as 2 nodes x 2, one colocated server (rank 0), 16 MB in 1 MB pieces.

    push, per round: rank 2's piece on its emulated interface, 2e-5 + 1e6·1e-9 = 1.02e-3
    (rank 1's real push into rank 0 takes 1.01e-4); adds 3·1e6·γ = 3e-4 overlap the next
    round: 16·1.02e-3 + 3e-4. pull: rank 0's interface carries 2 answers of 16 MB:
    2·(2e-5 + 1.6e-2)."""
    from mpicomm.costmodel import ps_time_interfaces

    inter, intra = _flat_link(2e-5, 1e-9, "20us,1GB/s"), _flat_link(1e-6, 1e-10)
    t = ps_time_interfaces(16e6, [0], [0, 1, 2, 3], [0, 0, 1, 1],
                           lambda remote: inter if remote else intra, 1e-10, piece=1e6)
    assert t == pytest.approx(16 * 1.02e-3 + 3e-4 + 2 * (2e-5 + 1.6e-2))
    params = ModelParams(intra, inter, intra.sizes, [1e-10] * len(intra.sizes), 2, 2)
    assert predict("ps", 4, 16 * (1 << 20), params, {"ranks_per_node": 2}) > predict(
        "ring", 4, 16 * (1 << 20), params)


# ----------------------------------------------------------- the cluster model (issue 18)
AI, BI, AE, BE = 1e-6, 1e-11, 10e-6, 1e-10  # NVLink-like and NIC-like (α, β)
NN = 64e6


def test_multichannel_ring_by_hand():
    from mpicomm.costmodel import multichannel_ring_time

    # 16 ranks as 2 x 8: 2·14 intra + 2·1 inter hops; K = 1: one NIC paces the bytes
    lat = 28 * AI + 2 * AE
    one = lat + 2 * 15 / 16 * NN * BE
    assert multichannel_ring_time(16, NN, 2, (AI, BI), (AE, BE), G / 100) == pytest.approx(one)
    # K = 8 over 8 NICs: each NIC carries 1/8 (1.25e-11 > β_intra); K = 8 over 2 NICs: 1/2
    k8 = lat + 2 * 15 / 16 * NN * BE / 8
    assert multichannel_ring_time(16, NN, 2, (AI, BI), (AE, BE), G / 100, 8, 8) == \
        pytest.approx(k8)
    assert multichannel_ring_time(16, NN, 2, (AI, BI), (AE, BE), G / 100, 8, 2) == \
        pytest.approx(lat + 2 * 15 / 16 * NN * BE / 2)
    # the add overlaps: a γ slower than the link paces the reduce-scatter half only
    slow = 1e-9
    assert multichannel_ring_time(8, NN, 1, (AI, BI), (AE, BE), slow) == pytest.approx(
        14 * AI + 7 / 8 * NN * (slow + BI))


def test_tree_by_hand():
    from mpicomm.costmodel import tree_time
    from mpicomm.costmodel.cluster_formulas import tree_inter_factor

    assert [tree_inter_factor(m) for m in (1, 2, 3, 128)] == [0, 1, 2, 2]
    # 2 nodes x 8, 8 NICs: 2(7 α_i + 1 α_e); chain 2N·β_i = 1.28e-3 against N·β_e/8 = 8e-4
    assert tree_time(16, NN, 8, 2, (AI, BI), (AE, BE), 1e-12, nics=8) == pytest.approx(
        2 * (7 * AI + AE) + 2 * NN * BI)
    # 128 nodes: lg 128 = 7 inter levels; both trees put 2N on a node's 8 NICs: 1.6e-3
    t = tree_time(1024, NN, 8, 128, (AI, BI), (AE, BE), 1e-12, nics=8, alpha_call=5e-6)
    assert t == pytest.approx(5e-6 + 2 * (7 * AI + 7 * AE) + 2 * NN * BE / 8)
    # latency grows with lg m, the ring's with m: at 1,024 ranks and 8 bytes the tree wins
    from mpicomm.costmodel import multichannel_ring_time

    assert t - 2 * NN * BE / 8 < multichannel_ring_time(1024, 8, 128, (AI, BI), (AE, BE), 0)


def test_pipelined_hierarchical_by_hand():
    from mpicomm.costmodel import hierarchical_pipelined_time

    lat = 2 * 7 * AI + 2 * 3 * AE
    inside, across = 2 * 7 / 8 * NN * BI, 2 * 3 / 4 * NN / 8 * BE
    # 4 nodes x 8, 8 NICs: the phases overlap, the slower paces (serial would add them)
    t = hierarchical_pipelined_time(NN, 8, 4, (AI, BI), (AE, BE), 1e-12, nics=8)
    assert t == pytest.approx(lat + max(inside, across))
    assert t < lat + inside + across
    # one NIC for 8 ranks: the 8 inter rings share it
    assert hierarchical_pipelined_time(NN, 8, 4, (AI, BI), (AE, BE), 1e-12, nics=1) == \
        pytest.approx(lat + max(inside, 8 * across))
    # leader: a pipelined chain in the node, the leaders' ring on the whole N through one NIC
    assert hierarchical_pipelined_time(NN, 8, 4, (AI, BI), (AE, BE), 1e-12, 8, 0.0, "leader") \
        == pytest.approx(lat + max(2 * NN * BI, 2 * 3 / 4 * NN * BE))


def test_switch_tree_by_hand():
    from mpicomm.costmodel import switch_tree_time

    switch = (25e-6, 1 / 275e9)
    # one node: α_s + N/275 GB/s; two nodes: + 2 α_e, and each NIC swaps N/8 at β_e, which
    # (8e-4 s) is slower than the switch (2.3e-4 s) and paces; 4 nodes: 2N over the NICs
    assert switch_tree_time(NN, 8, 1, switch, (AE, BE)) == pytest.approx(25e-6 + NN / 275e9)
    assert switch_tree_time(NN, 8, 2, switch, (AE, BE), 8, 6e-6) == pytest.approx(
        6e-6 + 25e-6 + 2 * AE + NN * BE / 8)
    assert switch_tree_time(NN, 8, 4, switch, (AE, BE), 8) == pytest.approx(
        25e-6 + 4 * AE + 2 * NN * BE / 8)


def test_cluster_links_for_the_virtual_clock():
    from mpicomm.core.errors import ConfigError
    from mpicomm.costmodel import Cluster, Link
    from mpicomm.costmodel.profiles import CLUSTERS, cluster

    c = cluster("dgx-h100-ib400")
    alpha, beta = c.link("inter")
    assert alpha == pytest.approx(2.7e-6) and beta == pytest.approx(1 / (50e9 * 47 / 50))
    assert c.link("intra")[1] == pytest.approx(1 / 370e9) and c.nics_per_node == 8
    with pytest.raises(ConfigError, match="link class"):
        c.link("pcie")
    with pytest.raises(ConfigError, match="efficiency"):
        Link(1e-6, 1e9, 1.5)
    with pytest.raises(ConfigError, match="NICs per node"):
        Cluster("x", 8, Link(0, 1e9), Link(0, 1e9), 0.0, 0)
    for name, prof in CLUSTERS.items():
        assert prof.source and prof.intra.source and prof.inter.source, name


def test_cluster_from_link_flags():
    """Link flags make mpicomm's step-by-step cluster: one NIC per rank by default (as the
    virtual clock's interfaces), the default intra link where none is given."""
    from mpicomm.costmodel.profiles import build_cluster

    c = build_cluster(ranks_per_node=2, inter="20us,1GB/s", intra="1us,10GB/s")
    assert c.link("inter") == pytest.approx((20e-6, 1e-9))
    assert c.link("intra") == pytest.approx((1e-6, 1e-10))
    assert c.ranks_per_node == 2 and c.nics_per_node == 2 and c.alpha_call_s == 0  # own NICs
    assert not c.pipelined and c.channel_count == 1
    assert build_cluster(ranks_per_node=4, inter="5us,2GB/s").link("intra") == pytest.approx(
        (1e-6, 1e-10))  # DEFAULT_INTRA, as the virtual clock charges it
    assert build_cluster(ranks_per_node=4, nics_per_node=1).nics_per_node == 1


def test_emulated_cluster_uses_the_stepwise_forms_the_clock_charges():
    """mpicomm's reducers block on one exchange per step and launch a kernel per add: a
    cluster built from emulated links predicts what the virtual clock charges them
    (costmodel/stepwise.py). Worked by hand on 4 ranks, 2 a node, 16 MiB, γ = 0, the default
    device's 3 us launch a local add."""
    from mpicomm.costmodel import cluster_time
    from mpicomm.costmodel.profiles import build_cluster

    c = build_cluster(ranks_per_node=2, inter="20us,1GB/s", intra="1us,10GB/s",
                      gamma_s_per_byte=0.0)
    n, piece, launch = 16 * (1 << 20), 1 << 20, 3e-6
    assert c.launch_s == launch
    # ring: the boundary rank's sends pace every step (4 MiB segments: 4 pieces, each added,
    # in each of 3 reduce-scatter steps; 3 allgather steps of 4 MiB); the inter-node α is
    # paid once, not at every step as the slowest-link form charged (2(p-1)·α_inter)
    ring = 12 * (piece * 1e-9 + launch) + 3 * (4 * piece * 1e-9) + 20e-6
    assert cluster_time("ring", 4, n, c) == pytest.approx(ring)
    assert ring < ring_time(4, n, 20e-6, 1e-9, 0) + 12 * launch
    # hierarchical: the ring inside the node (8 MiB segment: 8 pieces, then one 8 MiB
    # allgather step), then across nodes on n/2 (4 MiB segment: 4 pieces, one 4 MiB step)
    intra = 8 * (1e-6 + piece * 1e-10 + launch) + (1e-6 + 8 * piece * 1e-10)
    inter = 4 * (20e-6 + piece * 1e-9 + launch) + (20e-6 + 4 * piece * 1e-9)
    assert cluster_time("hierarchical", 4, n, c) == pytest.approx(intra + inter)
    # ps: the server's 2 inter-node workers queue on its NIC (its node's worker on the intra
    # class): 16 push rounds of 1 MiB pieces, the last one's 3 adds (a kernel each) before
    # the server answers, then the pull of the whole n to each
    adds = 3 * launch
    assert cluster_time("ps", 4, n, c, {"servers": 1}) == pytest.approx(
        16 * (20e-6 + 2 * piece * 1e-9) + adds + 20e-6 + 2 * n * 1e-9)
    assert cluster_time("ps", 4, n, c, {"servers": 1}) < ps_time(4, n, 20e-6, 1e-9, 0)
    # a shard of 1.5 pieces: the second round carries the half piece that is left (as the
    # reducer sends it), not a whole piece. Charged a whole one, the README's main job's ps
    # (1.6 MB, 2 rounds) was predicted at 7.45 ms where the virtual clock charged 6.44 ms.
    half = piece + piece // 2
    assert cluster_time("ps", 4, half, c, {"servers": 1}) == pytest.approx(
        (20e-6 + 2 * piece * 1e-9) + (20e-6 + piece * 1e-9) + adds + 20e-6 + 2 * half * 1e-9)
    # without launches (fused adds) the launch terms go and nothing else moves
    from dataclasses import replace as _replace

    fused = _replace(c, launch_s=0.0)
    assert cluster_time("ring", 4, n, fused) == pytest.approx(ring - 12 * launch)
    # the same links as a pipelined (NCCL-style) cluster: latency along the path, max of phases
    from dataclasses import replace

    piped = replace(c, pipelined=True)
    assert cluster_time("ring", 4, n, piped) < cluster_time("ring", 4, n, c)
    assert cluster_time("hierarchical", 4, n, piped) < cluster_time("hierarchical", 4, n, c)
