"""The α-β-γ model beside each measured row of ``python -m mpicomm model`` (measuring mode).

``predicted`` is the model's time for one call of the run: under the virtual clock the
one predictor (``costmodel.cluster_predict.cluster_time``) on the cluster the clock
charges; under the wall clock the formulas on this host's measured links. The command
itself (flags, table) is ``cli/model.py``.
"""

from __future__ import annotations

import dataclasses

from mpicomm.core import clock, flops
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.formulas import ModelParams, predict

__all__ = ["predicted", "add_predictions"]


def predicted(strategy: str, p: int, n: int, params: ModelParams | None, options: dict,
              charged: Cluster | None = None) -> float | None:
    """The model's seconds for one call of the run: under the virtual clock the cost model
    on ``charged``, the cluster the clock charges (``cluster_time``, the one predictor), with
    the γ and the launch the clock charges an add: the modelled device's (``flops.gamma``,
    ``flops.launch``), or under
    ``--accelerator host`` γ as measured here x ``--compute-scale`` (CPU time); under the
    wall clock the α-β-γ formulas on this host's measured links (``formulas.predict``)."""
    if charged is not None:
        vc = clock.virtual()
        gamma = flops.gamma() if flops.active() else \
            params.gamma_at(n / p) * (1.0 if vc is None else vc.scale)
        cluster = dataclasses.replace(charged, gamma_s_per_byte=max(gamma, 1e-300),
                                      launch_s=flops.launch())  # an add's kernel, as charged
        return cluster_time(strategy, p, n, cluster, options)
    return predict(strategy, p, n, params, options, options["crossover_bytes"])


def add_predictions(rows: list[dict], p: int, params: ModelParams | None, options: dict,
                    charged: Cluster | None) -> None:
    """Set each row's ``predicted_us`` and ``measured_over_predicted`` (None where unknown)."""
    for row in rows:
        t = predicted(row["strategy"], p, row["bytes"], params, options, charged)
        row["predicted_us"] = None if t is None else t * 1e6
        row["measured_over_predicted"] = None if not t else row["time_us"] / (t * 1e6)
