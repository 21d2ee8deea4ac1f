"""Gradient compression: codec error bounds, error-feedback bookkeeping, compressed
reductions against NumPy at 1-5 ranks, refusals on every rank, compressed bytes, learning."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi, run_script

from mpicomm.codecs.feedback import ErrorFeedback
from mpicomm.codecs.quantize import CHUNK, Fp16Codec, Int8Codec
from mpicomm.codecs.topk import TopKCodec
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions, parse_compress
from mpicomm.train.config import TrainConfig

ODD = [1, 7, 255, 257, 1001, 4099]


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * rng.choice([1e-4, 1.0, 1e4], n)).astype(np.float32)


def roundtrip(codec, x):
    msg = np.empty(codec.wire_bytes(x.size, x.dtype), dtype=np.uint8)
    codec.encode(x, msg)
    out = np.empty_like(x)
    codec.decode(msg, out)
    return out


@pytest.mark.parametrize("n", ODD)
def test_fp16_relative_error_and_no_overflow(n):
    x = data(n)
    x[0] = 1e6  # beyond float16's 65504: the power-of-two scaling keeps it finite
    y = roundtrip(Fp16Codec(), x)
    amax = np.abs(x).max()
    bound = 2.0**-11 * np.abs(x) + 2.0**-25 * amax / 2.0**14
    assert np.isfinite(y).all()
    assert (np.abs(y - x) <= bound).all()


@pytest.mark.parametrize("n", ODD)
def test_int8_error_within_half_a_chunk_scale(n):
    x = data(n, seed=n)
    y = roundtrip(Int8Codec(), x)
    pad = np.zeros(-(-n // CHUNK) * CHUNK, dtype=np.float32)
    pad[:n] = np.abs(x)
    scale = np.repeat(pad.reshape(-1, CHUNK).max(axis=1) / 127, CHUNK)[:n]
    assert (np.abs(y - x) <= scale / 2 * (1 + 1e-6)).all()
    assert Int8Codec().wire_bytes(n) == n + 4 * -(-n // CHUNK)


def test_codecs_reuse_their_buffers():
    c, x = Int8Codec(), data(5000)
    msg = np.empty(c.wire_bytes(x.size), dtype=np.uint8)
    c.encode(x, msg)
    first = c._scratch.get(10, np.float32).__array_interface__["data"][0]
    c.encode(x[:3000], msg)
    assert c._scratch.get(10, np.float32).__array_interface__["data"][0] == first


@pytest.mark.parametrize("ef", [True, False])
def test_topk_error_feedback_bookkeeping_is_exact(ef):
    codec = TopKCodec(0.05)
    fb = ErrorFeedback(codec, enabled=ef)
    buf = np.empty(1001, dtype=np.float32)
    prev = np.zeros_like(buf)
    for step in range(4):
        buf[:] = data(buf.size, seed=step)
        k = codec.k_of(buf.size)
        msg = np.empty(codec.pair_bytes(k, 4), dtype=np.uint8)
        x = buf.copy()
        res = fb.residual("bucket", buf.size, buf.dtype)
        fb.encode(buf, msg, res)
        assert np.array_equal(buf, x)  # the input is not touched
        sent = np.zeros_like(buf)
        codec.decode_add(msg, k, sent)
        res = np.zeros_like(buf) if res is None else res
        assert np.count_nonzero(sent) <= k == 51
        if ef:  # sent + residual == input + previous residual, bit for bit
            assert np.array_equal(sent + res, x + prev)
            assert np.abs(sent[sent != 0]).min() >= np.abs(res).max()
        else:
            assert not res.any()
            top = np.argsort(np.abs(x))[-k:]
            assert np.array_equal(np.sort(np.flatnonzero(sent)), np.sort(top))
        prev = res.copy()


def test_error_feedback_is_keyed_bounded_and_restorable():
    fb = ErrorFeedback(TopKCodec(0.1), max_keys=3)
    a = fb.residual("0", 10, np.float32)
    a[:] = 1
    assert fb.residual("1", 10, np.float32).sum() == 0  # equal length, another bucket
    assert fb.residual("0", 10, np.float32) is a
    saved = fb.state()
    for key in ("2", "3", "4"):  # over the bound: the least recently used go
        fb.residual(key, 10, np.float32)
    assert sorted(fb.state()) == ["2", "3", "4"]
    fb.load_state(saved)
    assert np.array_equal(fb.residual("0", 10, np.float32), np.ones(10, np.float32))
    fb.clear()
    assert fb.state() == {}


@pytest.mark.parametrize("bad", ["fp8", "topk", "topk:0", "topk:1.5", "topk:x", "topk:0.1:y",
                                 "int8:2", None])
def test_bad_codec_strings_are_one_clear_error(bad):
    with pytest.raises(ConfigError, match="valid codecs: none, fp16, int8, topk:RATIO"):
        parse_compress(bad)
    with pytest.raises(ConfigError, match="valid codecs"):
        ReducerOptions(compress=bad)
    with pytest.raises(ConfigError, match="--compress"):
        TrainConfig(compress=bad)


def test_codec_strings_are_normalised():
    assert ReducerOptions(compress="TopK:0.010").compress == "topk:0.01"
    assert ReducerOptions(compress="topk:0.5:ef").compress == "topk:0.5"
    assert parse_compress("topk:0.01:noef") == ("topk", 0.01, False)


CASES = [["ring", {}], ["hierarchical", {"ranks_per_node": 2}], ["ps", {}]]
CODECS = "fp16,int8,topk:0.1,topk:0.05:noef"


@pytest.mark.parametrize("nranks", [1, 2, 3, pytest.param(5, marks=pytest.mark.slow)])
def test_recursive_doubling_compresses_through_its_wire(nranks):
    res = run_script(nranks, "check_codecs.py", json.dumps([["recursive_doubling", {}]]),
                     "fp16,int8", "--lengths", "1,7,1001,4099", timeout=240)
    res.expect_ok()


@pytest.mark.parametrize("nranks", [1, 2, 3, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in (4, 5))])  # 4-5 ranks: 8-12 CPU-s
def test_compressed_reductions_match_numpy_within_the_bound(nranks):
    cases = CASES + ([["ps", {"servers": 2}], ["hierarchical", {"ranks_per_node": 3}]]
                     if nranks > 2 else [])
    res = run_script(nranks, "check_codecs.py", json.dumps(cases), CODECS,
                     "--lengths", "1,7,1001,4099", timeout=240)
    res.expect_ok()
    assert all(r["calls"] > 0 for r in res.records)


def test_topk_on_hierarchical_leader_and_uneven_nodes():
    cases = [["hierarchical", {"ranks_per_node": 2, "variant": "leader"}]]
    run_script(5, "check_codecs.py", json.dumps(cases), "topk:0.1,topk:0.3:noef",
               "--lengths", "1,7,1001", timeout=180).expect_ok()


@pytest.mark.parametrize("nranks", [1, 3])
def test_refusals_on_every_rank_and_compressed_bytes(nranks):
    res = run_script(nranks, "check_codec_setup.py", timeout=180).expect_ok()
    if nranks > 1:
        r = res.records[0]["ratios"]
        assert 0.45 < r["fp16"] <= 0.51 and 0.25 < r["int8"] <= 0.27, r
        assert 0 < r["topk:0.01"] <= 0.01 * nranks * 1.01 and r["topk:0.01:noef"] == r[
            "topk:0.01"], r
        assert r["ps fp16"] <= 0.51 and r["ps int8"] <= 0.27 and r["ps topk:0.01"] < 0.1, r
        assert r["rd fp16"] <= 0.51 and r["rd int8"] <= 0.27, r


SMALL = ["--layers", "16,32,32,4", "--train-samples", "1024", "--test-samples", "256",
         "--eval-samples", "256", "--log-every", "0", "--steps", "120"]


def test_bad_codec_on_the_command_line_exits_2_with_one_message():
    for argv in (["train", "--compress", "topk:7"],
                 ["train", "--strategy", "native", "--compress", "int8"]):
        res = run_mpi(2, ["-m", "mpicomm", *argv, *SMALL], timeout=60)
        out = res.stdout + res.stderr
        assert not res.timed_out and res.returncode == 2, res.tail()
        assert out.count("compress") >= 1 and out.count("Traceback") == 0, res.tail()
        assert out.count("valid codecs" if "topk:7" in argv else "strategies supporting") == 1


def test_topk_with_error_feedback_still_learns(tmp_path):
    accs = {}
    for codec in ("none", "topk:0.05"):
        path = tmp_path / f"{codec.replace(':', '_')}.json"
        res = run_mpi(2, ["-m", "mpicomm", "train", "--strategy", "ring", "--compress", codec,
                          *SMALL, "--json", str(path)], timeout=180)
        assert res.returncode == 0, res.tail()
        doc = json.loads(path.read_text())
        accs[codec] = doc
    none, topk = (json.dumps(accs[c]) for c in ("none", "topk:0.05"))
    assert '"compress": "topk:0.05"' in topk and none
    a_none = _test_accuracy(accs["none"])
    a_topk = _test_accuracy(accs["topk:0.05"])
    assert a_topk > 0.5 and a_topk >= a_none - 0.1, (a_none, a_topk)


def _test_accuracy(doc):
    for key in ("test_accuracy", "held_out_accuracy", "accuracy"):
        for rec in [doc, *doc.get("results", []), *doc.get("records", [])]:
            if isinstance(rec, dict) and key in rec:
                return rec[key]
    raise AssertionError(f"no accuracy in {list(doc)}")


def test_bench_takes_compress(tmp_path):
    out = {}
    for codec in ("none", "int8"):
        path = tmp_path / f"{codec}.json"
        res = run_mpi(2, ["-m", "mpicomm", "bench", "--strategies", "ring,ps", "-b", "64K",
                          "-e", "64K", "-n", "2", "-w", "1", "--compress", codec,
                          "--json", str(path)], timeout=120)
        assert res.returncode == 0, res.tail()
        out[codec] = {r["strategy"]: r for r in json.loads(path.read_text())["results"]}
    import mpicomm
    from mpicomm.reducers import make_reducer
    assert mpicomm.make_reducer is make_reducer
    assert out["int8"]["ring"]["time_us"] > 0 and out["none"]["ps"]["time_us"] > 0
