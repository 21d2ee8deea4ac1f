"""ring with channels=K (multiring) against NumPy at 1-8 ranks, bit-identical on every rank,
its ring orders, byte counts and cost formula, and the ``channels`` option."""

import json

import pytest
from mpi_harness import run_script

from mpicomm.core.errors import ConfigError
from mpicomm.core.options import MAX_CHANNELS, ReducerOptions
from mpicomm.costmodel import ring_time
from mpicomm.costmodel.algos import channel_rings, multiring_bytes_sent

LENGTHS = "0,1,2,p-1,13,1009,131101"

# (ranks, channels, ranks_per_node): one node; nodes of 2; K = L; K > L; uneven last node;
# K > p; 8 ranks as 2 nodes of 4 with 4 channels
CASES = [
    (1, 2, None), (2, 2, None), (3, 3, None), (4, 2, 2), (4, 3, 1), (5, 2, 2), (6, 3, 4),
    (2, 5, 1), (7, 2, 3), (8, 4, 4),
]


@pytest.mark.parametrize("nranks,channels,rpn", CASES)
def test_multiring_matches_numpy(nranks, channels, rpn):
    opts = json.dumps({"channels": channels, "ranks_per_node": rpn})
    res = run_script(nranks, "check_reducer.py", "ring", opts, "--lengths", LENGTHS, timeout=240)
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)


@pytest.mark.slow
def test_multiring_pieces():
    """Segments over PIECE_BYTES (1 MiB) move in pieces: 2097169 float64 on 3 ranks and
    2 channels are segments of ~2.8 MB."""
    opts = json.dumps({"channels": 2})
    res = run_script(3, "check_reducer.py", "ring", opts, "--lengths", "2097169",
                     "--dtypes", "float64", "--repeat", "1", timeout=240)
    res.expect_ok()


@pytest.mark.parametrize("nranks,channels,rpn", [(3, 2, None), (4, 2, 2), (5, 3, 2), (8, 4, 4)])
def test_multiring_bit_identical_and_bytes_as_formula(nranks, channels, rpn):
    opts = json.dumps({"channels": channels, "ranks_per_node": rpn})
    res = run_script(nranks, "check_identical.py", "ring", opts, "--lengths", "0,1,p-1,131101",
                     timeout=180)
    res.expect_ok()


@pytest.mark.slow
def test_multiring_over_emulated_links():
    opts = json.dumps({"channels": 2, "ranks_per_node": 2, "inter_link": "5us,10GB/s"})
    res = run_script(4, "check_reducer.py", "ring", opts, "--lengths", "1,1009,131101",
                     timeout=180)
    res.expect_ok()
    assert all(r["emulated"] for r in res.records)


def test_channel_rings_cross_each_boundary_through_different_ranks():
    node_of = [r // 4 for r in range(8)]
    rings = channel_rings(node_of, 4)
    assert rings[0] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert rings[1] == [1, 2, 3, 0, 5, 6, 7, 4]
    crossings = set()
    for ring in rings:
        assert sorted(ring) == list(range(8))
        hops = zip(ring, ring[1:] + ring[:1], strict=True)
        pairs = [(a, b) for a, b in hops if node_of[a] != node_of[b]]
        assert len(pairs) == 2  # one crossing each way round the 2 nodes
        crossings.update(pairs)
    assert len(crossings) == 8  # 4 channels x 2 boundaries, all different rank pairs


def test_multiring_bytes_formula():
    node_of = [r // 2 for r in range(4)]
    # n divisible by K·p: each rank sends 2(p-1)/p·n, like the ring
    assert all(multiring_bytes_sent(800, 4, node_of, 2, r) == 2 * 3 * 200 * 4 for r in range(4))
    # any n: summed over ranks, every segment crosses p-1 links twice
    assert sum(multiring_bytes_sent(1001, 8, node_of, 3, r) for r in range(4)) == 2 * 3 * 1001 * 8
    assert multiring_bytes_sent(1001, 8, [0], 3, 0) == 0


def test_multiring_time():
    """The multi-channel ring's one cost (``cluster_time`` on mpicomm's step-by-step cluster)."""
    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.profiles import build_cluster

    alpha, beta, gamma = 2e-6, 1e-10, 1e-10
    one_node = build_cluster(ranks_per_node=8, intra=f"{alpha}s,{1 / beta}B/s",
                             gamma_s_per_byte=gamma)
    # one node, one channel: the ring's formula, and an add kernel's launch in each of the
    # p − 1 reduce-scatter steps (the clock charges each add as a kernel)
    assert cluster_time("ring", 8, 1e6, one_node, {"channels": 1}) == pytest.approx(
        ring_time(8, 1e6, alpha, beta, gamma) + 7 * one_node.launch_s)
    assert one_node.launch_s > 0
    # 2 nodes of 4, slow inter-node links: 4 channels cut the inter-node term ~4x
    two = build_cluster(ranks_per_node=4, intra="1us,100GB/s", inter="20us,1GB/s",
                        gamma_s_per_byte=0.0)
    one = cluster_time("ring", 8, 1 << 26, two, {"channels": 1})
    four = cluster_time("ring", 8, 1 << 26, two, {"channels": 4})
    assert 3.5 < one / four < 4.0


def test_channels_option_refuses_bad_values():
    assert ReducerOptions().channels == 1
    assert ReducerOptions(channels=MAX_CHANNELS).channels == MAX_CHANNELS
    for bad in (0, -1, MAX_CHANNELS + 1, "2", 2.0, True):
        with pytest.raises(ConfigError, match="channels must be an int"):
            ReducerOptions(channels=bad)
    with pytest.raises(ConfigError, match="no compressed variant"):
        ReducerOptions(channels=2, compress="fp16")


def test_multiring_bad_input_errors_on_every_rank():
    """Mismatched lengths, bad dtypes and ops: one clear error on every rank, then it works."""
    res = run_script(3, "check_errors.py", "ring", '{"channels": 2}', timeout=90)
    res.expect_ok()
    assert all("elements" in r["mismatch_message"] for r in res.records)
