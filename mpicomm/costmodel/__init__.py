"""The α-β-γ cost model: pure formulas (``formulas``, no MPI) and a calibration (``calibrate``).

The cluster model: ``Cluster``/``Link`` (``cluster``), the named clusters (``profiles``),
pipelined formulas for GPU clusters (``cluster_formulas``) and which formula each strategy
uses on a cluster (``cluster_predict.cluster_time``).

``import mpicomm.costmodel`` does not start MPI: only ``calibrate`` imports mpi4py.MPI,
and it is loaded on first use of one of its names.
"""

from mpicomm.costmodel.cluster import Cluster, Link
from mpicomm.costmodel.cluster_formulas import (
    hierarchical_pipelined_time,
    multichannel_ring_time,
    switch_tree_time,
    tree_time,
)
from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.formulas import (
    LinkModel,
    ModelParams,
    auto_crossover,
    emulated_link,
    fit_alpha_beta,
    hierarchical_time,
    predict,
    ps_time,
    ps_time_interfaces,
    rabenseifner_time,
    recursive_doubling_time,
    ring_time,
    with_emulated_links,
)

__all__ = [
    "ring_time", "recursive_doubling_time", "rabenseifner_time", "ps_time",
    "hierarchical_time", "fit_alpha_beta", "LinkModel", "ModelParams", "predict",
    "auto_crossover", "emulated_link", "with_emulated_links", "ps_time_interfaces",
    "pingpong", "exchange", "measure_gamma", "quick_params",
    "Cluster", "Link", "cluster_time", "multichannel_ring_time", "tree_time",
    "hierarchical_pipelined_time", "switch_tree_time",
]

_CALIBRATE = ("pingpong", "exchange", "measure_gamma", "quick_params")


def __getattr__(name: str):
    if name in _CALIBRATE:
        from mpicomm.costmodel import calibrate

        return getattr(calibrate, name)
    raise AttributeError(f"module 'mpicomm.costmodel' has no attribute {name!r}")
