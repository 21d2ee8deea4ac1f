"""Whole-step prediction: the engine's timeline by hand, compute from a measured rate, the
placed parameter server, and ``model --predict --model`` (JSON rows, refusals)."""

import json
import math
import subprocess
import sys

import pytest
from mpi_harness import ROOT

from mpicomm.bench.step_predict import DEFAULT_BUCKET_MB
from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.step import Compute, rate_compute, step_time
from mpicomm.workloads import workload

# three layers: forward 1, 2, 3 s; backward 2, 4, 6 s; the three buckets' updates 0.1, 0.2,
# 0.5 s (in the order they are sent)
COMPUTE = Compute((1.0, 2.0, 3.0), (2.0, 4.0, 6.0), (0.1, 0.2, 0.5), "hand")


def test_overlapped_timeline_by_hand():
    # forward ends at 6; backward: layer 2 final at 12, layer 1 at 16, layer 0 at 18
    buckets = [(10.0, 2), (20.0, 1), (30.0, 0)]  # comm: 1 s per 10 bytes
    step = step_time(COMPUTE, buckets, lambda n: n / 10, overlap=True)
    # comm thread: bucket 0 12 -> 13, bucket 1 16 -> 18, bucket 2 18 -> 21; training thread
    # after backward (18): update 0 -> 18.1, update 1 -> 18.3, wait for 21, update 2 -> 21.5
    assert step.step_s == pytest.approx(21.5)
    assert step.exposed_s == pytest.approx(21.5 - 18 - 0.8) and step.comm_s == pytest.approx(6)
    slow = step_time(COMPUTE, buckets, lambda n: n, overlap=True)  # 10, 20, 30 s
    # 12 -> 22 -> 42 -> 72: the queue, not backward, decides
    assert slow.step_s == pytest.approx(72.5)
    fast = step_time(COMPUTE, buckets, lambda n: n / 100, overlap=True)  # 0.1, 0.2, 0.3 s
    # ends 12.1, 16.2, 18.3: updates 0 and 1 (18 -> 18.3) hide the last bucket's wait
    assert fast.step_s == pytest.approx(18.8) and fast.exposed_s == pytest.approx(0.0)


def test_without_overlap_or_with_one_bucket_everything_is_exposed():
    buckets = [(10.0, 2), (20.0, 1), (30.0, 0)]
    step = step_time(COMPUTE, buckets, lambda n: n / 10, overlap=False)
    assert step.step_s == pytest.approx(18 + 6 + 0.8)
    one = step_time(Compute(COMPUTE.fwd_s, COMPUTE.bwd_s, (0.5,), "hand"), [(60.0, 0)],
                    lambda n: n / 10, overlap=True)
    assert one.step_s == pytest.approx(18 + 6 + 0.5) and one.buckets == 1


def test_throughput_and_efficiency():
    buckets = [(10.0, 2), (20.0, 1), (30.0, 0)]
    alone = step_time(COMPUTE, buckets, lambda n: 0.0)
    assert alone.step_s == pytest.approx(18.8)
    step = step_time(COMPUTE, buckets, lambda n: n / 10)
    assert step.samples_per_s(32, 8) == pytest.approx(8 * 32 / 21.5)
    assert step.scaling_efficiency(alone) == pytest.approx(18.8 / 21.5)


def test_the_update_is_the_loops_sgd(monkeypatch):
    """The predictor charges each bucket the kernels ``train.sgd.SGD`` runs on it."""
    from types import SimpleNamespace

    import numpy as np

    from mpicomm.core import flops
    from mpicomm.costmodel.device import device
    from mpicomm.costmodel.step import device_compute
    from mpicomm.train.sgd import SGD

    seen = []
    monkeypatch.setattr(flops, "charge", lambda *a: seen.append(a))
    buckets = [SimpleNamespace(lo=0, hi=600), SimpleNamespace(lo=600, hi=1000)]
    sgd = SGD(np, *[np.zeros(1000, dtype=np.float32) for _ in range(3)], buckets, 0.9, 1e-4)
    sgd.update(0, 0.1)
    sgd.update(1, 0.1)
    h100 = device("h100")
    want = [h100.seconds(f, v * 4, k) for f, v, k in seen]
    got = device_compute(workload("mlp"), 1, h100, "fp32", [600, 400]).update_s
    assert got == pytest.approx(want) and len(seen) == 2


@pytest.mark.parametrize("batch", [1, 37, 256])
def test_the_mlps_compute_is_the_kernels_the_loops_mlp_charges(monkeypatch, batch):
    """Issue 30's step agreement: the predictor charges the ``mlp`` workload's forward and
    backward as the kernels ``nn.MLP`` charges in one step, kernel by kernel, in the loop's
    order (before: one roofline a layer, no loss, 0.87x the loop's compute at batch 4096)."""
    import numpy as np

    from mpicomm.core import flops
    from mpicomm.costmodel.device import device
    from mpicomm.costmodel.step import device_compute
    from mpicomm.nn import MLP
    from mpicomm.train.config import DEFAULT_LAYERS

    seen = []

    def record(flop_count=0.0, values=0, kernels=1, nbytes=0):
        seen.append((float(flop_count), float(values), kernels))

    monkeypatch.setattr(flops, "_device", object())  # charge (no clock: recorded here)
    monkeypatch.setattr(flops, "charge", record)
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, DEFAULT_LAYERS[0])).astype(np.float32)
    MLP(DEFAULT_LAYERS).loss_and_grads(x, rng.integers(0, DEFAULT_LAYERS[-1], batch))
    w, h100 = workload("mlp"), device("h100")
    c = device_compute(w, batch, h100, "fp32")
    want = sum(h100.seconds(f, v * 4, k) for f, v, k in seen)
    assert sum(c.fwd_s) + sum(c.bwd_s) == pytest.approx(want, rel=1e-12)
    kernels = [kn for layer in w.layers for kn in layer.fwd_kernels(batch)]
    kernels += [kn for layer in reversed(w.layers) for kn in layer.bwd_kernels(batch)]
    assert seen == [(float(f), float(v), k) for f, v, k in kernels]


def test_measured_rate_is_shared_by_flops_and_adds_up():
    w = workload("resnet50")
    c = rate_compute(w, 64, 400.0)
    assert c.total_s == pytest.approx(64 / 400)
    assert sum(c.bwd_s) / sum(c.fwd_s) == pytest.approx(w.bwd_flops / w.fwd_flops)
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError, match="--single-rate"):
            rate_compute(w, 64, bad)


def test_default_bucket_is_the_engines():
    from mpicomm.train.config import TrainConfig

    assert DEFAULT_BUCKET_MB == TrainConfig.bucket_mb


def _predict(*args):
    return subprocess.run([sys.executable, "-m", "mpicomm", "model", "--predict", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


LINKS = ("--ranks-per-node", "4", "--inter-link", "5us,3.125GB/s", "--intra-link",
         "2us,10GB/s")


def test_command_rows_carry_samples_per_sec_and_efficiency(tmp_path):
    out = tmp_path / "s.json"
    done = _predict("--model", "vgg16", "--batch-size", "32", "--single-rate", "130.9",
                    "--ranks", "1,16", *LINKS, "--strategies", "ring,ps", "--servers", "4",
                    "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["results"]
    by = {(r["strategy"], r["ranks"]): r for r in rows}
    for r in rows:
        assert r["samples_per_sec"] == pytest.approx(r["ranks"] * 32 / (r["step_ms"] / 1e3))
        assert 0 < r["scaling_efficiency"] <= 1 + 1e-12
    assert by[("ring", 1)]["samples_per_sec"] == pytest.approx(130.9)
    assert by[("ring", 1)]["scaling_efficiency"] == pytest.approx(1.0)
    assert by[("ring", 16)]["samples_per_sec"] > by[("ps", 16)]["samples_per_sec"]


def test_vgg16_whole_tensors_on_servers_are_slower_than_byteps_chunks():
    got = {}
    for placement in ("tensors", "chunks"):
        _, (row,) = _rows("vgg16", [16], ps_placement=placement, ps_servers_on="separate",
                          servers=16, overlap=True, local=4)
        got[placement] = row["samples_per_sec"]
    # fc6 (74%) on one server NIC: 16 x 411 MB, where chunks leave the workers' NICs busiest
    assert got["tensors"] < 0.5 * got["chunks"]


@pytest.mark.parametrize("args, words", [
    (("--model", "resnet51"), "valid models: mlp, resnet50"),
    (("--model", "resnet50", "--single-rate", "0"), "--single-rate"),
])
def test_bad_input_exits_2_with_one_line(args, words):
    done = _predict(*args)
    assert done.returncode == 2
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [
    (("--model", "resnet50", "--single-rate", "-3"), "--single-rate"),
    (("--model", "resnet50", "--single-rate", "nan"), "--single-rate"),
    (("--model", "resnet50", "--single-rate", "10", "-b", "1M"), "-b (not with --model)"),
    (("--single-rate", "10",), "with --model only"),
    (("--model", "resnet50", "--batch-size", "0", "--single-rate", "1"), "--batch-size"),
    (("--model", "resnet50", "--single-rate", "100", "--accelerator", "a100"),
     "--accelerator a100 cannot take effect with --single-rate 100"),
    (("--reducers", "mpicomm"), "--reducers (with --model only)"),
    (("--model", "resnet50", "--inter-link", "5us,25GB/s", "--reducers", "mpicomm"),
     "--reducers mpicomm cannot take effect without a named --profile"),
    (("--model", "resnet50", "--inter-link", "5us,25GB/s", "--reducers", "nccl"),
     "--reducers nccl cannot take effect without a named --profile"),
])
def test_bad_input_is_refused_in_one_line(args, words):
    import argparse

    from mpicomm.cli import model as model_cmd

    p = argparse.ArgumentParser()
    model_cmd.add_arguments(p)
    with pytest.raises(ConfigError) as e:
        model_cmd.run(p.parse_args(["--predict", *args]))
    assert words in str(e.value) and "\n" not in str(e.value)


def _rows(model, ranks, **flags):
    from mpicomm.bench.predict import Variant
    from mpicomm.bench.step_predict import StepOptions, step_rows
    from mpicomm.costmodel.cluster import Cluster, Link

    cluster = Cluster("t", flags.pop("local", 8), Link(1e-6, 100e9), Link(5e-6, 3.125e9),
                      1e-12, 1)
    servers = flags.pop("servers", "p")
    opts = StepOptions(**{"model": model, "batch_size": 32, "single_rate": 400.0,
                          "bucket_mb": 25.0, "overlap": False, "precision": "fp32", **flags})
    return cluster, step_rows(workload(model), cluster, ranks,
                              [Variant("ps", "ps", {"servers": servers})], opts)


def test_node_reduce_sends_one_gradient_a_node_and_is_the_ring_inside_one_node():
    from mpicomm.costmodel.cluster_predict import cluster_time

    w = workload("resnet50")
    _, (flat,) = _rows("resnet50", [64])
    _, (reduced,) = _rows("resnet50", [64], ps_node_reduce=True)
    assert flat["comm_ms"] > 4 * reduced["comm_ms"]  # 8 ranks a node: 8 pushes -> 1
    cluster, (one,) = _rows("resnet50", [8], ps_node_reduce=True)  # one node: just the ring
    ring = sum(cluster_time("ring", 8, b, cluster) for b in _bucket_bytes(w))
    assert one["comm_ms"] == pytest.approx(ring * 1e3)


def _bucket_bytes(w):
    from mpicomm.engine.buckets import plan_buckets

    return [b.size * 4 for b in plan_buckets(w.flat_tensors(), 4, 25 * 2**20)]


def test_a_ring_of_one_rank_a_node_crosses_no_intra_link():
    """With one rank a node every step of mpicomm's ring crosses the inter-node link: a slower
    intra-node link (here 10 GB/s under a 12.5 GB/s network, the virtual clock's defaults)
    must not price it. It did: ResNet-50's ring at 2 nodes was predicted 10.3 ms where the
    virtual clock charged 8.7 (tests/workloads/test_workload_runs.py)."""
    from mpicomm.costmodel.cluster import Cluster, Link
    from mpicomm.costmodel.cluster_predict import cluster_time

    c = Cluster("t", 1, Link(1e-6, 10e9), Link(5e-6, 12.5e9), 1e-12, 1, pipelined=False)
    n, p = 100e6, 4
    ring = cluster_time("ring", p, n, c)
    # each reduce-scatter step moves its 25 MB segment as 24 pieces of at most 1 MiB, an α each
    assert ring == pytest.approx(2 * (p - 1) * 5e-6 + (p - 1) * 23 * 5e-6
                                 + 2 * (p - 1) / p * n / 12.5e9 + (p - 1) / p * n * 1e-12)
    assert ring == pytest.approx(cluster_time("hierarchical", p, n, c))  # L = 1: the inter ring


def test_a_servers_last_push_round_carries_only_what_is_left():
    """mpicomm's ps pushes a shard in 1 MiB pieces and the last piece holds the rest: a
    shard of 1.5 pieces takes one full round and a half one. The predictor charged two full
    rounds: the 64-rank MLP step (1.6 MB, one server) 103.5 ms against the virtual clock's
    89.8 (docs/validation_steps.md)."""
    from mpicomm.costmodel.cluster_formulas import ps_interfaces_time

    piece, beta = float(1 << 20), 1 / 1e9  # one link class: 1 GB/s, no latency, no adds
    link = (0.0, beta)
    p, n = 4, 1.5 * piece  # one node: the server (rank 0) takes 3 pushes, sends 3 pulls
    t = ps_interfaces_time(p, n, p, link, link, 0.0, piece=piece)
    assert t == pytest.approx(3 * piece * beta + 3 * 0.5 * piece * beta + 3 * n * beta)


def test_an_rpc_rate_floors_the_bucket_holding_a_tensor_above_its_size():
    """A per-message RPC rate: the bucket holding VGG-16's fc6 (411,041,792 bytes) takes at
    least its push then its pull at that rate; ResNet-50 (no tensor above 128 MiB) and the
    ring do not move."""
    from mpicomm.bench.step_predict import RpcRate

    rpc = RpcRate(128 * 2**20, 100e6)
    _, (plain,) = _rows("vgg16", [16], ps_placement="tensors", servers=4, local=4)
    _, (slow,) = _rows("vgg16", [16], ps_placement="tensors", servers=4, local=4, rpc=rpc)
    fc6 = 25088 * 4096 * 4
    assert slow["comm_ms"] / 1e3 >= 2 * fc6 / 100e6 > plain["comm_ms"] / 1e3
    # no overlap: the step is compute, then each bucket's reduction one after the other
    assert slow["step_ms"] == pytest.approx(slow["compute_ms"] + slow["comm_ms"])
    for model in ("resnet50", "inception3"):
        _, (a,) = _rows(model, [16], ps_placement="tensors", servers=4, local=4)
        _, (b,) = _rows(model, [16], ps_placement="tensors", servers=4, local=4, rpc=rpc)
        assert a["step_ms"] == b["step_ms"]
    assert rpc.floors([fc6, 128 * 2**20, 1.0]) == [2 * fc6 / 100e6, 0.0, 0.0]


def test_own_reducers_cluster_is_the_clocks_and_changes_only_a_named_profile():
    """mpicomm's reducers on a profile: one exchange a step, no per-call α, the device's
    launch and γ; the links, NICs and channels stay the profile's. On link flags (already
    mpicomm's forms) ``reducers="mpicomm"`` changes no row; on a profile it moves the ring."""
    from mpicomm.bench.predict import Variant
    from mpicomm.bench.step_predict import StepOptions, own_reducers_cluster, step_rows
    from mpicomm.costmodel.profiles import build_cluster

    prof = build_cluster("ethernet-25g")
    own = own_reducers_cluster(prof, 2e-12, 7e-6)
    assert prof.pipelined and prof.alpha_call_s > 0
    assert (own.pipelined, own.alpha_call_s, own.launch_s, own.gamma_s_per_byte) == \
        (False, 0.0, 7e-6, 2e-12)
    assert (own.inter, own.intra, own.nics_per_node, own.ranks_per_node) == \
        (prof.inter, prof.intra, prof.nics_per_node, prof.ranks_per_node)
    assert own_reducers_cluster(prof, 2e-12, 7e-6, 4).ranks_per_node == 4
    ring = [Variant("ring", "ring", {})]
    links = build_cluster(None, ranks_per_node=8, inter="60us,3.125GB/s")
    for cluster, moves in ((links, False), (prof, True)):
        step = {f: step_rows(workload("resnet50"), cluster, [256], ring,
                             StepOptions("resnet50", 64, accelerator="v100", reducers=f))[0]
                for f in (None, "mpicomm")}
        assert step["mpicomm"]["reducers"] == "mpicomm"
        assert (step[None]["step_ms"] != step["mpicomm"]["step_ms"]) is moves
