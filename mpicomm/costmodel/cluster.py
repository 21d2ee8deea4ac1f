"""One cluster description, read by the predictor (``model --predict``) and the virtual clock.

A ``Cluster`` is frozen data: the node layout (ranks and NICs per node), one ``Link``
per link class (``"intra"``: NVLink/PCIe inside a node; ``"inter"``: the NIC and fabric
between nodes), an optional in-network reduction (``in_network``: NVLink SHARP or
InfiniBand SHARP, a switch that sums), the per-call base latency ``alpha_call_s``, the
number of channels (rings NCCL runs side by side; 0 = one per NIC), γ, and ``pipelined``:
True for a GPU cluster running NCCL-style chunked streams (hops and phases overlap), False
for mpicomm's own reducers over MPI, which block on one exchange per step (an emulated-link
run: ``cluster_from_links``), so a step waits for its slowest link and phases add up.

The small interface the virtual clock needs:

    cluster.link("intra" | "inter") -> (alpha_s, beta_s_per_byte)   # β = 1/(rate·efficiency)
    cluster.nics_per_node

Every ``Link`` states its source. The named profiles live in ``mpicomm.costmodel.profiles``;
the strategy formulas over a cluster in ``mpicomm.costmodel.cluster_predict``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpicomm.core.errors import ConfigError

__all__ = ["Link", "Cluster", "LINK_CLASSES", "cluster_from_links"]

LINK_CLASSES = ("intra", "inter")


@dataclass(frozen=True)
class Link:
    """One link class: α seconds per step, the line rate of one direction, the achieved share.

    Attributes:
        alpha_s: latency of one step (hop) on this link, seconds.
        bytes_per_s: line rate of ONE direction of one link (one NIC, one GPU's NVLink), B/s.
        efficiency: share of the line rate a collective achieves (protocol overhead); β uses it.
        source: where the figures come from.
    """

    alpha_s: float
    bytes_per_s: float
    efficiency: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and self.bytes_per_s > 0 and 0 < self.efficiency <= 1):
            raise ConfigError(f"link: need alpha >= 0, rate > 0 and 0 < efficiency <= 1, got "
                              f"{self.alpha_s}, {self.bytes_per_s}, {self.efficiency}")

    @property
    def beta(self) -> float:
        """Seconds per byte as achieved: 1/(rate·efficiency)."""
        return 1.0 / (self.bytes_per_s * self.efficiency)

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes_per_s * self.efficiency


@dataclass(frozen=True)
class Cluster:
    """A cluster: layout, two link classes, optional switch reduction, per-call α and γ.

    Field order keeps the older ``Profile(name, ranks_per_node, intra, inter, gamma,
    nics_per_node, source)`` calls working.
    """

    name: str
    ranks_per_node: int
    intra: Link
    inter: Link
    gamma_s_per_byte: float
    nics_per_node: int = 1
    source: str = ""
    alpha_call_s: float = 0.0  # base latency of one collective call (launch, completion)
    channels: int = 0  # rings side by side (NCCL channels); 0 = one per NIC
    in_network: Link | None = None  # a switch that reduces (NVLS, SHARP): α, rate, efficiency
    pipelined: bool = True  # NCCL-style chunked streams; False: one blocking exchange per step

    def __post_init__(self) -> None:
        if self.ranks_per_node < 1 or self.nics_per_node < 1 or self.channels < 0:
            raise ConfigError(f"cluster {self.name}: ranks and NICs per node must be >= 1, "
                              "channels >= 0")

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


def cluster_from_links(ranks_per_node: int, inter, intra=None, nics_per_node: int | None = None,
                       gamma_s_per_byte: float = 0.0, name: str = "emulated") -> Cluster:
    """A cluster from emulated link specs (``core.links.LinkSpec``: ``latency``, ``bandwidth``).

    For ``--inter-link``/``--intra-link`` runs: each spec becomes a ``Link`` at line rate
    (efficiency 1, as the emulation holds exactly latency + m/bandwidth); a missing intra
    spec takes the inter one; no per-call α, no reducing switch; one interface per rank
    (the emulation holds each sender's own interface) unless ``nics_per_node`` says
    otherwise; not pipelined (mpicomm's reducers block on one exchange per step).
    """
    def link(spec, what: str) -> Link:
        return Link(float(spec.latency), float(spec.bandwidth), 1.0, f"{what} link {spec}")

    inter_link = link(inter, "inter-node")
    intra_link = link(intra, "intra-node") if intra is not None else inter_link
    return Cluster(name, ranks_per_node, intra_link, inter_link, gamma_s_per_byte,
                   nics_per_node or ranks_per_node, "links from the command line",
                   pipelined=False)
