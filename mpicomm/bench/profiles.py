"""Cluster profiles for ``mpicomm model --predict``: the named clusters, and this machine.

The clusters themselves (layout, links with their efficiencies, per-call α, NICs, the
reducing switch, each figure with its source) are ``mpicomm.costmodel.profiles``, read
by the predictor and the virtual clock alike (a ``costmodel.cluster.Cluster`` each). This
module adds the one profile that is measured:

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
from pathlib import Path

from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.calibrate import HOST_PARAMS_PATHS
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.formulas import LinkModel, ModelParams
from mpicomm.costmodel.profiles import CLUSTERS

__all__ = ["PROFILES", "profile", "measured_params", "calibrate",
           "DEFAULT_PARAMS_PATHS"]

DEFAULT_PARAMS_PATHS = HOST_PARAMS_PATHS  # where --calibrate saves; --links-from reads


PROFILES: dict[str, Cluster] = CLUSTERS
MEASURED = "this-machine"


def profile(name: str) -> Cluster:
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
