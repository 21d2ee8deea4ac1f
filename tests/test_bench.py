"""bench: records and table, #wrong on a broken strategy, clear errors; unit parts serially."""

import csv
import json

import numpy as np
import pytest
from mpi_harness import SCRIPTS, run_mpi

from mpicomm.bench.allreduce import PERIOD, rank_block, tile
from mpicomm.bench.harness import RECORD_KEYS, count_wrong, parse_bytes, size_list

BENCH = ["-m", "mpicomm", "bench"]


def test_sizes_and_units():
    assert parse_bytes("8") == 8 and parse_bytes("4K") == 4096 and parse_bytes("64M") == 1 << 26
    assert size_list(8, 64 << 20, 2) == [8 << k for k in range(24)]
    assert size_list(4096, 1 << 20, 4) == [4096, 16384, 65536, 262144, 1 << 20]
    with pytest.raises(ValueError):
        size_list(64, 8, 2)


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


def test_bench_unknown_flag_reported_once():
    res = run_mpi(2, [*BENCH, "--bogus"], timeout=60)
    assert res.returncode == 2
    assert res.stderr.count("unrecognized arguments: --bogus") == 1, res.tail()
