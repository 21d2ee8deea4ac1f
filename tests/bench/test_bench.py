"""bench: records and table, #wrong on a broken strategy, clear errors; unit parts serially."""

import csv
import json
import re

import numpy as np
import pytest
from mpi_harness import SCRIPTS, load_script, run_mpi

from mpicomm.bench.allreduce import PERIOD, rank_block, tile
from mpicomm.bench.harness import RECORD_KEYS, count_wrong, memory_problem, parse_bytes, size_list

BENCH = ["-m", "mpicomm", "bench"]


def test_sizes_and_units():
    assert parse_bytes("8") == 8 and parse_bytes("4K") == 4096 and parse_bytes("64M") == 1 << 26
    assert size_list(8, 64 << 20, 2) == [8 << k for k in range(24)]
    assert size_list(4096, 1 << 20, 4) == [4096, 16384, 65536, 262144, 1 << 20]
    with pytest.raises(ValueError):
        size_list(64, 8, 2)


def test_size_units_as_documented():
    """docs/bench.md "Units": a bare suffix and KiB/MiB are binary, KB/MB decimal; through the
    real parser of bench (-b, -e) and the reducer option --crossover-bytes (failed before:
    100MB read as 104,857,600)."""
    from mpicomm.cli.main import build_parser

    parser = build_parser()
    for text, want in (("100M", 104_857_600), ("100MiB", 104_857_600), ("100MB", 100_000_000),
                       ("8", 8), ("4K", 4096), ("4KiB", 4096), ("4KB", 4000), ("1G", 1 << 30),
                       ("1GB", 10**9), ("1.5K", 1536)):
        args = parser.parse_args(["bench", "-b", text, "-e", text, "--crossover-bytes", text])
        assert (args.minbytes, args.maxbytes, args.crossover_bytes) == (want, want, want), text
    assert parse_bytes("64M") == 1 << 26 and parse_bytes(4096) == 4096
    for bad, hint in (("100Mb", "bits"), ("1.3", "whole number"), ("64X", r"100MB \(decimal\)"),
                      ("", "4K")):
        with pytest.raises(ValueError, match=hint):
            parse_bytes(bad)


def test_size_units_refused_in_one_line(capsys):
    from mpicomm.cli.main import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["bench", "-b", "100Mb"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "reads as bits" in err[-1] and "MiB" in err[-1]


def test_tile_and_count_wrong():
    block = rank_block(1, 0, 0)
    assert block.min() >= -4 and block.max() <= 4 and np.all(block == np.round(block))
    out = np.empty(2 * PERIOD + 5, np.float32)
    tile(block, out)
    assert np.array_equal(out[PERIOD : 2 * PERIOD], block) and np.array_equal(out[-5:], block[:5])
    diff = np.empty_like(out)
    bad = out.copy()
    bad[3] += 1
    bad[7] = np.nan
    assert count_wrong(out, out, diff, 1e-6) == 0
    assert count_wrong(bad, out, diff, 1e-6) == 2


def test_bench_records(tmp_path):
    js, cs = tmp_path / "b.json", tmp_path / "b.csv"
    res = run_mpi(2, [*BENCH, "--strategies", "ring,native,recursive_doubling", "-b", "8",
                      "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "-c", "2",
                      "--thread-level", "single", "--json", str(js), "--csv", str(cs)],
                  timeout=120)
    assert res.returncode == 0, res.tail()
    data = json.loads(js.read_text())
    assert data["thread_level"]["provided"] == "single"
    assert data["clock"] == "wall"  # the record names the clock its times are in
    rows = data["results"]
    # by size, strategies taking turns, baseline first
    assert [r["strategy"] for r in rows[:3]] == ["native", "ring", "recursive_doubling"]
    assert [r["bytes"] for r in rows[::3]] == [8, 64, 512, 4096, 32768]
    assert len(rows) == 15
    for r in rows:
        assert set(RECORD_KEYS) <= set(r), r
        assert r["wrong"] == 0 and r["ranks"] == 2
        assert r["min_us"] <= r["time_us"] <= r["max_us"]
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["time_us"] / 1e3)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (2 - 1) / 2)
        native = next(x for x in rows if x["strategy"] == "native" and x["bytes"] == r["bytes"])
        assert r["vs_baseline"] == pytest.approx(native["time_us"] / r["time_us"])
    with open(cs) as f:
        table = list(csv.DictReader(f))
    assert len(table) == 15 and set(RECORD_KEYS) <= set(table[0])
    assert "#wrong" in res.stdout and res.stdout.count("out of bounds values 0 OK") == 3


def test_bench_counts_wrong(tmp_path):
    js = tmp_path / "b.json"
    res = run_mpi(3, [str(SCRIPTS / "bench_broken.py"), "bench", "--strategies", "native,broken",
                      "-b", "4", "-e", "4K", "-f", "32", "-n", "2", "-w", "1", "-c", "2",
                      "--json", str(js)], timeout=120)
    assert res.returncode != 0, "a wrong result must fail the run"
    rows = json.loads(js.read_text())["results"]
    assert [(r["strategy"], r["wrong"]) for r in rows] == [("native", 0), ("broken", 2)] * 3
    assert "FAILED" in res.stdout


def test_bench_dedicated_ps(tmp_path):
    """Dedicated servers serve while the workers sweep; rows count the workers only."""
    js = tmp_path / "b.json"
    res = run_mpi(3, [*BENCH, "--strategies", "ps,native", "--dedicated", "--servers", "1",
                      "-b", "1K", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "--json", str(js)],
                  timeout=120)
    assert res.returncode == 0, res.tail()
    rows = json.loads(js.read_text())["results"]
    assert [r["ranks"] for r in rows if r["strategy"] == "ps"] == [2, 2, 2]
    assert [r["ranks"] for r in rows if r["strategy"] == "native"] == [3, 3, 3]
    assert all(r["wrong"] == 0 for r in rows)


def test_bench_unknown_strategy_reported_once():
    res = run_mpi(2, [*BENCH, "--strategies", "native,nope", "-e", "8"], timeout=60)
    assert res.returncode == 2
    assert res.stderr.count("unknown strategy 'nope'") == 1, res.tail()
    assert "Traceback" not in res.stderr
    assert "valid strategies: native, ring" in res.stderr


def test_bench_bad_values_reported_once():
    res = run_mpi(2, [*BENCH, "-n", "0", "-e", "8"], timeout=60)
    assert res.returncode == 2 and res.stderr.count("-n 0") == 1, res.tail()
    res = run_mpi(2, [*BENCH, "-b", "1M", "-e", "4K"], timeout=60)
    assert res.returncode == 2 and res.stderr.count("need 1 <= -b <= -e") == 1, res.tail()


def test_a_sweep_larger_than_memory_is_refused_by_its_sizes():
    """The buffers (3 with checks) and a strategy's scratch, per rank on the host."""
    gib = 1 << 30
    assert memory_problem(1 * gib, True, 2, 8 * gib) is None          # 4 x 1 GiB x 2 fits
    assert memory_problem(1 * gib, False, 4, 8 * gib) is None         # 2 x 1 GiB x 4
    why = memory_problem(512 * gib, True, 2, 17 * gib)
    assert why == ("-e: the largest size, 512 GiB, needs at least 4 TiB on this host "
                   "(4 x 512 GiB a rank x 2 ranks), more than its 17 GiB available; "
                   "give a smaller -e")
    assert memory_problem(2 * gib, True, 2, 15 * gib) is not None     # 16 GiB > 15 GiB
    assert memory_problem(512 * gib, True, 2, None) is None           # unknown: no verdict


@pytest.mark.slow
@pytest.mark.parametrize("command", ["bench", "model"])
def test_a_size_too_large_for_memory_is_one_line_on_every_rank(command):
    """`bench -e 1000G` died with a MemoryError traceback from NumPy (exit 1, MPI_Abort);
    now one line, exit 2 on every rank, before the header or any measurement."""
    res = run_mpi(2, ["-m", "mpicomm", command, "--strategies", "ring", "-b", "4K",
                      "-e", "1000G"], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("-e: the largest size, 512 GiB, needs at least") == 1, res.tail()
    assert "Traceback" not in out and "MemoryError" not in out and "Abort" not in out, res.tail()
    assert "# mpicomm bench" not in out and "size (B)" not in out, res.tail()


def test_bench_unknown_flag_reported_once():
    res = run_mpi(2, [*BENCH, "--bogus"], timeout=60)
    assert res.returncode == 2
    assert res.stderr.count("unrecognized arguments: --bogus") == 1, res.tail()


# ------------------------------------------------- honest verdicts, guards, help, GPU
def _strict(path):
    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_vs_column_marks_noise_and_crossovers_are_reported(tmp_path):
    js = tmp_path / "b.json"
    res = run_mpi(2, [*BENCH, "--strategies", "native,ring,recursive_doubling", "-b", "8",
                      "-e", "256K", "-f", "64", "-n", "15", "-w", "2", "--rounds", "2",
                      "--json", str(js)], timeout=180)
    assert res.returncode == 0, res.tail()
    data = _strict(js)
    for r in data["results"]:
        if r["strategy"] == "native":
            assert r["vs_verdict"] is None and r["vs_baseline"] == pytest.approx(1)
        else:
            assert r["vs_verdict"] in ("faster", "slower", "tie")
            assert r["vs_low"] <= r["vs_baseline"] <= r["vs_high"]
            assert (r["vs_verdict"] == "tie") == (r["vs_low"] <= 1 <= r["vs_high"])
    rows = [ln for ln in res.stdout.splitlines() if ln.strip().startswith(("ring", "recursive"))]
    assert rows and all(ln.rstrip()[-1] in "*~" for ln in rows), rows
    pairs = {(c["a"], c["b"]) for c in data["crossovers"]}
    assert ("ring", "recursive_doubling") in pairs and len(pairs) == 3
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("# ring vs recursive"))
    assert "model" in line and ("measured" in line or "no measured crossover" in line)
    assert "bench: " in res.stderr and " left)" in res.stderr  # progress, rank 0, stderr
    assert res.stderr.count("(1/3;") == 1


def test_measured_and_predicted_crossovers():
    from mpicomm.analysis.crossover import crossover_lines, measured_crossovers, predicted_crossover
    from mpicomm.costmodel.formulas import LinkModel, ModelParams, auto_crossover

    rng = np.random.default_rng(0)
    rows = []
    for n, (t_rd, t_ring) in zip([8, 1024, 65536, 1 << 20],
                                 [(10, 20), (12, 20), (60, 40), (900, 500)], strict=True):
        for s, t in (("recursive_doubling", t_rd), ("ring", t_ring)):
            rows.append({"strategy": s, "bytes": n,
                         "_samples": t * rng.lognormal(0, 0.05, (2, 30))})
    (c,) = measured_crossovers(rows, ["recursive_doubling", "ring"])
    (x,) = c["crossovers"]
    assert (x["from"], x["to"], x["low"], x["high"]) == ("recursive_doubling", "ring", 1024, 65536)
    sizes = [1 << k for k in range(3, 25)]
    link = LinkModel.from_pingpong(sizes, [5e-6 + s * 1e-9 for s in sizes],
                                   swaps=[5e-6 + s * 1.2e-9 for s in sizes])
    params = ModelParams(link, link, sizes, [5e-10] * len(sizes))
    pred = predicted_crossover("recursive_doubling", "ring", 4, params, {})
    assert pred == auto_crossover(4, params) or abs(np.log2(pred / auto_crossover(4, params))) <= 2
    lines, _ = crossover_lines(rows, ["recursive_doubling", "ring"], 4, params, {})
    assert "between 1 KiB and 64 KiB" in lines[0] and "model predicts" in lines[0], lines


@pytest.mark.slow  # --help of every command in a subprocess: 2.7 s
def test_help_shows_every_default_once():
    import subprocess
    import sys

    from mpi_harness import ROOT

    for command in ("bench", "model", "compare", "train", "info"):
        res = subprocess.run([sys.executable, "-m", "mpicomm", command, "--help-all"],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
        text = " ".join(res.stdout.split())  # argparse wraps lines
        assert res.returncode == 0, res.stderr
        assert "(default: None)" not in text, command
        assert "(default: ask MPI) (default" not in text, command
        for option in re.split(r"\s(?=-{1,2}[a-z])", text):
            assert option.count("default") <= 2 and option.count("(default:") <= 1, option
        if command == "bench":
            for flag, default in (("--iters", "20"), ("--warmup_iters", "5"), ("--rounds", "1"),
                                  ("--check", "1"), ("--minbytes", "8"), ("--maxbytes", "64M")):
                assert re.search(rf"{flag} \S+ .*?\(default: {re.escape(default)}\)", text), flag


def test_model_on_one_rank_is_refused_and_prints_no_inf(capsys):
    from mpicomm.cli.model import print_model
    from mpicomm.costmodel.formulas import LinkModel, ModelParams

    res = run_mpi(1, ["-m", "mpicomm", "model", "-e", "64K"], timeout=60)
    assert res.returncode == 2 and "N >= 2" in res.stderr and "inf" not in res.stdout, res.tail()
    sizes = [8, 4096, 65536]
    zero = LinkModel(0.0, sizes, [0.0] * 3)  # what one rank measures: nothing travels
    print_model(ModelParams(zero, zero, sizes, [0.0] * 3), [], 2147483648)
    out = capsys.readouterr().out
    assert "inf" not in out and "2147483648" not in out, out
    assert "none up to 1 GiB" in out


def test_info_reports_cupy_gpus_and_cuda_awareness():
    res = run_mpi(1, ["-m", "mpicomm", "info"], timeout=60)
    assert res.returncode == 0, res.tail()
    info = json.loads(res.stdout[: res.stdout.rindex("}") + 1])
    assert {"cupy", "gpus", "cuda_aware_mpi"} <= set(info)
    try:
        import cupy
    except ImportError:
        assert info["cupy"] is None and "pip install 'mpicomm[gpu]'" in info["gpu_note"]
    else:
        assert info["cupy"] == cupy.__version__


@pytest.mark.gpu
def test_bench_on_gpu_buffers(tmp_path, gpu_backend):
    """CuPy buffers through the same reducers (real, or the stand-in: conftest.gpu_backend):
    every strategy's sums are exact."""
    js = tmp_path / "g.json"
    res = run_mpi(2, [*BENCH, "--device", "gpu", "--strategies", "native,ring,ps,auto",
                      "-b", "8", "-e", "4M", "-f", "16", "-n", "5", "-w", "1", "-c", "2",
                      "--json", str(js)], timeout=300)
    assert res.returncode == 0, res.tail()
    data = _strict(js)
    assert data["config"]["device"] == "gpu"
    sizes = 5  # 8 B × 16^k up to 4 MiB: 8, 128, 2K, 32K, 512K (8M is past -e)
    assert all(r["wrong"] == 0 for r in data["results"]) and len(data["results"]) == 4 * sizes


def test_unknown_baseline_is_refused(capsys):
    """`bench --baseline nativ` ran with an empty vs column; now one line and exit 2."""
    import argparse

    from mpicomm.cli.bench import add_arguments, chosen_strategies

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert chosen_strategies(parser.parse_args(["--baseline", "nativ"])) is None
    assert "unknown --baseline 'nativ'; valid strategies: native" in capsys.readouterr().err
    names = chosen_strategies(parser.parse_args(["--strategies", "ring,auto", "--baseline",
                                                 "auto"]))
    assert names == ["auto", "ring"]  # a known baseline: first


def test_another_strategys_option_is_refused(capsys):
    """`bench --strategies ring --servers 2` ran the ring, the flag dropped; now one line."""
    import argparse

    from mpicomm.cli.bench import add_arguments, chosen_strategies

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert chosen_strategies(parser.parse_args(["--strategies", "ring", "--servers", "2"])) is None
    assert ("--servers 2 has no effect with --strategies ring: it sets an option of ps only"
            in capsys.readouterr().err)
    assert chosen_strategies(parser.parse_args(["--strategies", "ring,ps", "--servers", "2"]))
    assert chosen_strategies(parser.parse_args(["--channels", "2"]))  # all: the ring among them
    assert chosen_strategies(parser.parse_args(["--cuda-aware"])) is None  # CuPy buffers only
    assert "--cuda-aware/--no-cuda-aware: how CuPy buffers reach MPI" in capsys.readouterr().err


@pytest.mark.slow
def test_model_with_lossy_compression_records_no_wrong_elements(tmp_path):
    """`model --compress int8` checked int8 sums against exact ones and wrote 'wrong': 1730
    into its JSON (bench turns the checks off for a lossy codec; model now does too)."""
    js = tmp_path / "m.json"
    res = run_mpi(2, ["-m", "mpicomm", "model", "--strategies", "ring", "--compress", "int8",
                      "-b", "4K", "-e", "64K", "-f", "16", "-n", "2", "-w", "1",
                      "--json", str(js)], timeout=120)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    doc = json.loads(js.read_text())
    assert doc["config"]["check"] == 0, doc["config"]
    assert doc["clock"] == "wall"
    assert [r["wrong"] for r in doc["results"]] == [0, 0], doc["results"]


@pytest.mark.slow
def test_model_says_what_it_measures():
    """`model` sat silent for 70-114 s while it measured α, β, γ at 4 ranks; now rank 0 writes
    one plain line per step of the measurement (stderr), then bench's lines per size."""
    res = run_mpi(2, ["-m", "mpicomm", "model", "--strategies", "ring", "-b", "4K", "-e", "16K",
                      "-f", "4", "-n", "2", "-w", "1"], timeout=180)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    steps = [ln.split(": ", 2)[2].split(" (")[0] for ln in res.stderr.splitlines()
             if ln.startswith("model: measuring: ")]
    assert steps == ["γ: np.add, 8 sizes up to 16 KiB", "intra-node exchange, ranks 0-1",
                     "intra-node ping-pong", "intra-node, data out of the caches",
                     "page faults of fresh memory", "interfaces between nodes, CPU share"], \
        res.stderr
    assert "\r" not in res.stderr and "(6/6; " in res.stderr


@pytest.mark.slow
def test_bench_json_names_the_clock_a_default_picked(tmp_path):
    """Emulated nodes on one host run in virtual time without --clock. Before, the JSON said
    only options "clock": null, so its µs read as measured ones (and summarize.py showed
    them as such); now it records "clock": "virtual", and the results page says so."""
    js = tmp_path / "b.json"
    res = run_mpi(2, [*BENCH, "--strategies", "native,ring", "-b", "4K", "-e", "8K",
                      "-n", "3", "-w", "1", "--ranks-per-node", "1", "--inter-link",
                      "50us,1GB/s", "--json", str(js)], timeout=120)
    assert res.returncode == 0 and "# virtual clock" in res.stdout, res.tail()
    doc = json.loads(js.read_text())
    assert doc["options"]["clock"] is None and doc["clock"] == "virtual", doc["options"]
    summarize = load_script("experiments/summarize.py")
    assert "virtual-clock times" in summarize.recorded_on(doc)
    assert "wall-clock times" in summarize.recorded_on({**doc, "clock": "wall"})


@pytest.mark.slow
def test_model_fails_on_a_wrong_result(tmp_path):
    """`model` checked results (-c) but exited 0 with a wrong one; now, as bench, exit 1."""
    js = tmp_path / "m.json"
    res = run_mpi(2, [str(SCRIPTS / "bench_broken.py"), "model", "--strategies", "native,broken",
                      "-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "-c", "2",
                      "--json", str(js)], timeout=120)
    assert res.returncode == 1 and not res.timed_out, res.tail()
    assert "# FAILED: 2 elements off the expected sum (broken)" in res.stdout, res.tail()
    rows = json.loads(js.read_text())["results"]
    assert [(r["strategy"], r["wrong"]) for r in rows] == [("native", 0), ("broken", 2)]


def _virtual_params(inter, intra, sizes):
    """ModelParams as `model` builds them under the virtual clock: the modelled links."""
    from mpicomm.costmodel.formulas import LinkModel, ModelParams, emulated_link

    zero = LinkModel.from_pingpong(sizes, [1e-9 + m * 1e-15 for m in sizes])  # ~free
    links = [emulated_link(zero, s.latency, s.bandwidth, str(s)) for s in (intra, inter)]
    return ModelParams(*links, sizes, [2e-10] * len(sizes), num_nodes=2, local_size=2)


def test_model_predicts_the_tree_and_channels_the_virtual_clock_runs():
    """`mpiexec -n 4 model --clock virtual --ranks-per-node 2 --inter-link 20us,1GB/s
    --strategies ring,tree --channels 2 -b 4M -e 4M`: the predicted column read 8766 us for
    the 2-channel ring (the 1-ring formula: meas/pred 0.42) and '-' for the tree. Under the
    virtual clock both now come from the cluster predictor on the cluster the clock charges."""
    from mpicomm.bench.model_rows import predicted
    from mpicomm.core.links import parse_link
    from mpicomm.costmodel.cluster import DEFAULT_INTRA
    from mpicomm.costmodel.profiles import build_cluster

    inter, intra = parse_link("20us,1GB/s"), DEFAULT_INTRA
    charged = build_cluster(ranks_per_node=2, inter=inter, intra=intra)
    params = _virtual_params(inter, intra, [8 << k for k in range(22)])
    n, opts = 4 << 20, {"crossover_bytes": 1 << 16}
    one = predicted("ring", 4, n, params, {**opts, "channels": 1}, charged)
    two = predicted("ring", 4, n, params, {**opts, "channels": 2}, charged)
    # 1 ring: the clock's neighbour-paced form, never slower than the slowest-link formula
    # the wall clock's measured model takes (formulas.predict)
    assert 0.9 * predicted("ring", 4, n, params, opts) < one <= predicted("ring", 4, n, params,
                                                                           opts)
    # two rings: each node boundary crossed by two ranks, each with its own NIC
    assert two < 0.6 * one
    tree = predicted("tree", 4, n, params, opts, charged)
    assert tree is not None and tree > one  # the tree sends the whole n across
    assert predicted("tree", 4, n, params, opts) is None  # wall clock: no tree formula here


@pytest.mark.slow
def test_model_under_the_virtual_clock_predicts_channels_and_tree_within_25_percent(tmp_path):
    out = tmp_path / "m.json"
    res = run_mpi(4, ["-m", "mpicomm", "model", "--clock", "virtual", "--compute-scale", "1e-6",
                      "--ranks-per-node", "2", "--inter-link", "20us,1GB/s", "--strategies",
                      "ring,tree", "--channels", "2", "-b", "4M", "-e", "4M", "-n", "2",
                      "--json", str(out)], timeout=300)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["results"]}
    for name in ("ring", "tree"):
        ratio = rows[name]["measured_over_predicted"]
        assert ratio is not None and 0.8 <= ratio <= 1.25, (name, rows[name])
