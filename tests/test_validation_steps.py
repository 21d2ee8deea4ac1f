"""Whole training steps against published data-parallel results (experiments/validation).

Runs check_steps.py's core on steps.json: every point sourced and quoted, the score computed
from the rows (a moved point changes it), the CLI giving the same prediction, and the three
targets asserted (>= 80% within, worst <= 2x, every PS/all-reduce order right). The worst
<= 2x is met since the RPC rule for TensorFlow's 2017 gRPC (steps.json ``transports``): it
moves only the points whose model has a tensor above its size (VGG-16's parameter server).
"""

import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT, load_script

CHECK = ROOT / "experiments" / "validation" / "check_steps.py"


@pytest.fixture(scope="module")
def check():
    return load_script("experiments/validation/check_steps.py")


def test_points_are_sourced(check):
    doc = check.load()
    assert len(doc["points"]) >= 20
    for pt in doc["points"]:
        src = doc["sources"][pt["source"]]
        assert src["url"] and src["quote"] and src["what"], pt["id"]
        assert doc["clusters"][pt["cluster"]]["source"], pt["id"]
        assert ("measured_samples_per_s" in pt) != ("measured_efficiency" in pt), pt["id"]
        assert pt["single_rate"] > 0 and pt["setup"], pt["id"]
    strategies = {pt["strategy"] for pt in doc["points"]}
    assert "ps" in strategies and "ring" in strategies


def test_targets_the_set_meets(check):
    _, pairs, summary = check.run(check.load())
    assert summary["share_within"] >= check.TARGET_SHARE
    assert summary["worst_fold"] <= check.TARGET_FOLD
    assert pairs and summary["orders_right"] == summary["orders"]
    assert summary["targets_met"]


def test_the_rpc_rule_moves_only_vgg16s_parameter_server(check):
    doc = check.load()
    with_rpc, _, _ = check.run(doc)
    without, _, _ = check.run(doc, no_rpc=True)
    moved = {a["id"] for a, b in zip(with_rpc, without, strict=True)
             if a["predicted_samples_per_s"] != b["predicted_samples_per_s"]}
    assert moved == {"h44-vgg16-ps-tf", "h44-vgg16-ps-tf-cpu"}
    for name in {src.get("rpc") for src in doc["sources"].values()} - {None}:
        assert doc["transports"][name]["source"]


def test_the_score_is_computed_from_the_rows(check):
    doc = check.load()
    _, _, before = check.run(doc)
    moved = json.loads(json.dumps(doc))
    for pt in moved["points"]:
        if "measured_samples_per_s" in pt and pt["strategy"] == "ring":
            pt["measured_samples_per_s"] *= 3
    _, _, after = check.run(moved)
    assert after["within"] < before["within"]


def test_the_check_predicts_what_the_command_prints(check, tmp_path, monkeypatch):
    import dataclasses

    doc = check.load()
    pt = next(p for p in doc["points"] if p["id"] == "h44-vgg16-nccl-rdma")
    # the command's explicit links are mpicomm's own reducers (not pipelined, build_cluster);
    # the check's clusters run NCCL (pipelined): the same cluster on both sides here
    cluster_of = check.point_cluster
    from mpicomm.costmodel.device import LAUNCH_S

    monkeypatch.setattr(check, "point_cluster", lambda d, q: dataclasses.replace(
        cluster_of(d, q), pipelined=False, launch_s=LAUNCH_S))  # the command's: an add a kernel
    row = check.predict(doc, pt)
    c = doc["clusters"][pt["cluster"]]
    out = tmp_path / "p.json"
    assert c["inter"]["efficiency"] != 1  # the command's links are at line rate: scale it
    rate = c["inter"]["bytes_per_s"] * c["inter"]["efficiency"]
    done = subprocess.run(
        [sys.executable, "-m", "mpicomm", "model", "--predict", "--model", pt["model"],
         "--batch-size", str(pt["batch"]), "--single-rate", str(pt["single_rate"]),
         "--ranks", str(pt["gpus"]), "--ranks-per-node", str(c["ranks_per_node"]),
         "--inter-link", f"{c['inter']['alpha_s']}s,{rate}B/s",
         "--intra-link", f"{c['intra']['alpha_s']}s,{c['intra']['bytes_per_s']}B/s",
         "--gamma-rate", f"{1 / c['gamma_s_per_byte']}B/s", "--nics-per-node", "1",
         "--strategies", "ring", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())["results"][0]
    assert got["samples_per_sec"] == pytest.approx(row["samples_per_sec"], rel=1e-6)
