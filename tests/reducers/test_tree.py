"""tree (double binary tree) against NumPy at 1-8 ranks, bit-identical on every rank, and
its shapes and byte counts against ``mpicomm.costmodel.algos``."""

import json
import math

import pytest
from mpi_harness import run_mpi, run_script

from mpicomm.costmodel import ring_time
from mpicomm.costmodel.algos import (
    TREE_CHUNK_BYTES,
    TREE_MIN_CHUNK_BYTES,
    double_binary_tree,
    tree_bytes_sent,
    tree_chunk_bytes,
    tree_crossings,
    tree_depth,
    tree_levels,
)
from mpicomm.costmodel.queues import interface_share
from mpicomm.costmodel.tree_steps import tree_allreduce_time, tree_cluster_time

# 0 and 1 leave a tree empty; 131101 (prime) moves 4 (float32) or 8 (float64) chunks of
# 64 KiB per tree
LENGTHS = "0,1,2,p-1,13,1009,131101"


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5, 6, 7, 8])
def test_tree_matches_numpy(nranks):
    res = run_script(nranks, "check_reducer.py", "tree", "{}", "--lengths", LENGTHS, timeout=240)
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [3, 8])
def test_tree_many_chunks(nranks):
    """1000003 elements: 1 MiB chunks (3 ranks) or ~170 KiB ones (8 ranks), 4 to 12 per tree."""
    res = run_script(nranks, "check_reducer.py", "tree", "{}", "--lengths", "1000003",
                     "--repeat", "1", timeout=300)
    res.expect_ok()


@pytest.mark.parametrize("nranks", [2, 3, 5, 8])
def test_tree_bit_identical_and_bytes_as_formula(nranks):
    res = run_script(nranks, "check_identical.py", "tree", "{}", "--lengths", "0,1,p-1,131101",
                     timeout=180)
    res.expect_ok()
    assert all(r["bytes_sent"] > 0 for r in res.records)


@pytest.mark.slow
def test_tree_over_emulated_links():
    """The emulated transport's isend/irecv (headers, sleeps) carry the tree too."""
    res = run_script(4, "check_reducer.py", "tree", '{"ranks_per_node": 2, "inter_link": '
                     '"5us,10GB/s"}', "--lengths", "1,1009,131101", timeout=180)
    res.expect_ok()
    assert all(r["emulated"] for r in res.records)


@pytest.mark.parametrize("p", list(range(1, 41)))
def test_double_tree_spans_every_rank(p):
    for t in (0, 1):
        shapes = [double_binary_tree(p, r)[t] for r in range(p)]
        assert sum(up < 0 for up, _ in shapes) == 1  # one root
        for r, (up, children) in enumerate(shapes):
            assert len(children) <= 2
            assert all(shapes[c][0] == r for c in children)
            assert up < 0 or r in shapes[up][1]
    assert tree_depth(p) == (math.ceil(math.log2(p)) if p > 1 else 0)


@pytest.mark.parametrize("p", [2, 4, 6, 8, 16])
def test_double_tree_leaves_are_inner_ranks_of_the_other(p):
    """Even p: each rank is a leaf in exactly one tree (NCCL's complementary trees)."""
    for r in range(p):
        leaf = [not children for _, children in double_binary_tree(p, r)]
        assert leaf.count(True) == 1, (p, r, leaf)


def test_tree_bytes_formula_by_hand():
    # p = 2: tree 0 is 0 -> 1, tree 1 is 1 -> 0; n = 5 float64: halves 3 and 2 items.
    # rank 0 is tree 0's root (sends 3 down) and tree 1's leaf (sends 2 up).
    assert tree_bytes_sent(5, 8, 2, 0) == (3 + 2) * 8
    assert tree_bytes_sent(5, 8, 2, 1) == (3 + 2) * 8
    assert tree_bytes_sent(5, 8, 1, 0) == 0
    # every rank sends at most 2n (ring: 2(p-1)/p·n); summed over ranks each tree's
    # edges carry its half twice: 2·(p-1)·n in all
    for p in (3, 8, 13):
        total = sum(tree_bytes_sent(1001, 4, p, r) for r in range(p))
        assert total == 2 * (p - 1) * 1001 * 4
        assert max(tree_bytes_sent(1001, 4, p, r) for r in range(p)) <= 2 * 1001 * 4 + 8


def test_tree_time_latency_and_bandwidth_limits():
    alpha, beta = 1e-5, 1e-9
    # one chunk: up and down D levels, α a level (the two trees' messages leave together)
    n = 1024
    d = tree_depth(64)
    assert tree_allreduce_time(64, n, alpha, 0.0, 0.0) == pytest.approx(2 * d * alpha)
    # at 64 ranks and small n the tree beats the ring's 2(p-1)α
    assert tree_allreduce_time(64, n, alpha, beta, 0.0) < ring_time(64, n, alpha, beta, 0.0)
    # large n: about 2nβ (the ring's bandwidth), plus the pipeline fill
    big = 1 << 28
    t = tree_allreduce_time(8, big, 0.0, beta, 0.0)
    fill = (tree_depth(8) - 1) * TREE_CHUNK_BYTES / (big / 2)  # chunk steps beyond the k needed
    assert 2 * big * beta <= t <= 2 * big * beta * (1 + fill)
    assert tree_allreduce_time(1, big, alpha, beta, 0.0) == 0.0


def test_tree_chunks_about_four_per_level():
    assert tree_chunk_bytes(1000, 3) == TREE_MIN_CHUNK_BYTES  # small: one chunk of at most 64 KiB
    assert tree_chunk_bytes(1 << 30, 3) == TREE_CHUNK_BYTES  # large: 1 MiB, 512 per half
    n, depth = 48 << 20, 3  # 24 MiB per half over depth 3: 2 MiB wanted, capped
    c = tree_chunk_bytes(n, depth)
    assert c % 8 == 0 and TREE_MIN_CHUNK_BYTES <= c <= TREE_CHUNK_BYTES
    n = 12 << 20  # 6 MiB per half: 12 chunks of 512 KiB
    assert tree_chunk_bytes(n, depth) == 512 << 10


def test_tree_bad_input_errors_on_every_rank():
    """Mismatched lengths, bad dtypes and ops: one clear error on every rank, then it works."""
    res = run_script(3, "check_errors.py", "tree", "{}", timeout=90)
    res.expect_ok()
    assert all("elements" in r["mismatch_message"] for r in res.records)


def test_tree_levels_by_hand():
    """8 ranks: tree 0 is 0 <- 4 <- {2, 6} <- odd ranks; tree 1 its mirror (r plays 7 - r)."""
    heights = [3, 0, 1, 0, 2, 0, 1, 0]
    depths = [0, 3, 2, 3, 1, 3, 2, 3]
    for r in range(8):
        (h0, d0), (h1, d1) = tree_levels(8, r)
        assert (h0, d0) == (heights[r], depths[r])
        assert (h1, d1) == (heights[7 - r], depths[7 - r])
    for p in (2, 5, 13):  # a child sits one level below its parent, above its own children
        for r in range(p):
            for t, (up, children) in enumerate(double_binary_tree(p, r)):
                h, d = tree_levels(p, r)[t]
                assert all(tree_levels(p, c)[t][1] == d + 1 for c in children)
                assert all(tree_levels(p, c)[t][0] < h for c in children)
                assert (up < 0) == (d == 0) and (not children) == (h == 0)


def test_tree_cluster_time_charges_the_busiest_queue_a_step():
    """8 ranks on 2 nodes of 4, 256 MiB (128 chunks of 1 MiB a tree), intra-node β ~0: a step
    moves one chunk on each queue across nodes (0-4, 2-4 in tree 0; 7-3, 5-3 in tree 1), so
    each phase takes about (n/2)·β_e: n·β_e in all, plus the fill. With one NIC a node two
    edges leave it at once in each phase: 2n·β_e, the NIC's bytes (the old count, every rank
    of a node, charged 4n·β_e)."""
    n, beta = float(1 << 28), 1e-9
    intra, inter = (0.0, 1e-15), (0.0, beta)
    fill = 1 + 2 * (tree_depth(8) + 1) * TREE_CHUNK_BYTES / (n / 2)
    own = tree_cluster_time(8, n, 4, intra, inter, 0.0)
    assert n * beta <= own <= n * beta * fill
    shared = tree_cluster_time(8, n, 4, intra, inter, 0.0, nics=1)
    assert 2 * n * beta <= shared <= 2 * n * beta * fill
    assert tree_cluster_time(8, n, 4, intra, inter, 0.0, nics=4) == own  # an interface a rank
    # one class: as the clock's recurrence over one link (the two trees' chunks share each
    # queue: 2 messages a step for every inner rank)
    flat = tree_allreduce_time(8, n, *inter, 0.0)
    assert 2 * n * beta <= flat <= 2 * n * beta * fill
    assert tree_cluster_time(8, n, 8, inter, intra, 0.0) == pytest.approx(flat)


@pytest.mark.slow
def test_tree_virtual_run_matches_its_formula_on_one_link(tmp_path):
    """8 ranks on one 20us,1GB/s class at 16 MiB: the virtual run within 10% of
    ``tree_allreduce_time`` (it took 3.75x when each rank waited for one tree, then the other)."""
    out = tmp_path / "b.json"
    link = "20us,1GB/s"
    res = run_mpi(8, ["-m", "mpicomm", "bench", "--clock", "virtual", "--compute-scale", "1e-6",
                      "--ranks-per-node", "8", "--intra-link", link,
                      "--strategies", "tree", "-b", "16M", "-e", "16M", "-n", "2", "-w", "1",
                      "-c", "1", "--rounds", "1", "--json", str(out)], timeout=300)
    assert res.returncode == 0, res.tail()
    row = json.loads(out.read_text())["results"][0]
    assert row["wrong"] == 0
    ratio = row["time_us"] * 1e-6 / tree_allreduce_time(8, 16 << 20, 20e-6, 1e-9, 0.0)
    assert 0.9 <= ratio <= 1.1, ratio


def test_tree_crossings_by_hand():
    """2 nodes x 2 (issue 33's namespaces). Tree 0: 0 -> 2 -> 1, 3; tree 1: 3 -> 1 -> 2, 0.
    Going up, only rank 1 leaves node 0 (1->2, 1->3) and only rank 2 node 1 (2->0, 2->1):
    one rank a node with two messages; going down, 0->2 and 1->2 (3->1 and 2->1): two ranks
    with one each. The clock and the predictor had counted every rank of a node both ways."""
    node_of = [0, 0, 1, 1]
    up_one, down_two = (1, 2), (2, 2)  # (ranks, messages) of the node
    want = [((0, *up_one), (1, *down_two)), ((2, *up_one), (1, *down_two)),
            ((2, *up_one), (1, *down_two)), ((0, *up_one), (1, *down_two))]
    assert [tree_crossings(node_of, r) for r in range(4)] == want
    # 2 x 4: ranks 2 and 3 send up out of node 0 (2->4, 3->7), 0 and 3 receive (4->0, 5->3)
    node_of = [r // 4 for r in range(8)]
    assert [tree_crossings(node_of, r)[0][0] for r in range(4)] == [0, 0, 1, 1]
    assert [tree_crossings(node_of, r)[1][0] for r in range(4)] == [1, 0, 0, 1]
    assert {tree_crossings(node_of, r)[1][1:] for r in range(8)} == {(2, 2)}


def test_interface_share_by_hand():
    """β's multiplier across nodes: a rank's own messages already follow one another on its
    queue; the node's messages spread over its interfaces, ⌈messages/nics⌉ each."""
    assert interface_share(2, 1, 2, 1) == 1  # one rank, two messages: its own queue
    assert interface_share(1, 2, 2, 1) == 2
    assert interface_share(1, 4, 4, 1) == 4 and interface_share(1, 4, 4, 2) == 2  # ⌈k/c⌉
    assert interface_share(2, 2, 3, 1) == 1.5 and interface_share(1, 2, 3, 1) == 3  # all end
    assert interface_share(2, 3, 4, 2) == 1 and interface_share(1, 3, 4, 2) == 2  # together
    assert interface_share(1, 3, 4, 3) == 1  # an interface a rank
    assert interface_share(1, 2, 2, None) == 1 and interface_share(0, 2, 2, 1) == 1


def _virtual_tree_us(tmp_path, p: int, local: int, nics: int | None, nbytes: int) -> float:
    """One tree allreduce of ``nbytes`` under the virtual clock (bench's median call, µs) on
    p ranks in nodes of ``local``, ``--intra-link 2us,10GB/s --inter-link 20us,1GB/s``."""
    out = tmp_path / f"tree_{p}_{local}_{nics}.json"
    res = run_mpi(p, ["-m", "mpicomm", "bench", "--clock", "virtual", "--compute-scale", "1e-6",
                      "--ranks-per-node", str(local), "--intra-link", "2us,10GB/s",
                      "--inter-link", "20us,1GB/s", "--strategies", "tree", "-b", str(nbytes),
                      "-e", str(nbytes), "-n", "2", "-w", "1", "-c", "1", "--rounds", "1",
                      "--json", str(out),
                      *([] if nics is None else ["--nics-per-node", str(nics)])], timeout=300)
    assert res.returncode == 0, res.tail()
    row = json.loads(out.read_text())["results"][0]
    assert row["wrong"] == 0
    return row["time_us"]


@pytest.mark.slow
def test_tree_on_one_nic_a_node_costs_the_nic_bytes(tmp_path):
    """2 nodes x 4 behind one NIC a node, 16 MiB: each phase sends two tree edges out of a
    node and two into it (each carrying its tree's n/2), so a node's NIC carries n each way
    per phase, 2n·β in all. The clock charged every rank of the node as crossing at once
    (73.1 ms, 2.2x the NIC's 33.6 ms); the predictor likewise (73.5 ms)."""
    n = 16 << 20
    measured = _virtual_tree_us(tmp_path, 8, 4, 1, n)
    nic_us = 2 * n * 1e-9 * 1e6  # --inter-link 20us,1GB/s: β = 1 ns a byte
    assert 1.0 <= measured / nic_us <= 1.15, (measured, nic_us)  # α and the fill on top


@pytest.mark.slow
@pytest.mark.parametrize("p,local,nics", [(8, 4, 1), (8, 4, None), (8, 2, 1), (9, 3, 1),
                                          (9, 3, None)])
def test_tree_predictor_is_the_clocks_recurrence(tmp_path, p, local, nics):
    """The virtual bench's tree against ``cluster_time("tree")`` on the same flags' cluster,
    16 MiB, within 2%: 2 x 4, 4 x 2 and 3 x 3 (nodes whose ranks send one or two edges
    across), one NIC a node and one a rank. The closed form charged every step the busiest
    queue's q·(α + c·β) and its fill at that pace: 3 x 3 ran 0.89 of it (one NIC a rank)
    and 0.91 (one a node), 4 x 2 on one NIC 0.92."""
    import dataclasses

    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.profiles import build_cluster

    n = 16 << 20
    measured = _virtual_tree_us(tmp_path, p, local, nics, n) * 1e-6
    cluster = build_cluster(ranks_per_node=local, intra="2us,10GB/s", inter="20us,1GB/s",
                            nics_per_node=nics, gamma_s_per_byte=0.0)
    predicted = cluster_time("tree", p, n, cluster, {})
    assert 0.98 <= measured / predicted <= 1.02, (measured, predicted)
    # the adds' kernels as the bench charges them (x 1e-6, --compute-scale): the same to 1e-4
    cluster = dataclasses.replace(cluster, launch_s=cluster.launch_s * 1e-6)
    assert cluster_time("tree", p, n, cluster, {}) == pytest.approx(measured, rel=1e-4)


def test_tree_time_past_the_steady_state_is_the_recurrence_extended():
    """Above 4·depth + 2 chunks a tree the predictor extends the recurrence's steady state
    (three runs, cached) instead of running every chunk: within 0.2% of the full run (the
    receive queues' forgotten intervals move it slightly), exact on even layouts."""
    from mpicomm.costmodel import tree_steps

    full = tree_steps._recurrence.__wrapped__
    for p, local, nics, tol in ((8, 4, 1, 1e-9), (9, 3, None, 2e-3)):
        n = float(1 << 28)
        chunk = tree_chunk_bytes(n, tree_depth(p))
        k = math.ceil(n / 2 / chunk)
        assert k > 4 * tree_depth(p) + 4  # past the steady state
        want = full(p, local, (2e-6, 1e-10), (20e-6, 1e-9), 0.0, 3e-6, nics, chunk,
                    n / 2 - (k - 1) * chunk, k)
        got = tree_cluster_time(p, n, local, (2e-6, 1e-10), (20e-6, 1e-9), 0.0, 3e-6, nics)
        assert got == pytest.approx(want, rel=tol)
