"""model --predict: link parsing, formulas by hand, limits in p and n, profiles, the command.

The hand-computed values follow the cluster model (``costmodel.cluster_predict``). Three
of them changed with issue 18, each because the old test encoded a cause of error the
issue lists: the ring paid the inter-node α on all 2(p-1) steps (now 2(m-1) of them), its
add was serial (now overlapped: max(β, γ)), and one server pushed then pulled on a
half-duplex link (now both directions at once).
"""

import dataclasses
import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT

from mpicomm.bench.predict import (
    Variant,
    busbw_factor,
    default_variants,
    parse_link_text,
    predict_rows,
    summary,
)
from mpicomm.bench.profiles import (
    PROFILES,
    measured_params,
    profile,
)
from mpicomm.cli.predict import run_predict
from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.cluster import Cluster, Link
from mpicomm.costmodel.cluster_formulas import hierarchical_pipelined_time
from mpicomm.costmodel.formulas import LinkModel, ModelParams, ring_time

N = 64 << 20
# 8 ranks a node, α 1 µs / 100 GB/s inside, α 10 µs / 10 GB/s between, γ 1/(1 TB/s), 8 NICs
PROF = Cluster("test", 8, Link(1e-6, 100e9), Link(10e-6, 10e9), 1e-12, 8)


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
    level = parse_link_text(text)
    assert level.alpha_s == pytest.approx(alpha) and level.bytes_per_s == pytest.approx(rate)


@pytest.mark.parametrize("text", ["5us", "5xs,1GB/s", "5us,1GBs", "5us,0GB/s", "-1us,1GB/s",
                                  "5us,1GB/s,3", "", "us,1GB/s", "5us,1.2.3GB/s"])
def test_bad_link_is_a_clear_error(text):
    with pytest.raises(ConfigError, match="link"):
        parse_link_text(text)


def test_against_hand_computed_formulas():
    rows = rows_by(PROF, [8, 16], [N])
    b_in, b_out = 1 / 100e9, 1 / 10e9
    # one node of 8: 2·7 intra steps; the reduce-scatter half adds as it receives, and the
    # add (γ = 1e-12) hides behind the link (β = 1e-11): 2·7/8·N·β_in
    ring8 = 2 * 7 * 1e-6 + 2 * 7 / 8 * N * b_in
    assert rows[("ring", 8, N)]["predicted_us"] == pytest.approx(ring8 * 1e6)
    # two nodes: 2·14 intra hops and 2·1 inter hops; one flow through one NIC paces the bytes
    lat16 = 2 * 14 * 1e-6 + 2 * 1 * 10e-6
    ring16 = lat16 + 2 * 15 / 16 * N * b_out
    assert rows[("ring(channels=1)", 16, N)]["predicted_us"] == pytest.approx(ring16 * 1e6)
    assert rows[("ring(channels=1)", 16, N)]["latency_us"] == pytest.approx(lat16 * 1e6)
    # the default ring on 8 NICs runs 8 channels: each NIC carries 1/8 of the crossing bytes
    multi = lat16 + 2 * 15 / 16 * N * max(b_in, b_out / 8)
    assert rows[("ring", 16, N)]["predicted_us"] == pytest.approx(multi * 1e6)
    # tree: 2·(7 α_in + lg 2·α_out); the in-node chain moves 2N, the two nodes swap N/8 per NIC
    tree = 2 * (7 * 1e-6 + 10e-6) + max(2 * N * b_in, N * b_out / 8)
    assert rows[("tree", 16, N)]["predicted_us"] == pytest.approx(tree * 1e6)
    # hierarchical 2 x 8, pipelined: max(intra 2·7/8·N·β_in, inter 2·1/2·(N/8)·β_out)
    hier = 2 * 7 * 1e-6 + 2 * 10e-6 + max(2 * 7 / 8 * N * b_in, N / 8 * b_out)
    assert rows[("hierarchical", 16, N)]["predicted_us"] == pytest.approx(hier * 1e6)
    # one server, mpicomm's ps as the clock runs it: the 8 pushes from the other node queue on
    # the server's NIC (its node's one server: the NIC is its own) in 1 MiB rounds, then its 8
    # answers leave the same way: 2·8·N·β_out, α a round and the pull, and the last round's
    # 15 adds before the answers (the others overlap the next round)
    piece = 1 << 20
    ps = (N // piece + 1) * 10e-6 + 2 * 8 * N * b_out + 15 * piece * 1e-12
    assert rows[("ps(S=1)", 16, N)]["predicted_us"] == pytest.approx(ps * 1e6)
    # S = p: each server takes its 8 remote workers' N/16 and answers them on its own NIC (8
    # a node, one a rank): 2·8·(N/16)·β_out, where one ring crosses at one rank: 2·15/16·N·β_out
    assert rows[("ps(S=p)", 16, N)]["bandwidth_us"] == pytest.approx(
        2 * 8 * N / 16 * b_out * 1e6, rel=1e-2)  # + the last round's adds, the rounds' α
    # no reducing switch in this profile: no hierarchical(nvls) row
    assert ("hierarchical(nvls)", 16, N) not in rows
    # busbw = n/t · 2(p-1)/p
    r = rows[("ring(channels=1)", 16, N)]
    assert r["busbw_gbps"] == pytest.approx(N / ring16 / 1e9 * 30 / 16)


def test_summary_names_the_fastest():
    rows = predict_rows(PROF, [16, 1024], [8, N])
    best = {(b["ranks"], b["bytes"]): b for b in summary(rows)}
    assert len(best) == 4
    for (p, n), b in best.items():
        times = [r["predicted_us"] for r in rows if r["ranks"] == p and r["bytes"] == n]
        assert b["predicted_us"] == min(times)
        assert b["runner_up_ratio"] >= 1.0
    assert best[(1024, N)]["strategy"] in ("tree", "hierarchical")  # latency at scale


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
    # one server: every rank added off its node queues one more push and one more answer on
    # its NIC, 2·N·β_out (and one more add): the time is affine in p, the same for each rank
    base = rows[("ps(S=1)", 16, N)]["predicted_us"]
    per_rank = [(rows[("ps(S=1)", p, N)]["predicted_us"] - base) / (p - 16) for p in ranks[1:]]
    assert max(per_rank) == pytest.approx(min(per_rank), rel=1e-9)
    assert per_rank[0] == pytest.approx(2 * N / 10e9 * 1e6, rel=1e-3)
    ring_bytes = [rows[("ring(channels=1)", p, N)]["bandwidth_us"] for p in ranks]
    assert ring_bytes == sorted(ring_bytes)  # 2(p-1)/p rises towards 2 ...
    assert ring_bytes[-1] / ring_bytes[0] < (2 * 4095 / 4096) / (2 * 15 / 16) + 1e-9  # ... barely
    # latency along the ring's path: 2(p-m) intra and 2(m-1) inter hops, m = p/8: linear in p
    ring_lat = [rows[("ring(channels=1)", p, N)]["latency_us"] for p in ranks]
    assert ring_lat == pytest.approx([(2 * (p - p // 8) * 1e-6 + 2 * (p // 8 - 1) * 10e-6) * 1e6
                                      for p in ranks])
    # with α negligible and the add hidden behind the link, the ring's busbw tends to 1/β
    big = rows_by(dataclasses.replace(PROF, inter=Link(0.0, 10e9), intra=Link(0.0, 100e9)),
                  [1024], [N])
    assert big[("ring(channels=1)", 1024, N)]["busbw_gbps"] == pytest.approx(10.0)


def test_latency_and_bandwidth_limits():
    small, large = 8, 1 << 30
    rows = rows_by(PROF, [64], [small, large])
    for v in default_variants():
        if (v.label, 64, small) not in rows:  # hierarchical(nvls): no switch here
            continue
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
    # one NIC for 8 ranks: the 8 inter rings of hierarchical share it (β × 8), the flat
    # ring crosses each node boundary with one flow, and 8 channels gain nothing over 1 NIC
    one_nic = dataclasses.replace(PROF, nics_per_node=1)
    rows = rows_by(one_nic, [32], [N])
    hier = 2 * 7 * 1e-6 + 2 * 3 * 10e-6 + max(2 * 7 / 8 * N / 100e9, 2 * 3 / 4 * N / 8 * 8 / 10e9)
    assert rows[("hierarchical", 32, N)]["predicted_us"] == pytest.approx(hier * 1e6)
    assert hier == pytest.approx(hierarchical_pipelined_time(
        N, 8, 4, (1e-6, 1 / 100e9), (10e-6, 1 / 10e9), 1e-12, nics=1))
    ring = 2 * 28 * 1e-6 + 2 * 3 * 10e-6 + 2 * 31 / 32 * N / 10e9
    assert rows[("ring", 32, N)]["predicted_us"] == pytest.approx(ring * 1e6)
    assert ("ring(channels=1)", 32, N) not in rows  # one NIC: the default ring is one channel


def test_every_profile_loads_and_predicts():
    for name in PROFILES:
        prof = profile(name)
        assert prof.inter.bytes_per_s < prof.intra.bytes_per_s and prof.source
        rows = predict_rows(prof, [8, 1024], [N])
        applies = (len(default_variants()) - (0 if prof.in_network else 1)  # hierarchical(nvls)
                   - (prof.channel_count == 1))  # ring(channels=1): only beside a multi-NIC ring
        assert len(rows) == 2 * applies
        assert all(r["predicted_us"] > 0 and r["busbw_gbps"] > 0 for r in rows)
    assert profile("dgx-h100-ib400").inter.bytes_per_s == pytest.approx(400e9 / 8)
    assert profile("dgx-h100-ib200").inter.bytes_per_s == pytest.approx(200e9 / 8)
    assert profile("dgx-h100-ib400").intra.bytes_per_s == pytest.approx(900e9 / 2)
    assert profile("dgx-b200-ib400").intra.bytes_per_s == pytest.approx(1.8e12 / 2)
    for name in ("ethernet-25g", "ethernet-100g", "gcp-a3-mega"):  # not at line rate
        assert profile(name).inter.efficiency < 1
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


def test_table_flag_prints_every_row_and_per_size_winners(tmp_path):
    done = _predict("--ranks", "8,64", "-b", "1M", "-e", "16M", "-f", "16", "--table")
    assert done.returncode == 0, done.stderr
    assert "fastest predicted strategy per (ranks, size)" in done.stdout
    rows = [ln for ln in done.stdout.splitlines() if ln and not ln.startswith("#")]
    assert len(rows) == 2 * 2 * len(default_variants())


@pytest.mark.slow
def test_command_one_process_no_mpiexec(tmp_path):
    out = tmp_path / "p.json"
    done = _predict("--ranks", "8,64,1024", "-b", "1M", "-e", "16M", "-f", "16",
                    "--compute-ms", "50", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "profile dgx-h100-ib400" in done.stdout
    assert "fastest predicted strategy (--table" in done.stdout
    lines = [ln for ln in done.stdout.splitlines() if " ranks: fastest " in ln]
    assert [ln.split(" ranks:")[0].strip("# ") for ln in lines] == ["8", "64", "1024"]
    assert len(done.stdout.splitlines()) < 10  # a summary, not the table
    doc = json.loads(out.read_text())
    assert len(doc["summary"]) == 3 * 2  # one best per (ranks, size)
    assert doc["command"] == "predict" and doc["compute_ms"] == 50
    assert len(doc["results"]) == 3 * 2 * len(default_variants())  # dgx: 8 NICs, both rings
    assert "ring(channels=1): the single-channel ring" in done.stdout
    r = next(r for r in doc["results"] if r["strategy"] == "ring" and r["ranks"] == 1024)
    assert r["nodes"] == 128 and r["ranks_per_node"] == 8
    # explicit links: mpicomm's own step-by-step reducers on them, one NIC per rank (the
    # cluster every command builds from the same flags: build_cluster)
    done = _predict("--ranks", "16", "-b", "1M", "-e", "1M", "--inter-link", "10us,10GB/s",
                    "--intra-link", "1us,100GB/s", "--ranks-per-node", "8", "--gamma-rate",
                    "1TB/s", "--nics-per-node", "8", "--strategies", "ring,hierarchical",
                    "--json", str(out))
    assert done.returncode == 0, done.stderr
    got = {r["strategy"]: r["predicted_us"] for r in json.loads(out.read_text())["results"]}
    from mpicomm.costmodel.profiles import build_cluster

    flags = build_cluster(ranks_per_node=8, inter="10us,10GB/s", intra="1us,100GB/s",
                          gamma_s_per_byte=1e-12, nics_per_node=8)
    assert not flags.pipelined and flags.channel_count == 1
    want = rows_by(flags, [16], [1 << 20])
    assert got["ring"] == pytest.approx(want[("ring", 16, 1 << 20)]["predicted_us"])
    assert got["hierarchical"] == pytest.approx(want[("hierarchical", 16, 1 << 20)]
                                                ["predicted_us"])


@pytest.mark.slow  # the default tier's time budget (docs/testing.md)
def test_command_this_machine_and_errors(tmp_path):
    path = _model_json(tmp_path)
    done = _predict("--profile", "this-machine", "--params", str(path), "--ranks", "2,4",
                    "-b", "1M", "-e", "1M", "--table")
    assert done.returncode == 0, done.stderr
    assert "this-machine" in done.stdout and "ring" in done.stdout
    for args, message in [(["--profile", "nope"], "unknown profile 'nope'"),
                          (["--inter-link", "5us,25GBs"], "expected LATENCY,BANDWIDTH"),
                          (["--ranks", "0,4"], "rank counts >= 1"),
                          (["--strategies", "ring,rung"], "unknown strategy 'rung'"),
                          (["--compute-ms", "-1"], "--compute-ms must be a number >= 0")]:
        done = _predict(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_busbw_factor():
    assert busbw_factor(2) == 1.0 and busbw_factor(4) == 1.5 and busbw_factor(1) == 1.0


def test_csv_alone_is_written(tmp_path, capsys):
    """``--predict --csv F`` without ``--json`` writes F (it wrote nothing: only --json did)."""
    from mpicomm.cli.main import build_parser

    out = tmp_path / "p.csv"
    args = build_parser().parse_args(["model", "--predict", "--ranks", "8", "-b", "1M", "-e",
                                      "1M", "--strategies", "ring,tree", "--csv", str(out)])
    assert run_predict(args) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("strategy,ranks,bytes") and len(lines) == 1 + 2, lines
    assert {ln.split(",")[0] for ln in lines[1:]} == {"ring", "tree"}


def _model_args(*argv: str):
    """``model``'s flags parsed (its parser alone: cheaper than the whole command line's)."""
    import argparse

    from mpicomm.cli import model as model_cmd

    parser = argparse.ArgumentParser()
    model_cmd.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("argv, refused", [
    (["-n", "5", "--rounds", "2"], ["-n (measuring only)", "--rounds (measuring only)"]),
    (["--compress", "int8", "--baseline", "ring"], ["--baseline", "--compress"]),
    (["--servers", "4"], ["--servers (with --strategies only)"]),
    (["--gamma-rate", "1TB/s"], ["--gamma-rate (explicit links only"]),
    (["--params", "x.json"], ["--params (--profile this-machine only)"]),
    (["--profile", "this-machine", "--inter-link", "5us,1GB/s"], ["--inter-link (not with"]),
    (["--links-from", "this-machine"], ["--links-from (measuring only)"]),
])
def test_predict_refuses_flags_it_does_not_read(argv, refused):
    """They were silently ignored: `model --predict -n 5` printed the same table as without."""
    from mpicomm.cli import model as model_cmd

    args = _model_args("--predict", *argv)
    with pytest.raises(ConfigError, match="cannot take effect") as err:
        model_cmd.run(args)
    assert all(r in str(err.value) for r in refused), str(err.value)


@pytest.mark.parametrize("argv", [
    [],  # the defaults
    ["--strategies", "ps", "--servers", "4", "--dedicated", "--variant", "leader"],
    ["--inter-link", "5us,25GB/s", "--gamma-rate", "1TB/s", "--nics-per-node", "2"],
    ["--profile", "this-machine", "--params", "x.json", "--ranks-per-node", "2"],
    ["--ranks", "8,64", "--table", "--compute-ms", "5", "--json", "p.json", "--csv", "p.csv"],
])
def test_predict_accepts_the_flags_it_reads(argv):
    from mpicomm.cli.model import unused_flags

    assert unused_flags(_model_args("--predict", *argv)) == []


def test_measuring_model_names_the_predict_only_flags():
    from mpicomm.cli.model import unused_flags

    args = _model_args("--ranks", "64", "--profile", "gb200-nvl72", "--table", "--compute-ms",
                       "5", "-n", "3")
    assert unused_flags(args) == ["--ranks (--predict only)", "--table (--predict only)",
                                  "--compute-ms (--predict only)"]  # --profile: every command
    assert unused_flags(_model_args("-n", "3", "--clock", "virtual")) == []


def test_times_just_under_a_unit_print_in_the_next_unit():
    """`--predict --profile aws-p5-efa --ranks 64 -b 64M -e 64M` printed the tree's 999.96 us
    as "1e+03 us"."""
    from mpicomm.core.units import fmt_us as _fmt_time

    assert _fmt_time(999.96) == "1 ms" and _fmt_time(999_960.0) == "1 s"
    assert _fmt_time(998.4) == "998 us" and _fmt_time(1234.0) == "1.23 ms"


def test_table_at_one_rank_prints_a_tie():
    """`--predict --ranks 1 --table` ended in a TypeError (no ratio between two 0 s times)."""
    from mpicomm.bench.predict import format_summary

    rows = predict_rows(profile("dgx-h100-ib400"), [1], [1 << 20],
                        [Variant("ring", "ring", {}), Variant("tree", "tree", {})])
    assert [r["predicted_us"] for r in rows] == [0, 0]
    assert "1048576 B: ring 0 us; a tie with tree (nothing moves)" in format_summary(
        summary(rows))


def test_a_strategy_named_twice_is_predicted_once(tmp_path):
    """`--strategies ring,ring` printed every row twice and 'ring 28 us; next ring 1.00x'."""
    out = tmp_path / "p.json"
    args = _model_args("--predict", "--ranks", "8", "-b", "1M", "-e", "1M", "--strategies",
                       "ring,tree,ring", "--json", str(out))
    assert run_predict(args) == 0
    doc = json.loads(out.read_text())
    assert [r["strategy"] for r in doc["results"]] == ["ring", "tree"]
    assert doc["summary"][0]["runner_up"] == "tree"


@pytest.mark.parametrize("argv, refused", [
    (["--compute-scale", "3"], "--compute-scale (measuring only)"),
    (["--compute-scale", "3", "--clock", "virtual"], "--compute-scale (measuring only)"),
    (["--links-from", "this-machine"], "--links-from (measuring only)"),
])
def test_predict_refuses_clock_flags_without_sending_the_user_in_a_circle(argv, refused):
    """`model --predict --compute-scale 3` said "virtual-clock only ...; add --clock virtual",
    and with --clock virtual: "--clock (measuring only) ...; drop it". A predict run installs
    no clock: its one refusal names every flag it does not read."""
    from mpicomm.cli.main import COMMANDS, _run, build_parser

    args = build_parser().parse_args(["model", "--predict", *argv])
    with pytest.raises(ConfigError) as err:
        _run(COMMANDS["model"], args)
    assert refused in str(err.value) and "add --clock virtual" not in str(err.value)


@pytest.mark.parametrize("argv, message", [
    (["--compute-ms", "nan"], "--compute-ms must be a number >= 0, got nan"),
    (["--compute-ms", "inf"], "--compute-ms must be a number >= 0, got inf"),
    (["--inter-link", "20us,1GB/s", "--gamma-rate", "0"],
     "--gamma-rate '0': expected an add rate > 0"),
])
def test_predict_refuses_values_that_make_no_number(argv, message):
    """--compute-ms nan printed a table of nan steps (exit 0); --gamma-rate 0 was refused as
    "link='0s,0': expected LATENCY,BANDWIDTH", a link the user never wrote."""
    from mpicomm.cli.main import build_parser

    args = build_parser().parse_args(["model", "--predict", "--ranks", "8", "-b", "1M",
                                      "-e", "1M", *argv])
    with pytest.raises(ConfigError) as err:
        run_predict(args)
    assert message in str(err.value)
