"""The one cluster description, read by the predictor (``model --predict``) and the virtual clock.

A ``Cluster`` is frozen data: the node layout (ranks and NICs per node), one ``Link``
(``mpicomm.core.links.Link``, the one link type) per link class (``"intra"``: NVLink/PCIe
inside a node; ``"inter"``: one NIC and the fabric between nodes), an optional in-network
reduction (``in_network``: NVLink SHARP or InfiniBand SHARP, a switch that sums), the
per-call base latency ``alpha_call_s``, the number of channels (rings NCCL runs side by
side; 0 = one per NIC), γ, ``pipelined`` (True for a GPU cluster running NCCL-style chunked
streams, where hops and phases overlap; False for mpicomm's own reducers, which block on one
exchange per step, so a step waits for its slowest link and phases add up) and ``device``
(the modelled accelerator, ``mpicomm.costmodel.device.Device``; None: the compute is
charged as before the device model).

``build_cluster`` (``costmodel.profiles``) is the one place a run's flags become a
``Cluster``: ``train``, ``compare``, ``bench`` and ``model --predict`` given the same flags
model the same cluster, and ``Cluster.line()`` is the line each prints.

The small interface the virtual clock needs:

    cluster.link("intra" | "inter") -> (alpha_s, beta_s_per_byte)   # β = 1/(rate·efficiency)
    cluster.nics_per_node
    cluster.intra, cluster.inter     # Link, or a MeasuredLink (--links-from)

Every ``Link`` of a profile states its source. The named profiles live in
``mpicomm.costmodel.profiles``; the cost of each algorithm over a cluster in
``mpicomm.costmodel.cluster_predict`` (docs/layout.md says which file holds which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpicomm.core.errors import ConfigError
from mpicomm.core.links import Link

__all__ = ["Link", "Cluster", "LINK_CLASSES", "DEFAULT_INTRA", "DEFAULT_INTER",
           "DEFAULT_GAMMA_S_PER_BYTE"]

LINK_CLASSES = ("intra", "inter")
# a class no flag and no profile sets: shared memory on one host; a 100 Gb/s fabric
DEFAULT_INTRA = Link(1e-6, 10e9, text="1us,10GB/s")
DEFAULT_INTER = Link(5e-6, 12.5e9, text="5us,100Gb/s")
DEFAULT_GAMMA_S_PER_BYTE = 1 / 1000e9  # an add at a GPU's HBM rate / 3 (profiles: γ)


@dataclass(frozen=True)
class Cluster:
    """A cluster: layout, two link classes, optional switch reduction, per-call α, γ, device.

    Positional order: ``Cluster(name, ranks_per_node, intra, inter, gamma, nics_per_node,
    source)``.
    """

    name: str
    ranks_per_node: int
    intra: Any  # Link, or a calibrate.MeasuredLink (same alpha_s, beta, bytes_per_s)
    inter: Any
    gamma_s_per_byte: float
    nics_per_node: int = 1
    source: str = ""
    alpha_call_s: float = 0.0  # base latency of one collective call (launch, completion)
    channels: int = 0  # rings side by side (NCCL channels); 0 = one per NIC
    in_network: Link | None = None  # a switch that reduces (NVLS, SHARP): α, rate, efficiency
    pipelined: bool = True  # NCCL-style chunked streams; False: one blocking exchange per step
    device: Any = None  # costmodel.device.Device (the `device` work fills it); None: unset
    nccl: str = ""  # the NCCL release it runs, where that release has its own latency figures
    # (``profiles.nccl_protocols``); "": NCCL's current tuning model
    launch_s: float = 0.0  # a local add's kernel launch in mpicomm's own reducers (not
    # ``pipelined``: each add is a kernel, ``core.flops.add``); 0 where adds are fused

    def __post_init__(self) -> None:
        if self.ranks_per_node < 1 or self.nics_per_node < 1 or self.channels < 0:
            raise ConfigError(f"cluster {self.name}: ranks and NICs per node must be >= 1, "
                              "channels >= 0")
        if not 0 <= self.launch_s < float("inf"):
            raise ConfigError(f"cluster {self.name}: launch_s must be finite and >= 0, got "
                              f"{self.launch_s!r}")

    def link(self, cls: str) -> tuple[float, float]:
        """(α seconds per step, β seconds per byte) of link class ``"intra"`` or ``"inter"``."""
        if cls not in LINK_CLASSES:
            raise ConfigError(f"link class {cls!r}: expected one of {', '.join(LINK_CLASSES)}")
        link = self.intra if cls == "intra" else self.inter
        return link.alpha_s, link.beta

    @property
    def channel_count(self) -> int:
        """Rings a multi-channel ring runs: ``channels``, or one per NIC."""
        return self.channels or self.nics_per_node

    def line(self) -> str:
        """The one line every run prints for the cluster it models (``compare --profile X``
        and ``model --predict --profile X`` print the same)."""
        parts = [f"cluster {self.name}: {self.ranks_per_node} ranks/node, "
                 f"{self.nics_per_node} NIC(s)/node",
                 f"intra {_fmt(self.intra)}", f"inter {_fmt(self.inter)}"]
        if self.alpha_call_s:
            parts.append(f"per-call alpha {self.alpha_call_s * 1e6:g}us")
        if self.in_network is not None:
            parts.append(f"reducing switch {_fmt(self.in_network)}")
        if self.device is not None:
            parts.append(f"device {getattr(self.device, 'name', self.device)}")
        if self.nccl:
            parts.append(f"NCCL {self.nccl}")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        """The cluster for a JSON record: the line and each field in plain numbers."""
        def link(x: Any) -> dict | None:
            if x is None:
                return None
            return {"alpha_s": x.alpha_s, "bytes_per_s": x.bytes_per_s,
                    "efficiency": getattr(x, "efficiency", 1.0), "text": str(x)}

        return {"line": self.line(), "name": self.name, "ranks_per_node": self.ranks_per_node,
                "nics_per_node": self.nics_per_node, "intra": link(self.intra),
                "inter": link(self.inter), "in_network": link(self.in_network),
                "gamma_s_per_byte": self.gamma_s_per_byte, "alpha_call_s": self.alpha_call_s,
                "channels": self.channels, "pipelined": self.pipelined, "nccl": self.nccl,
                "launch_s": self.launch_s,
                "device": None if self.device is None else getattr(self.device, "name",
                                                                   str(self.device)),
                "source": self.source}


def _fmt(link: Any) -> str:
    """A link as 'α,rate' (x efficiency when below 1)."""
    eff = getattr(link, "efficiency", 1.0)
    text = (f"{link.alpha_s * 1e6:g}us,{link.bytes_per_s / 1e9:g}GB/s"
            + ("" if eff == 1 else f" x{eff:.2f}"))
    measured = hasattr(link, "queue_seconds")
    return f"measured ({link})" if measured else text
