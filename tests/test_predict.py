"""model --predict: link parsing, formulas by hand, limits in p and n, profiles, the command."""

import dataclasses
import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT

from mpicomm.bench.predict import (
    Variant,
    _parse_link,
    _profile_params,
    busbw_factor,
    default_variants,
    predict_rows,
)
from mpicomm.bench.profiles import (
    PROFILES,
    Level,
    Profile,
    measured_params,
    profile,
)
from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.formulas import LinkModel, ModelParams, hierarchical_time, ring_time

N = 64 << 20
# 8 ranks a node, α 1 µs / 100 GB/s inside, α 10 µs / 10 GB/s between, γ 1/(1 TB/s), 8 NICs
PROF = Profile("test", 8, Level(1e-6, 100e9), Level(10e-6, 10e9), 1e-12, 8)


def rows_by(source, ranks, sizes, variants=None, **kw):
    return {(r["strategy"], r["ranks"], r["bytes"]): r
            for r in predict_rows(source, ranks, sizes, variants, **kw)}


@pytest.mark.parametrize("text, alpha, rate", [
    ("20us,1GB/s", 20e-6, 1e9),
    ("1.5us,400Gb/s", 1.5e-6, 50e9),
    ("5ms, 25MB/s", 5e-3, 25e6),
    ("100ns,10KB/s", 100e-9, 10e3),
    ("0s,3TB/s", 0.0, 3e12),
    ("2µs,8Mb/s", 2e-6, 1e6),
    ("1s,7B/s", 1.0, 7.0),
])
def test_parse_link(text, alpha, rate):
    level = _parse_link(text)
    assert level.alpha_s == pytest.approx(alpha) and level.bytes_per_s == pytest.approx(rate)


@pytest.mark.parametrize("text", ["5us", "5xs,1GB/s", "5us,1GBs", "5us,0GB/s", "-1us,1GB/s",
                                  "5us,1GB/s,3", "", "us,1GB/s", "5us,1.2.3GB/s"])
def test_bad_link_is_a_clear_error(text):
    with pytest.raises(ConfigError, match="link"):
        _parse_link(text)


def test_against_hand_computed_formulas():
    rows = rows_by(PROF, [8, 16], [N])
    b_in, b_out, g = 1 / 100e9, 1 / 10e9, 1e-12
    # one node of 8: the ring runs on the intra link
    ring8 = 2 * 7 * 1e-6 + 2 * 7 / 8 * N * b_in + 7 / 8 * N * g
    assert rows[("ring", 8, N)]["predicted_us"] == pytest.approx(ring8 * 1e6)
    # two nodes: every flat step at the inter link's α and β
    ring16 = 2 * 15 * 10e-6 + 2 * 15 / 16 * N * b_out + 15 / 16 * N * g
    assert rows[("ring", 16, N)]["predicted_us"] == pytest.approx(ring16 * 1e6)
    assert rows[("ring", 16, N)]["latency_us"] == pytest.approx(2 * 15 * 10e-6 * 1e6)
    # hierarchical 2 x 8: ring(8, n) intra + ring(2, n/8) inter
    hier = ring_time(8, N, 1e-6, b_in, g) + ring_time(2, N / 8, 10e-6, b_out, g)
    assert rows[("hierarchical", 16, N)]["predicted_us"] == pytest.approx(hier * 1e6)
    # one server: 2(p-1)α + 2(p-1)nβ + (p-1)nγ
    ps = 2 * 15 * 10e-6 + 2 * 15 * N * b_out + 15 * N * g
    assert rows[("ps(S=1)", 16, N)]["predicted_us"] == pytest.approx(ps * 1e6)
    # S = p moves the ring's bytes
    assert rows[("ps(S=p)", 16, N)]["predicted_us"] == pytest.approx(ring16 * 1e6)
    # busbw = n/t · 2(p-1)/p
    r = rows[("ring", 16, N)]
    assert r["busbw_gbps"] == pytest.approx(N / ring16 / 1e9 * 30 / 16)


def test_step_time_and_efficiency():
    r = rows_by(PROF, [16], [N], compute_s=0.1)[("ring", 16, N)]
    t = r["predicted_us"] / 1e6
    assert r["step_time_ms"] == pytest.approx((0.1 + t) * 1e3)
    assert r["step_time_overlap_ms"] == pytest.approx(max(0.1, t) * 1e3)
    assert r["efficiency"] == pytest.approx(0.1 / (0.1 + t))
    assert rows_by(PROF, [16], [N])[("ring", 16, N)]["efficiency"] is None


def test_one_server_grows_linearly_and_ring_bytes_stay_flat():
    ranks = [16, 32, 64, 128, 256, 512, 1024, 4096]
    rows = rows_by(PROF, ranks, [N])
    per_peer = [rows[("ps(S=1)", p, N)]["predicted_us"] / (p - 1) for p in ranks]
    assert max(per_peer) == pytest.approx(min(per_peer), rel=1e-9)  # exactly (p-1)·const
    ring_bytes = [rows[("ring", p, N)]["bandwidth_us"] for p in ranks]
    assert ring_bytes == sorted(ring_bytes)  # 2(p-1)/p rises towards 2 ...
    assert ring_bytes[-1] / ring_bytes[0] < (2 * 4095 / 4096) / (2 * 15 / 16) + 1e-9  # ... barely
    ring_lat = [rows[("ring", p, N)]["latency_us"] for p in ranks]
    assert ring_lat[-1] / ring_lat[0] == pytest.approx(4095 / 15)  # 2(p-1)α: linear
    # the ring's busbw tends to 1/(β + γ/2) of the inter link when α is negligible
    big = rows_by(dataclasses.replace(PROF, inter=Level(0.0, 10e9)), [1024], [N])
    assert big[("ring", 1024, N)]["busbw_gbps"] == pytest.approx(1 / (1 / 10e9 + 0.5e-12) / 1e9)


def test_latency_and_bandwidth_limits():
    small, large = 8, 1 << 30
    rows = rows_by(PROF, [64], [small, large])
    for v in default_variants():
        lo, hi = rows[(v.label, 64, small)], rows[(v.label, 64, large)]
        assert lo["latency_us"] / lo["predicted_us"] > 0.95, v.label  # tiny n: all α
        assert hi["latency_us"] / hi["predicted_us"] < 0.05, v.label  # 1 GiB: all β
    # recursive doubling beats the ring on small messages and loses on large ones
    assert rows[("recursive_doubling", 64, small)]["predicted_us"] < \
        rows[("ring", 64, small)]["predicted_us"]
    assert rows[("recursive_doubling", 64, large)]["predicted_us"] > \
        rows[("ring", 64, large)]["predicted_us"]


def test_hierarchical_inside_one_node_is_the_ring_and_nics_are_shared():
    rows = rows_by(PROF, [4, 8], [N])
    for p in (4, 8):
        assert rows[("hierarchical", p, N)]["predicted_us"] == pytest.approx(
            rows[("ring", p, N)]["predicted_us"])
    # one NIC for 8 ranks: all 8 inter rings of hierarchical share it (β × 8); the flat
    # ring crosses each node boundary with one flow (β × 1)
    one_nic = dataclasses.replace(PROF, nics_per_node=1)
    rows = rows_by(one_nic, [32], [N])
    b_out = 8 / 10e9
    hier = hierarchical_time(N, 8, 4, (1e-6, 1 / 100e9), (10e-6, b_out), 1e-12)
    assert rows[("hierarchical", 32, N)]["predicted_us"] == pytest.approx(hier * 1e6)
    assert rows[("ring", 32, N)]["predicted_us"] == pytest.approx(
        ring_time(32, N, 10e-6, 1 / 10e9, 1e-12) * 1e6)
    assert _profile_params(one_nic, 32, share=True).inter.beta_at(N) == pytest.approx(b_out)


def test_every_profile_loads_and_predicts():
    for name in PROFILES:
        prof = profile(name)
        assert prof.inter.bytes_per_s < prof.intra.bytes_per_s and prof.source
        rows = predict_rows(prof, [8, 1024], [N])
        assert len(rows) == 2 * len(default_variants())
        assert all(r["predicted_us"] > 0 and r["busbw_gbps"] > 0 for r in rows)
    assert profile("dgx-h100-ib400").inter.bytes_per_s == pytest.approx(400e9 / 8)
    assert profile("dgx-h100-ib200").inter.bytes_per_s == pytest.approx(200e9 / 8)
    assert profile("dgx-h100-ib400").intra.bytes_per_s == pytest.approx(900e9 / 2)
    with pytest.raises(ConfigError, match="valid profiles: dgx-h100-ib400"):
        profile("dgx-h200")


def _model_json(tmp_path, alpha=2e-6, beta=1e-10, gamma=2e-10):
    link = LinkModel(alpha, [1024, 1 << 24], [beta, beta], beta, (0, 1), [beta, beta], alpha,
                     beta)
    params = ModelParams(link, link, [1024, 1 << 24], [gamma, gamma], 1, 2)
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"command": "model", "params": dataclasses.asdict(params),
                                "results": []}))
    return path


def test_this_machine_from_saved_params(tmp_path):
    path = _model_json(tmp_path)
    params, used = measured_params(str(path))
    assert used == str(path)
    ring = Variant("ring", "ring", {}, False)
    r = predict_rows(params, [2], [1 << 20], [ring])[0]
    assert r["predicted_us"] == pytest.approx(ring_time(2, 1 << 20, 2e-6, 1e-10, 2e-10) * 1e6)
    with pytest.raises(ConfigError, match="no saved model parameters"):
        measured_params(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text('{"results": []}')
    with pytest.raises(ConfigError, match="not a 'mpicomm model --json' file"):
        measured_params(str(tmp_path / "bad.json"))


def _predict(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "mpicomm", "model", "--predict", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_command_one_process_no_mpiexec(tmp_path):
    out = tmp_path / "p.json"
    done = _predict("--ranks", "8,64,1024", "-b", "1M", "-e", "16M", "-f", "16",
                    "--compute-ms", "50", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "profile dgx-h100-ib400" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["command"] == "predict" and doc["compute_ms"] == 50
    assert len(doc["results"]) == 3 * 2 * len(default_variants())
    r = next(r for r in doc["results"] if r["strategy"] == "ring" and r["ranks"] == 1024)
    assert r["nodes"] == 128 and r["ranks_per_node"] == 8
    # explicit links: the same numbers as a profile holding them
    done = _predict("--ranks", "16", "-b", "1M", "-e", "1M", "--inter-link", "10us,10GB/s",
                    "--intra-link", "1us,100GB/s", "--ranks-per-node", "8", "--gamma-rate",
                    "1TB/s", "--nics-per-node", "8", "--strategies", "ring,hierarchical",
                    "--json", str(out))
    assert done.returncode == 0, done.stderr
    got = {r["strategy"]: r["predicted_us"] for r in json.loads(out.read_text())["results"]}
    want = rows_by(PROF, [16], [1 << 20])
    assert got["ring"] == pytest.approx(want[("ring", 16, 1 << 20)]["predicted_us"])
    assert got["hierarchical"] == pytest.approx(want[("hierarchical", 16, 1 << 20)]
                                                ["predicted_us"])


def test_command_this_machine_and_errors(tmp_path):
    path = _model_json(tmp_path)
    done = _predict("--profile", "this-machine", "--params", str(path), "--ranks", "2,4",
                    "-b", "1M", "-e", "1M")
    assert done.returncode == 0, done.stderr
    assert "this-machine" in done.stdout and "ring" in done.stdout
    for args, message in [(["--profile", "nope"], "unknown profile 'nope'"),
                          (["--inter-link", "5us,25GBs"], "expected LATENCY,BANDWIDTH"),
                          (["--ranks", "0,4"], "rank counts >= 1"),
                          (["--strategies", "ring,rung"], "unknown strategy 'rung'"),
                          (["--compute-ms", "-1"], "--compute-ms must be >= 0")]:
        done = _predict(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_busbw_factor():
    assert busbw_factor(2) == 1.0 and busbw_factor(4) == 1.5 and busbw_factor(1) == 1.0
