"""The cluster model against published all-reduce measurements (experiments/validation).

Runs check.py's core on points.json and asserts issue 18's targets, so a model change that
breaks them fails here; checks that every point carries its source and quote, and that the
score really is computed from the rows (a point moved out of range fails it).
"""

import importlib.util
import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT

CHECK = ROOT / "experiments" / "validation" / "check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("validation_check", CHECK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_points_are_sourced_and_span_the_range(check):
    points = check.load()
    assert len(points) >= 20
    for pt in points:
        assert pt["url"].startswith("https://github.com/"), pt["id"]
        assert pt["quote"] and pt["source"] and pt["profile"], pt["id"]
        assert (pt.get("time_us") is None) != (pt.get("busbw_gbps") is None), pt["id"]
        assert pt["role"] in ("score", "calibration", "excluded"), pt["id"]
        assert pt["role"] == "score" or pt.get("note"), pt["id"]  # a reason when not scored
        assert pt["gpus"] == pt["nodes"] * pt["gpus_per_node"], pt["id"]
    scored = [p for p in points if p["role"] == "score"]
    assert len(scored) >= 20
    assert min(p["gpus"] for p in scored) == 8 and max(p["gpus"] for p in scored) >= 1024
    assert min(p["bytes"] for p in scored) <= 8 and max(p["bytes"] for p in scored) >= 1 << 33


def test_targets_met(check):
    s = check.score(check.evaluate(check.load()))
    assert s["within_1_5x"] >= check.TARGET_SHARE, s
    assert s["worst_fold"] <= check.TARGET_FOLD, s
    assert s["met"]


def test_measured_from_busbw_and_the_score_responds(check):
    pt = {"gpus": 16, "bytes": 1 << 30, "busbw_gbps": 100.0}
    assert check.measured_us(pt) == pytest.approx((1 << 30) * 30 / 16 / 100e9 * 1e6)
    rows = check.evaluate(check.load())
    worst = max((r for r in rows if r["role"] == "score"), key=lambda r: r["fold"])
    bad = [dict(r, fold=10.0) if r is worst else r for r in rows]
    assert not check.score(bad)["met"]  # one point 10x off breaks the target


def test_forced_algorithm_is_compared_with_its_own_formula(check):
    rows = {r["id"]: r for r in check.evaluate(check.load())}
    assert rows["h100x8-ring-2G"]["strategy"] == "ring(channels=nics)"
    assert rows["h100x8-nvls-2G"]["strategy"] == "hierarchical(nvls)"
    assert rows["h200x1984-512M"]["strategy"] in check.NCCL_ALGORITHMS


def test_command_prints_table_and_writes_json(tmp_path):
    out = tmp_path / "v.json"
    done = subprocess.run([sys.executable, str(CHECK), "--json", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "within 1.5x" in done.stdout and ": met" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["score"]["met"] and len(doc["rows"]) == len(json.loads(
        (CHECK.parent / "points.json").read_text()))
