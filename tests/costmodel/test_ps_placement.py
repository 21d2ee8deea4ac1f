"""Parameter-server placement (whole tensors, LPT; BytePS chunks) against brute force, and the
placed cost against the cluster's ps formula where the two must agree."""

import itertools
import random

import pytest

from mpicomm.costmodel.cluster_formulas import ps_interfaces_time
from mpicomm.costmodel.ps_placement import (
    place_chunks,
    place_tensors,
    ps_placed_time,
    server_loads,
)
from mpicomm.workloads import workload


def _optimum(sizes, servers):
    best = float("inf")
    for owner in itertools.product(range(servers), repeat=len(sizes)):
        loads = [0.0] * servers
        for x, s in zip(sizes, owner, strict=True):
            loads[s] += x
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_largest_first_is_within_grahams_bound_of_the_brute_force_optimum(seed):
    rng = random.Random(seed)
    servers = rng.randint(2, 3)
    sizes = [rng.randint(1, 100) for _ in range(rng.randint(3, 8))]
    owner = place_tensors(sizes, servers)
    assert sorted(set(owner)) <= list(range(servers)) and len(owner) == len(sizes)
    loads = server_loads(sizes, servers, "tensors")
    assert sum(loads) == pytest.approx(sum(sizes))
    opt = _optimum(sizes, servers)
    assert max(loads) >= opt - 1e-9
    assert max(loads) <= (4 / 3 - 1 / (3 * servers)) * opt + 1e-9  # Graham 1969, LPT


def test_largest_first_beats_creation_order_on_a_known_case():
    sizes = [1, 1, 1, 1, 4]  # in order: 1,1 | 1,1 then 4 -> 6; largest first: 4 | 1,1,1,1
    assert max(server_loads(sizes, 2, "tensors")) == 4
    owner = place_tensors(sizes, 2, largest_first=False)
    assert max(sum(x for x, s in zip(sizes, owner, strict=True) if s == k)
               for k in range(2)) == 6


@pytest.mark.parametrize("seed", range(6))
def test_chunks_cover_every_byte_and_balance_within_one_chunk(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(0, 20_000_000) for _ in range(rng.randint(1, 30))]
    servers = rng.randint(1, 9)
    pieces = place_chunks(sizes, servers, 4_096_000)
    for i, size in enumerate(sizes):
        assert sum(b for t, b, _ in pieces if t == i) == size
    assert all(b <= 4_096_000 for _, b, _ in pieces)
    loads = server_loads(sizes, servers, "chunks")
    assert max(loads) <= sum(sizes) / servers + 4_096_000


def test_vgg16_fc6_sits_on_one_server_whole_but_spreads_in_chunks():
    sizes = [n * 4 for _, _, n in workload("vgg16").tensors_backward()]
    assert max(server_loads(sizes, 16, "tensors")) == 25088 * 4096 * 4
    assert max(server_loads(sizes, 16, "chunks")) < 1.1 * sum(sizes) / 16


@pytest.mark.parametrize("p", [2, 3, 8])
def test_even_colocated_one_rank_a_node_is_the_clusters_ps_formula(p):
    n, beta = 64e6, 1e-9
    placed = ps_placed_time([n / p] * p, p, 1, (0.0, beta / 10), (0.0, beta), 0.0)
    assert placed == pytest.approx(ps_interfaces_time(p, n, 1, (0.0, beta / 10), (0.0, beta),
                                                      0.0, servers=p))


def test_separate_servers_take_the_busier_of_their_nics_and_the_workers():
    n, beta, p, local = 100e6, 1e-9, 16, 4
    few = ps_placed_time([n / 2] * 2, p, local, (0, 0), (0, beta), 0.0, separate=True)
    assert few == pytest.approx(p * n / 2 * beta)  # two server NICs carry 16 workers each
    many = ps_placed_time([n / 64] * 64, p, local, (0, 0), (0, beta), 0.0, separate=True)
    assert many == pytest.approx(local * n * beta)  # the worker node's NIC (4 workers)
