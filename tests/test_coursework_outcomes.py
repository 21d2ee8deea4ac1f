"""The predicted outcomes docs/coursework.md states (exercises 1 to 4) come from the model.

Each number below is the one the page prints; a change of the cluster model that moves it
fails here, so the page is updated with it. The virtual-time outcomes are checked by
tests/p2p/test_virtual_outcomes.py (slow tier).
"""

import pytest

from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.profiles import cluster

MiB = 1 << 20
DGX, ETH = cluster("dgx-h100-ib400"), cluster("ethernet-25g")
ONE = {"channels": 1}  # the pages' `--channels 1`: the ring through one NIC (default: one per NIC)


def _busbw(seconds: float, n: int, p: int) -> float:
    return n * 2 * (p - 1) / p / seconds / 1e9


@pytest.mark.parametrize("p, crossover", [(64, 8 * MiB), (1024, 64 * MiB)])
def test_exercise_1_ring_overtakes_recursive_doubling(p, crossover):
    sizes = [MiB << k for k in range(11)]  # 1 MiB .. 1 GiB, -f 2
    ring_wins = [cluster_time("ring", p, n, DGX, ONE) < cluster_time("recursive_doubling", p, n,
                                                                       DGX)
                 for n in sizes]
    assert sizes[ring_wins.index(True)] == crossover
    assert all(ring_wins[ring_wins.index(True):])  # and keeps winning above it


@pytest.mark.parametrize("p, ps_ms, ps_eff, ring_eff", [(8, 0.52, 0.79, 0.88),
                                                       (16, 9.43, 0.17, 0.56)])
def test_exercise_2_one_server_on_ethernet(p, ps_ms, ps_eff, ring_eff):
    """The page said 'passes 1 ms at 8 ranks, 16 ms at 16 (efficiency 0.11 against 0.52)'."""
    n, compute_ms, opts = 1_597_480, 2.0, {"servers": 1}
    ps = cluster_time("ps", p, n, ETH, dict(opts)) * 1e3
    ring = cluster_time("ring", p, n, ETH, dict(opts)) * 1e3
    assert ps == pytest.approx(ps_ms, rel=0.01)
    assert compute_ms / (compute_ms + ps) == pytest.approx(ps_eff, abs=0.005)
    assert compute_ms / (compute_ms + ring) == pytest.approx(ring_eff, abs=0.005)


@pytest.mark.parametrize("p, n, busbw", [(16, 1 << 30, 46.8), (1024, 1 << 30, 39.7),
                                         (16, MiB, 16.3), (1024, MiB, 0.81)])
def test_exercise_3_ring_busbw(p, n, busbw):
    assert _busbw(cluster_time("ring", p, n, DGX, ONE), n, p) == pytest.approx(busbw, rel=0.01)


@pytest.mark.parametrize("profile, ring_ms, hier_ms", [(DGX, 16.8, 2.12), (ETH, 237, 205)])
def test_exercise_4_hierarchy_at_1024_ranks(profile, ring_ms, hier_ms):
    n = 256 * MiB
    ring, hier = cluster_time("ring", 1024, n, profile, ONE), cluster_time("hierarchical", 1024,
                                                                            n, profile)
    assert ring * 1e3 == pytest.approx(ring_ms, rel=0.01)
    assert hier * 1e3 == pytest.approx(hier_ms, rel=0.02)
