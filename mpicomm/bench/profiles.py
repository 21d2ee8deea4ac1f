"""Cluster profiles for ``mpicomm model --predict``: the links practitioners meet, α and bandwidth.

Each profile is a node layout (ranks per node, NICs per node) and three numbers
per level: α (seconds per message step), the bandwidth of one direction of one
link (bytes/s), and γ (seconds per byte to add two buffers). The figures are
vendor spec sheets and typical measured latencies; they are assumptions, stated
in ``docs/experiments.md`` ("Cluster profiles"), not measurements:

    dgx-h100-ib400  8 H100 per node; NVLink 4 900 GB/s bidirectional per GPU → 450 GB/s
                    one way, α 3 µs; 8 NDR InfiniBand NICs per node (one per GPU,
                    rail-optimised), 400 Gb/s = 50 GB/s each, α 6 µs; γ at HBM3 speed
    dgx-h100-ib200  the same nodes on HDR InfiniBand, 200 Gb/s = 25 GB/s per NIC
    ethernet-25g    8 GPUs per node on PCIe Gen4 x16 (≈ 25 GB/s one way, α 10 µs),
                    ONE 25 GbE NIC per node (3.125 GB/s) shared by its 8 ranks, α 30 µs (TCP)
    this-machine    α, β(m), γ(m) measured here by ``mpicomm model`` (a saved JSON)

``this-machine`` loads the newest ``model`` JSON: ``--params FILE``, else
``experiments/results/this_machine.json``, else ``experiments/results/model_2ranks.json``;
``--calibrate`` measures afresh (2 ranks under mpiexec) and saves to the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.formulas import LinkModel, ModelParams

__all__ = ["Level", "Profile", "PROFILES", "profile", "measured_params", "calibrate",
           "DEFAULT_PARAMS_PATHS"]

DEFAULT_PARAMS_PATHS = ("experiments/results/this_machine.json",
                        "experiments/results/model_2ranks.json")


@dataclass(frozen=True)
class Level:
    """One kind of link: α seconds per step and one direction's bandwidth in bytes/s."""

    alpha_s: float
    bytes_per_s: float

    @property
    def beta(self) -> float:
        return 1.0 / self.bytes_per_s


@dataclass(frozen=True)
class Profile:
    """A cluster: node layout, two link levels and γ; ``source`` names the sources."""

    name: str
    ranks_per_node: int
    intra: Level
    inter: Level
    gamma_s_per_byte: float
    nics_per_node: int = 1
    source: str = ""


_GB = 1e9
_HBM_ADD = 1.0 / (1000 * _GB)  # in-place add on HBM3 (3.35 TB/s, 3 bytes moved per byte): ≈1 ps/B

PROFILES: dict[str, Profile] = {
    "dgx-h100-ib400": Profile(
        "dgx-h100-ib400", 8, Level(3e-6, 450 * _GB), Level(6e-6, 50 * _GB), _HBM_ADD, 8,
        "NVLink 4: 900 GB/s bidirectional per H100 (NVIDIA H100 datasheet) = 450 GB/s one way; "
        "8x ConnectX-7 NDR 400 Gb/s per DGX H100 node = 50 GB/s per GPU; alpha 3 us NVLink, "
        "6 us IB per step (typical NCCL step latencies, assumed)"),
    "dgx-h100-ib200": Profile(
        "dgx-h100-ib200", 8, Level(3e-6, 450 * _GB), Level(6e-6, 25 * _GB), _HBM_ADD, 8,
        "as dgx-h100-ib400 with HDR InfiniBand, 200 Gb/s = 25 GB/s per NIC"),
    "ethernet-25g": Profile(
        "ethernet-25g", 8, Level(10e-6, 25 * _GB), Level(30e-6, 25e9 / 8), _HBM_ADD, 1,
        "PCIe Gen4 x16 (32 GB/s spec, 25 GB/s achieved) inside the node, alpha 10 us; one "
        "25 GbE NIC per node (3.125 GB/s) shared by 8 ranks, alpha 30 us (TCP, assumed)"),
}
MEASURED = "this-machine"


def profile(name: str) -> Profile:
    """Return the named profile; ``ConfigError`` listing the valid names otherwise."""
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; valid profiles: "
                          f"{', '.join([*PROFILES, MEASURED])}")
    return PROFILES[name]


def _link(d: dict) -> LinkModel:
    keys = ("alpha", "sizes", "beta", "beta_fit", "pair", "beta_x", "alpha_x", "beta_x_fit")
    return LinkModel(**{k: d[k] for k in keys if k in d})


def measured_params(path: str | None = None) -> tuple[ModelParams, str]:
    """Load the α-β-γ parameters a ``model`` run saved (its ``params``); return them and the file.

    Raises ``ConfigError`` naming the files tried when none holds parameters.
    """
    tried = [path] if path else list(DEFAULT_PARAMS_PATHS)
    for p in tried:
        if p and os.path.exists(p):
            try:
                d = json.loads(Path(p).read_text())["params"]
                params = ModelParams(_link(d["intra"]), _link(d["inter"]), d["gamma_sizes"],
                                     d["gamma"], d.get("num_nodes", 1), d.get("local_size", 1),
                                     gamma_local=d.get("gamma_local"))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{p}: not a 'mpicomm model --json' file with params "
                                  f"({type(exc).__name__}: {exc})") from None
            return params, p
    raise ConfigError(f"this-machine: no saved model parameters (tried {', '.join(tried)}); "
                      "run with --calibrate, or `mpiexec -n 2 python -m mpicomm model --json F` "
                      "and pass --params F")


def calibrate(path: str = DEFAULT_PARAMS_PATHS[0], timeout_s: float = 300.0) -> str:
    """Measure this machine's α, β(m), γ(m) in a short 2-rank ``model`` run; return the JSON."""
    from mpicomm.bench.launch import mpiexec_command

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    cmd = mpiexec_command(2, ["model", "--strategies", "ring", "-b", "1M", "-e", "64M", "-f", "4",
                              "-n", "5", "--json", path])
    done = subprocess.run(cmd, timeout=timeout_s, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise ConfigError(f"calibration failed (exit {done.returncode}): {' '.join(cmd)}")
    return path
