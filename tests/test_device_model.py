"""The device model (core/flops.py over costmodel/device.py): under the virtual clock compute
is charged by the modelled device's roofline and never as this host's CPU time; --accelerator
and --precision are refused in one line where they cannot take effect."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from mpi_harness import run_mpi

from mpicomm.core import clock, flops
from mpicomm.core.errors import ConfigError
from mpicomm.costmodel import device as D


@pytest.fixture
def vclock():
    vc = clock.VirtualClock(1.0, overhead=0.0)
    clock.set_source(vc.now, "virtual")
    try:
        yield vc
    finally:
        flops.reset()
        clock.reset()


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_device_model_charges_the_roofline_and_not_the_cpu(vclock):
    dev = D.install("h100", "fp32")
    assert dev is D.device("h100") and flops.active() and not vclock.charge_cpu
    t0 = clock.now()
    _burn(0.02)  # host CPU time: not charged
    assert clock.now() == t0
    flops.charge(flops=1e9, values=0, kernels=2)  # compute-bound
    want = 1e9 / dev.flop_rate("fp32") + 2 * dev.launch_s
    assert clock.now() - t0 == pytest.approx(want, rel=1e-12)
    t1 = clock.now()
    flops.add(1 << 20)  # memory-bound: 3 values of 4 bytes per element
    assert clock.now() - t1 == pytest.approx(12 * (1 << 20) / dev.memory_bytes_per_s
                                            + dev.launch_s, rel=1e-12)


def test_a_matmul_is_computed_and_charged_its_flops(vclock):
    dev = D.install("a100", "fp16")
    a, b = np.random.default_rng(0).standard_normal((2, 64, 64)).astype(np.float32)
    out = np.empty((64, 64), np.float32)
    t0 = clock.now()
    flops.matmul(np, a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    m = k = n = 64
    want = max(2 * m * k * n / dev.flop_rate("fp16"),
               2 * (m * k + k * n + m * n) / dev.memory_bytes_per_s) + dev.launch_s
    assert clock.now() - t0 == pytest.approx(want, rel=1e-12)


def test_precision_halves_the_bytes_of_values_and_of_float_messages(vclock):
    D.install("h100", "fp16")
    assert flops.wire_nbytes(np.empty(100, np.float32)) == 200
    assert flops.wire_nbytes(np.empty(100, np.float64)) == 200
    assert flops.wire_nbytes(np.empty(100, np.uint8)) == 100  # a codec's payload: as it is
    D.install("h100", "fp32")
    assert flops.wire_nbytes(np.empty(100, np.float32)) == 400


def test_compute_scale_multiplies_device_charges(vclock):
    vclock.scale = 1e-3
    dev = D.install("v100")
    t0 = clock.now()
    flops.charge(flops=1e9)
    assert clock.now() - t0 == pytest.approx(1e-3 * (1e9 / dev.flop_rate() + dev.launch_s))


def test_flop_rate_overrides_matmuls_exactly(vclock):
    D.install("h100", "fp32", flop_rate=1e9)
    a = np.ones((10, 20), np.float32)
    b = np.ones((20, 30), np.float32)
    out = np.empty((10, 30), np.float32)
    t0 = clock.now()
    flops.matmul(np, a, b, out)
    assert clock.now() - t0 == pytest.approx(2 * 10 * 20 * 30 / 1e9, rel=1e-9)


def test_host_charges_cpu_time_and_nothing_through_the_seam(vclock):
    assert D.install("host") is D.device("host")
    assert not flops.active() and vclock.charge_cpu and flops.describe() is None
    t0 = clock.now()
    flops.charge(flops=1e15)  # nothing: the host's time is the CPU's
    assert clock.now() - t0 < 0.01
    _burn(0.02)
    assert clock.now() - t0 >= 0.015


def test_mpi_collective_adds_are_charged_at_the_devices_gamma(vclock):
    assert flops.gamma() is None  # host CPU time: the cluster's own γ
    dev = D.install("h100")
    assert flops.gamma() == pytest.approx(3 / dev.memory_bytes_per_s)
    vclock.scale = 2.0
    assert flops.gamma() == pytest.approx(6 / dev.memory_bytes_per_s)


def test_the_profile_brings_its_device_and_the_flag_wins(vclock):
    from mpicomm.costmodel.profiles import CLUSTERS, DEVICE_OF, profile_fields

    assert set(DEVICE_OF) == set(CLUSTERS)
    assert CLUSTERS["dgx-h100-ib400"].device is D.device("h100")
    assert CLUSTERS["summit-v100-edr"].device is D.device("v100")
    assert profile_fields("dgx-a100-ib200")["accelerator"] == "a100"
    assert D.install().name == D.DEFAULT_ACCELERATOR


def test_wall_clock_refuses_what_cannot_take_effect():
    clock.reset()
    assert D.install() is None and not flops.active()  # nothing asked, nothing modelled
    for kw, flag in (({"accelerator": "h100"}, "--accelerator"),
                     ({"precision": "fp16"}, "--precision"),
                     ({"flop_rate": 1e12}, "--flop-rate")):
        with pytest.raises(ConfigError, match=f"{flag}: virtual-clock only"):
            D.install(**kw)


SLOW = pytest.mark.slow  # the default tier keeps one case per kind of refusal


@pytest.mark.parametrize("command, args, message", [  # each case on one of the 4 commands
    ("train", ["--accelerator", "b300", "--clock", "virtual"],
     "unknown accelerator 'b300'; valid: k80"),
    pytest.param("model", ["--accelerator", "b300", "--clock", "virtual"],
                 "unknown accelerator 'b300'; valid: k80", marks=SLOW),
    ("compare", ["--accelerator", "h100", "--clock", "wall"], "--accelerator: virtual-clock only"),
    pytest.param("bench", ["--precision", "fp16", "--clock", "wall"],
                 "--precision: virtual-clock only", marks=SLOW),
    ("train", ["--precision", "bf16", "--accelerator", "v100", "--clock", "virtual"],
     "--precision bf16: v100 has no bf16 arithmetic"),
    pytest.param("bench", ["--precision", "fp16", "--accelerator", "host", "--clock", "virtual"],
                 "--precision fp16 cannot take effect with --accelerator host", marks=SLOW),
    pytest.param("compare", ["--precision", "fp8", "--clock", "virtual"],
                 "unknown precision 'fp8'", marks=SLOW),
])
def test_refused_in_one_line_with_exit_2(command, args, message):
    res = run_mpi(2, ["-m", "mpicomm", command, *args], timeout=90)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count(message) == 1, res.tail()
    assert "Traceback" not in out and "Abort" not in out, res.tail()


def _virtual_train(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    res = run_mpi(2, ["-m", "mpicomm", "train", "--strategy", "ring", "--ranks-per-node", "1",
                      "--inter-link", "20us,1GB/s", "--clock", "virtual", "--steps", "6",
                      "--json", str(out), *extra], timeout=180)
    assert res.returncode == 0, res.tail()
    return json.loads(out.read_text())["results"][0]


@pytest.mark.slow
def test_a_virtual_run_is_the_devices_and_repeats_exactly(tmp_path):
    a = _virtual_train(tmp_path, "a")
    b = _virtual_train(tmp_path, "b")
    assert a["device"]["name"] == "h100" and a["device"]["precision"] == "fp32"
    assert a["step_times_s"] == b["step_times_s"]  # bit for bit, whatever the load
    # a model whose matmuls outweigh its ~30 kernel launches (3 us each on either device): the
    # default MLP is launch-bound on both, and a K80 would look only ~1.7x an H200
    big = ("--layers", "512,2048,2048,10", "--batch-size", "256")
    fast = _virtual_train(tmp_path, "h200", "--accelerator", "h200", *big)
    slow = _virtual_train(tmp_path, "k80", "--accelerator", "k80", *big)
    assert slow["compute_s"] > 10 * fast["compute_s"] > 0
    host = _virtual_train(tmp_path, "host", "--accelerator", "host")
    assert host["device"] is None and host["compute_s"] > 0
