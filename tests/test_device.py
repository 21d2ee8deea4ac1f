"""costmodel/device.py: the device profiles hold their datasheets' figures, the roofline is
the larger of compute and memory time plus launches, and bad names or rates are refused."""

from __future__ import annotations

import math

import pytest

from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.device import DEVICES, EFFICIENCY, Device, device

# (name, fp32, fp16, bf16 TFLOP/s dense, memory GB/s) as printed on each datasheet (D1-D9)
DATASHEETS = [
    ("k80", 8.73 / 2, None, None, 480 / 2),  # the board's two GPUs: one rank is one GPU
    ("p100", 10.6, 21.2, None, 732),
    ("v100", 15.7, 125, None, 900),
    ("a100", 19.5, 312, 312, 2039),
    ("h100", 67, 989.5, 989.5, 3350),
    ("h200", 67, 989.5, 989.5, 4800),
    ("b200", 80, 2250, 2250, 8000),  # D8: 4.5 PFLOP/s fp16 "with sparsity" -> 2.25 dense
    ("gb200", 90, 2500, 2500, 8000),  # D9: 10 PFLOP/s sparse per 2-GPU superchip
]


@pytest.mark.parametrize("name,fp32,fp16,bf16,mem", DATASHEETS)
def test_profiles_hold_the_datasheet_figures(name, fp32, fp16, bf16, mem):
    d = device(name)
    assert math.isclose(d.memory_bytes_per_s, mem * 1e9)
    for prec, tflops in (("fp32", fp32), ("fp16", fp16), ("bf16", bf16)):
        if tflops is None:
            with pytest.raises(ConfigError, match=f"no {prec} arithmetic"):
                d.flop_rate(prec)
        else:
            assert math.isclose(d.flop_rate(prec), tflops * 1e12 * EFFICIENCY)
    assert d.source and "E1" in d.source and "E2" in d.source


def test_efficiency_is_megatrons_published_share():
    assert math.isclose(EFFICIENCY, 163 / 312)  # Narayanan et al. SC'21: 163 of 312 TFLOP/s


def test_roofline_takes_the_larger_and_adds_launches():
    d = device("h100")
    rate, bw = d.flop_rate("fp16"), d.memory_bytes_per_s
    # compute-bound: 1 GFLOP on 1 KB
    assert math.isclose(d.seconds(1e9, 1e3, 1, "fp16"), 1e9 / rate + d.launch_s)
    # memory-bound: 1 FLOP on 1 GB, 3 kernels
    assert math.isclose(d.seconds(1, 1e9, 3, "fp16"), 1e9 / bw + 3 * d.launch_s)
    # fp32 is slower than fp16 on the same flops
    assert d.seconds(1e12, 0, 0, "fp32") > 10 * d.seconds(1e12, 0, 0, "fp16")
    # an override replaces the device's rate
    assert math.isclose(d.seconds(2e9, 0, 0, "fp32", flop_rate=1e9), 2.0)


def test_the_h200_differs_from_the_h100_only_in_memory():
    h100, h200 = device("h100"), device("h200")
    assert h100.peak_flops == h200.peak_flops
    assert h200.memory_bytes_per_s > 1.4 * h100.memory_bytes_per_s


def test_host_charges_cpu_time_and_has_no_rates():
    host = device("host")
    assert host.cpu_time and not host.peak_flops
    host.check_precision("fp32")
    with pytest.raises(ConfigError, match="cannot take effect with --accelerator host"):
        host.check_precision("fp16")


def test_unknown_names_are_refused_in_one_line_listing_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        device("b300")
    msg = str(err.value)
    assert "\n" not in msg and "'b300'" in msg
    assert all(name in msg for name in DEVICES)
    assert device("H100") is DEVICES["h100"]  # case-insensitive
    with pytest.raises(ConfigError, match="unknown precision 'fp8'"):
        device("h100").check_precision("fp8")


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "1e12"])
def test_bad_rates_are_refused(bad):
    with pytest.raises(ConfigError, match="must be a number > 0"):
        Device("x", (("fp32", bad),), 0.5, 1e9, 1e-6, 1e9)
    with pytest.raises(ConfigError, match="must be a number > 0"):
        Device("x", (("fp32", 1e12),), 0.5, bad, 1e-6, 1e9)
    with pytest.raises(ConfigError, match="must be a number > 0"):
        Device("x", (("fp32", 1e12),), 0.5, 1e9, 1e-6, bad)


def test_bad_efficiency_launch_and_precisions_are_refused():
    with pytest.raises(ConfigError, match="efficiency"):
        Device("x", (("fp32", 1e12),), 1.5, 1e9, 1e-6, 1e9)
    with pytest.raises(ConfigError, match="launch cost"):
        Device("x", (("fp32", 1e12),), 0.5, 1e9, math.nan, 1e9)
    with pytest.raises(ConfigError, match="precisions"):
        Device("x", (("fp16", 1e12),), 0.5, 1e9, 1e-6, 1e9)


def test_blackwell_profiles_and_their_clusters():
    """B200 and GB200 (D8, D9): the named Blackwell clusters bring them, GB200's host link is
    NVLink-C2C (450 GB/s one way) where B200's is PCIe Gen5 (64 GB/s), and a B200 runs a
    half-precision matmul faster than an H100 and a GB200 faster than a B200."""
    from mpicomm.costmodel.profiles import CLUSTERS, profile_fields

    b200, gb200, h100 = device("b200"), device("gb200"), device("h100")
    assert CLUSTERS["dgx-b200-ib400"].device is b200
    assert CLUSTERS["gb200-nvl72"].device is gb200
    assert profile_fields("gb200-nvl72")["accelerator"] == "gb200"
    assert math.isclose(gb200.copy_bytes_per_s, 450e9)
    assert math.isclose(b200.copy_bytes_per_s, h100.copy_bytes_per_s)  # PCIe Gen5 both
    work = (1e13, 1e6)  # 10 TFLOP on 1 MB: compute-bound everywhere
    assert (gb200.seconds(*work, precision="bf16") < b200.seconds(*work, precision="bf16")
            < h100.seconds(*work, precision="bf16") / 2)
    assert "D8" in b200.source and "D9" in gb200.source
