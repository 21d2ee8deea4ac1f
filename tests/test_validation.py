"""The cluster model against published all-reduce measurements (experiments/validation).

Runs check.py's core on points.json and asserts issue 18's targets on EVERY point (runs
their own thread calls below expected included), so a model change that breaks them fails
here; checks that every point carries its source and quote, that the score really is
computed from the rows (a point moved out of range fails it), and the NCCL tuning-model
pieces the predictions rest on (protocols, the network plugin's latency, the LL cap).
"""

import json
import math
import subprocess
import sys

import pytest
from mpi_harness import ROOT, load_script

CHECK = ROOT / "experiments" / "validation" / "check.py"


@pytest.fixture(scope="module")
def check():
    return load_script("experiments/validation/check.py")


def test_points_are_sourced_and_span_the_range(check):
    points = check.load()
    assert len(points) >= 20
    for pt in points:
        assert pt["url"].startswith("https://github.com/"), pt["id"]
        assert pt["quote"] and pt["source"] and pt["profile"], pt["id"]
        assert (pt.get("time_us") is None) != (pt.get("busbw_gbps") is None), pt["id"]
        assert pt["role"] in ("score", "calibration"), pt["id"]  # nothing left out post hoc
        assert pt["role"] == "score" or pt.get("note"), pt["id"]  # a reason when not scored
        assert pt["gpus"] == pt["nodes"] * pt["gpus_per_node"], pt["id"]
    scored = [p for p in points if p["role"] == "score"]
    assert len(scored) >= 20
    assert min(p["gpus"] for p in scored) == 8 and max(p["gpus"] for p in scored) >= 1024
    assert min(p["bytes"] for p in scored) <= 8 and max(p["bytes"] for p in scored) >= 1 << 33


def test_issue30_targets_as_far_as_they_are_met(check):
    """Issue 30's targets (85% within 1.5x, none beyond 2.0x), on EVERY point.

    The share is met and held here. The worst fold is not met by one run its own poster
    reports as below expectation (docs/validation.md): held here is that every point beyond
    2.0x is such a run, that the runs without that mark meet 2.0x, and that the score says
    "not met" while one is beyond (so neither a regression nor a false "met" passes).
    """
    assert (check.TARGET_SHARE, check.TARGET_FOLD) == (0.85, 2.0)  # the issue's, not 18's
    rows = check.evaluate(check.load())
    s = check.score(rows)
    assert s["within_1_5x"] >= check.TARGET_SHARE and s["share_met"], s
    by_id = {r["id"]: r for r in rows}
    assert all(by_id[i]["below_expected"] for i in s["beyond_target"]), s["beyond_target"]
    assert s["fold_met"] == (not s["beyond_target"]) and s["met"] == s["fold_met"]
    below = [r for r in rows if r["below_expected"]]
    assert below and all(r["role"] == "score" for r in below)  # scored, not excluded
    ref = check.score(rows, keep_below_expected=False)
    assert ref["points"] == s["points"] - len(below)
    assert ref["met"] and ref["worst_fold"] <= check.TARGET_FOLD, ref


def test_nccl_tuning_model_pieces():
    """The published constants the predictions use, each visible in a prediction."""
    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.profiles import cluster, ll_max_busbw, net_plugin_latency

    efa, ib = cluster("aws-p5-efa"), cluster("dgx-h100-ib400")
    assert net_plugin_latency(efa) == 75e-6 and net_plugin_latency(ib) == 0.0
    # 8 B over 4 nodes: the switch tree (Simple) pays the plugin's latency twice per hop,
    # 2·lg 4 hops: the same layout on InfiniBand is 2·2·(2·75 us) faster
    opts = {"in_network": True, "ranks_per_node": 8}
    d = cluster_time("hierarchical", 32, 8, efa, opts) - cluster_time("hierarchical", 32, 8,
                                                                      ib, opts)
    assert d == pytest.approx(2 * 2 * (20.9e-6 + 150e-6) - 2 * 2 * 20.9e-6)
    # LL's bus bandwidth cap: one node by GPU generation, across nodes by the host CPU
    assert ll_max_busbw(ib, 1) == 141e9 and ll_max_busbw(ib, 4) == 20.4e9
    assert ll_max_busbw(efa, 2) == 22.5e9  # AMD host
    # a ring of 8 B over 2 A100 nodes (AMD host): every step at least NCCL's 2 us overhead
    a100 = cluster("dgx-a100-ib200")
    t = cluster_time("ring", 16, 8, a100, {"channels": "nics"})
    assert t == pytest.approx(6.6e-6 + 2 * 14 * 2.0e-6 + 2 * 1 * 2.7e-6, rel=1e-3)
    # and a ring's network hop is NCCL's ring one (2.7 us), not the tree's 5.0 us
    assert ib.link("inter")[0] == 2.7e-6


def test_summit_profile_is_its_user_guide():
    """Summit (the 2019 NCCL 2.4 runs): the OLCF guide's layout and rates, NCCL's Volta pieces."""
    from mpicomm.costmodel.profiles import cluster, ll_max_busbw, net_overhead

    c = cluster("summit-v100-edr")
    assert (c.ranks_per_node, c.nics_per_node, c.in_network) == (6, 2, None)
    assert c.intra.bytes_per_s == 50e9  # 2 NVLink 2 links x 25 GB/s per direction
    # two EDR rails at the guide's 23 GB/s node injection
    assert c.nics_per_node * c.inter.achieved_bytes_per_s == pytest.approx(23e9)
    assert c.gamma_s_per_byte == pytest.approx(3 / 900e9)  # V100 HBM2 900 GB/s
    # POWER9 host: not AMD, so NCCL's 1 us net overhead and the Intel row of the LL cap
    assert net_overhead(c) == 1e-6 and ll_max_busbw(c, 1) == 39.0e9
    assert ll_max_busbw(c, 2) == 39.0e9 and ll_max_busbw(c, 4096) == 20.4e9


def test_measured_from_busbw_and_the_score_responds(check):
    pt = {"gpus": 16, "bytes": 1 << 30, "busbw_gbps": 100.0}
    assert check.measured_us(pt) == pytest.approx((1 << 30) * 30 / 16 / 100e9 * 1e6)
    rows = check.evaluate(check.load())
    worst = max((r for r in rows if r["role"] == "score"), key=lambda r: r["fold"])
    bad = [dict(r, fold=10.0) if r is worst else r for r in rows]
    assert not check.score(bad)["met"]  # one point 10x off breaks the target


def test_forced_algorithm_is_compared_with_its_own_formula(check):
    rows = {r["id"]: r for r in check.evaluate(check.load())}
    assert rows["h100x8-ring-2G"]["strategy"] == "ring"
    assert rows["h100x8-nvls-2G"]["strategy"] == "hierarchical(nvls)"
    assert rows["h200x1984-512M"]["strategy"] in check.NCCL_ALGORITHMS


@pytest.mark.slow  # a subprocess: ~2 s
def test_command_prints_table_and_writes_json(tmp_path):
    out = tmp_path / "v.json"
    done = subprocess.run([sys.executable, str(CHECK), "--json", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    doc = json.loads(out.read_text())
    # the exit status and the printed verdict are the score's (0 and "targets met" only
    # when both of issue 30's targets are met)
    assert done.returncode == (0 if doc["score"]["met"] else 1), done.stdout + done.stderr
    assert "within 1.5x (target 85%: met)" in done.stdout
    assert ("targets met" if doc["score"]["met"] else "targets NOT met") in done.stdout
    assert "below expected" in done.stdout  # the reference figure is printed beside
    assert len(doc["rows"]) == len(json.loads((CHECK.parent / "points.json").read_text()))


def test_the_docs_table_formats_times_as_the_predictor_does(check):
    """check.py had its own time formatter beside the predictor's: a time of 1 s or more
    printed as "2.5e+03 ms" in docs/validation.md's table; now one formatter (units.fmt_us)."""
    from mpicomm.core.units import fmt_us

    points = check.load()
    row = dict(check.evaluate(points)[0], measured_us=2.5e6, predicted_us=999.96)
    line = check.markdown_table([row], points).splitlines()[-1]
    assert f"| {fmt_us(2.5e6)} | {fmt_us(999.96)} (" in line
    assert "| 2.5 s | 1 ms (" in line and "e+" not in line


def test_profiles_run_nccl_as_their_sources_configure_it():
    """Issue 30's calibration: three pieces of NCCL's own configuration the model had missed.

    A3 Mega runs NCCL with ring and tree, Simple only and no NVLink SHARP (Google's recipe,
    profiles S14), so its 8 B calibration row is read through the Simple tree; a Blackwell
    switch reduction reaches NCCL's nvlsEfficiency 0.74 where Hopper's is 0.85 (S15); ring
    Simple's plateau factor is 1.9 on Volta (S15). Each failed before (the A3 Mega profile
    had NVLS and LL, Blackwell Hopper's 275/450, Summit 1.4).
    """
    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.profiles import (
        NVLS_EFF,
        cluster,
        nccl_protocols,
        ring_simple_plateau,
    )

    mega = cluster("gcp-a3-mega")
    assert mega.in_network is None
    assert [p.name for p in nccl_protocols(mega)] == ["Simple"]
    assert cluster_time("hierarchical", 16, 8, mega, {"in_network": True}) is None
    # the calibration row: 8 B over 2 nodes x 8 through the Simple tree is the 135.8 us read
    t = cluster_time("tree", 16, 8, mega, {"ranks_per_node": 8})
    assert t == pytest.approx(135.8e-6, rel=1e-3)
    assert t == pytest.approx(8.4e-6 + 2 * (7 * 4.0e-6 + mega.link("inter")[0]), rel=1e-6)
    for name in ("dgx-b200-ib400", "gb200-nvl72"):
        assert cluster(name).in_network.efficiency == pytest.approx(NVLS_EFF * 0.74 / 0.85)
    assert cluster("dgx-h100-ib400").in_network.efficiency == pytest.approx(NVLS_EFF)
    assert ring_simple_plateau(cluster("summit-v100-edr")) == 1.9
    assert ring_simple_plateau(cluster("dgx-h100-ib400")) == 1.4


def test_a_run_on_nccl_2_4_takes_2_4s_own_latency_figures():
    """NCCL 2.4 predates the tuning model; its own figures (profiles S16, v2.4.2-1 init.cu
    ncclTreeThreshold): tree 15 us per log2(nodes) + 4 us per rank in a node, ring 6 us per
    rank, no per-call base, LL and Simple only. Failed before: every release took the
    current tuning model (Summit's 8 B trees 1.82-1.92x)."""
    from dataclasses import replace

    from mpicomm.costmodel.cluster_predict import cluster_time
    from mpicomm.costmodel.profiles import cluster, nccl_protocols, nccl_release

    summit = cluster("summit-v100-edr")
    v24 = replace(summit, nccl="2.4")
    assert [p.name for p in nccl_protocols(v24)] == ["LL", "Simple"]
    assert nccl_release("2.4.2") == "2.4" and nccl_release("2.3") == nccl_release("2.16.5") == ""
    for nodes in (512, 4096):  # 8 B: the latency is the whole time
        t = cluster_time("tree", 6 * nodes, 8, v24, {"ranks_per_node": 6})
        assert t == pytest.approx((15 * math.log2(nodes) + 4 * 5) * 1e-6, rel=1e-3)
    t = cluster_time("ring", 12, 8, v24, {"ranks_per_node": 6})  # 2 nodes
    assert t == pytest.approx(6 * 11 * 1e-6, rel=1e-3)
    # a release without figures of its own (2.3; 2.5 on) is the current model, unchanged
    for other in ("2.3", "2.16.5", ""):
        same = replace(summit, nccl=other)
        assert nccl_protocols(same) == nccl_protocols(summit)
        assert cluster_time("tree", 3072, 8, same, {}) == cluster_time("tree", 3072, 8, summit,
                                                                         {})
    assert "NCCL 2.4" in v24.line() and "NCCL" not in summit.line()


def test_one_process_driving_g_gpus_pays_g_launches_a_call(check):
    """nccl-tests -g G: one host thread launches a kernel on each GPU in turn and the
    iterations back to back (profiles S17), so a call takes at least G launches (device E2,
    3.0 us). Failed before: the one-channel A100 ring at 8 B (-g 8) was predicted 15 us,
    2.25x under its 33.7 us."""
    from mpicomm.costmodel.profiles import cluster, launch_floor

    a100 = cluster("dgx-a100-ib200")
    assert launch_floor(a100, 8) == pytest.approx(8 * a100.device.launch_s)
    assert a100.device.launch_s == 3.0e-6 and launch_floor(a100, 1) == 3.0e-6
    pt = next(p for p in check.load() if p["id"] == "a100x8-ring1ch-8")
    assert pt["gpus_per_process"] == 8 and "-g GPU_NUM" in pt["quote"]
    assert check.predictions(pt)["ring"] == pytest.approx(24e-6)
    alone = check.predictions({**pt, "gpus_per_process": 1})["ring"]
    assert alone == pytest.approx((6.6 + 14 * 0.6) * 1e-6, rel=1e-3)  # NCCL's model alone


def test_breakdown_is_the_prediction_protocol_by_protocol(check):
    """``--breakdown``: each NCCL algorithm's fastest protocol is the prediction scored, on
    every point (a protocol table that drifts from the scored model fails here)."""
    for pt in check.load():
        pred, parts = check.predictions(pt), check.breakdown(pt)
        for label in check.NCCL_ALGORITHMS:
            mine = [t for k, t in parts.items() if k.rsplit("/", 1)[0] == label]
            assert bool(mine) == (label in pred), (pt["id"], label)
            if mine:
                assert min(mine) == pytest.approx(pred[label], rel=1e-12), (pt["id"], label)
    h20 = {pt["id"]: pt for pt in check.load()}["h20x16-default-1048576"]
    parts = check.breakdown(h20)
    assert {k.split("/")[1] for k in parts} == {"LL", "LL128", "Simple"}
    assert len(parts) == 7  # ring and tree x 3 protocols, the switch tree (Simple only)


def test_breakdown_command(tmp_path):
    out = subprocess.run([sys.executable, str(CHECK), "--breakdown", "h20x16-default-1048576"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "measured 121.8us" in lines[0] and len(lines) == 8
    times = [float(line.split()[1].removesuffix("us")) for line in lines[1:]]
    assert times == sorted(times)  # fastest first
    bad = subprocess.run([sys.executable, str(CHECK), "--breakdown", "no-such-point"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown point" in bad.stderr
