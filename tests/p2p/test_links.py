"""Link strings: units, decimal rates, and one clear error for a bad string (also under mpiexec)."""

import pytest
from mpi_harness import run_mpi

from mpicomm.core.errors import ConfigError
from mpicomm.core.links import LinkSpec, parse_link
from mpicomm.core.options import ReducerOptions


@pytest.mark.parametrize("text,latency,bandwidth", [
    ("20us,1GB/s", 20e-6, 1e9),
    ("5us,100Gb/s", 5e-6, 12.5e9),
    ("1.5ms,500MB/s", 1.5e-3, 5e8),
    ("100ns, 3KB/s", 1e-7, 3e3),
    (" 2s,7B/s ", 2.0, 7.0),
    ("0us,1e3MB/s", 0.0, 1e9),
])
def test_parse_units(text, latency, bandwidth):
    spec = parse_link(text)
    assert spec.latency == pytest.approx(latency) and spec.bandwidth == pytest.approx(bandwidth)
    assert spec.seconds(1000) == pytest.approx(latency + 1000 / bandwidth)


@pytest.mark.parametrize("text", ["20us", "20us,1GBs", "1GB/s,20us", "20 parsecs,1GB/s",
                                  "20us,0GB/s", "20us,1GB/s,3", "-5us,1GB/s", "20us,1gb/s"])
def test_bad_strings_say_what_was_expected(text):
    with pytest.raises(ConfigError, match=r"inter_link=.*expected LATENCY,BANDWIDTH"):
        ReducerOptions(inter_link=text)


def test_none_and_env(monkeypatch):
    assert parse_link(None) is None and parse_link("none") is None
    assert ReducerOptions().inter_link is None
    monkeypatch.setenv("MPICOMM_INTER_LINK", "10us,2GB/s")
    monkeypatch.setenv("MPICOMM_INTRA_LINK", "1us,20GB/s")
    o = ReducerOptions()
    assert isinstance(o.inter_link, LinkSpec) and str(o.inter_link) == "10us,2GB/s"
    assert o.inter_link.latency == pytest.approx(10e-6) and o.inter_link.bandwidth == 2e9
    assert o.intra_link.latency == pytest.approx(1e-6)
    assert ReducerOptions(inter_link="1ms,1MB/s").inter_link.latency == 1e-3  # option wins
    monkeypatch.setenv("MPICOMM_INTER_LINK", "fast")
    with pytest.raises(ConfigError, match="MPICOMM_INTER_LINK='fast': expected"):
        ReducerOptions()


@pytest.mark.parametrize("command", ["bench", "model", "train"])
def test_bad_link_one_clear_error_under_mpiexec(command):
    """Every rank refuses it before any message: exit code 2, the reason printed once."""
    res = run_mpi(3, ["-m", "mpicomm", command, "--inter-link", "20us,1GBs", "--steps", "1"]
                  if command == "train" else
                  ["-m", "mpicomm", command, "--inter-link", "20us,1GBs", "-b", "8", "-e", "8"],
                  timeout=90)
    assert not res.timed_out
    assert res.returncode == 2, res.tail()
    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if "expected LATENCY" in ln]
    assert len(errors) == 1, res.tail()
    assert "20us,1GBs" in errors[0]
