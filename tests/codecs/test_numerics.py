"""Codec numerics (issue 19): NaN and ±inf stay visible without harming the other values;
float64 beyond float16's range and tiny magnitudes keep their documented bound."""

import numpy as np
import pytest
from mpi_harness import run_script
from test_codecs import roundtrip

from mpicomm.codecs.quantize import CHUNK, Fp16Codec, Int8Codec


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fp16_keeps_nan_and_inf_and_the_rest(dtype):
    x = np.array([np.nan, 100, 1, 2, -np.inf, 3, np.inf, 4], dtype=dtype)
    y = roundtrip(Fp16Codec(), x)
    assert np.isnan(y[0]) and y[4] == -np.inf and y[6] == np.inf
    finite = np.isfinite(x)
    assert np.allclose(y[finite], x[finite], rtol=2.0**-11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_int8_keeps_non_finite_non_finite_and_the_rest(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3 * CHUNK + 5).astype(dtype)
    x[[3, CHUNK + 7, 2 * CHUNK]] = [np.nan, np.inf, -np.inf]
    y = roundtrip(Int8Codec(), x)
    assert not np.isfinite(y[[3, CHUNK + 7, 2 * CHUNK]]).any()
    finite = np.isfinite(x)
    amax = np.abs(x[finite]).max()
    assert np.isfinite(y[finite]).all()
    assert (np.abs(y[finite] - x[finite]) <= amax / 127 / 2 * (1 + 1e-6)).all()


@pytest.mark.parametrize("scale", [1e50, 1e-300, 1e300, 1e-30])
def test_fp16_float64_beyond_fp16_range_keeps_relative_precision(scale):
    x = np.array([1, 2, -3, 4, 0.5], dtype=np.float64) * scale
    y = roundtrip(Fp16Codec(), x)
    assert np.all(np.abs(y - x) <= 2.0**-11 * np.abs(x))


@pytest.mark.parametrize("dtype,tiny", [(np.float32, 1e-38), (np.float32, 1e-44),
                                        (np.float64, 1e-300), (np.float64, 1e50)])
def test_int8_tiny_and_huge_chunks_are_quantised_not_zeroed(dtype, tiny):
    x = (np.linspace(-1, 1, 2 * CHUNK + 3) * tiny).astype(dtype)
    y = roundtrip(Int8Codec(), x)
    scale = max(np.abs(x).max() / 127, np.finfo(dtype).tiny)
    assert np.isfinite(y).all()
    assert (np.abs(y - x) <= scale / 2 * (1 + 1e-6)).all()
    if tiny >= 1e-38 * (1 if dtype == np.float32 else 0):
        assert np.abs(y).max() > 0


def test_ring_fp16_with_nan_on_two_ranks():
    run_script(2, "check_codec_numerics.py", timeout=120).expect_ok()


@pytest.mark.parametrize("m", [1000, 100_003])  # the second samples a threshold (m > 2·16384)
def test_topk_always_sends_nan_and_inf(m):
    """A NaN is among the top k however large the buffer (was dropped above 32768 values:
    neither above nor equal to the sampled threshold, so a NaN gradient summed finite)."""
    from mpicomm.codecs.topk import top_k

    mag = np.abs(np.random.default_rng(2).standard_normal(m))
    mag[[m // 3, m // 2]] = [np.nan, np.inf]
    idx = set(top_k(mag, max(1, m // 100)).tolist())
    assert {m // 3, m // 2} <= idx
