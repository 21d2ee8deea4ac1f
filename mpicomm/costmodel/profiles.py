"""Named clusters (``Cluster``), each with the figures it is built from and their sources.

No parameter is fitted to the validation points (experiments/validation): line rates come
from datasheets, efficiencies and latencies from published statements and NCCL's own
tuning model, quoted here. The one exception is marked: the Ethernet (GPUDirect-TCPXO)
fabric has no such statement, so its α and efficiency come from one published table whose
two rows used are left out of the validation score.

Sources (S1..S8 are cited by the profiles below):

S1  NVIDIA H100 datasheet: NVLink 900 GB/s per GPU (both directions) -> 450 GB/s one way.
S2  DGX H100 / DGX B200 datasheets: 8x single-port ConnectX-7, 400 Gb/s (50 GB/s) each.
S3  nccl-tests issue #212 (sjeaugey, NCCL maintainer): "With the protocol overhead (~20%)
    NCCL can get an effective NVLink bandwidth of 370GB/s" -> NVLink efficiency 370/450;
    "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" with NVLink
    SHARP -> switch-reduction efficiency 275/450.
S4  nccl-tests issue #290 (AddyLaddy, NVIDIA): "For NDR @ 400Gbps you should see 46-48GB/s
    per NIC" -> InfiniBand/RoCE efficiency 47/50.
S5  NCCL src/graph/tuning.cc (recent releases): baseLat Ring/LL 6.6 us (per call); hwLat
    NVLink Ring/LL 0.6 us (per intra step); NET Tree/LL 5.0 us (per inter step; Ring/LL
    2.7 us: the larger is taken); NVLS NVLink 25 us (switch reduction).
S6  NVIDIA B200: NVLink 5, 1.8 TB/s per GPU -> 900 GB/s one way; HBM3e 8 TB/s.
S7  DGX A100 datasheet: NVLink 3 600 GB/s per GPU -> 300 GB/s one way; 8x ConnectX-6
    HDR 200 Gb/s (25 GB/s); HBM2e 2.0 TB/s.
S9  NVIDIA GB200 NVL72: 72 Blackwell GPUs in one NVLink domain (NVLink 5, 1.8 TB/s per GPU),
    each compute tray's 4 GPUs with 4x ConnectX-7 400 Gb/s: one NIC per GPU.
S8  GCP A3 Mega (8x H100, 8x 200 Gb/s NICs, GPUDirect-TCPXO), nccl-tests table in
    github.com/lessizzmore/create-a3mega-ztan-fork file ztan-NCCL-test-result, 16 GPUs:
    8 B in 135.8 us -> per inter step (135.8 - 6.6 - 2*7*0.6)/2 = 60.4 us through the tree
    formula; 8 GiB at algbw 180.71 GB/s on 8x25 GB/s -> efficiency 0.90. Calibration rows.

γ: an in-place add reads two bytes and writes one per byte: HBM rate / 3 (H100 3.35 TB/s ->
~1 TB/s; B200 8 TB/s -> 2.7 TB/s; A100 2.0 TB/s -> 0.67 TB/s).
"""

from __future__ import annotations

from dataclasses import replace

from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.cluster import Cluster, Link

__all__ = ["CLUSTERS", "cluster", "NVLINK_EFF", "IB_EFF", "NVLS_EFF", "ETH_EFF"]

_GB = 1e9
NVLINK_EFF = 370 / 450  # S3
NVLS_EFF = 275 / 450  # S3
IB_EFF = 47 / 50  # S4
ETH_EFF = 0.90  # S8 (calibration)
_CALL, _NVL_STEP, _IB_STEP, _NVLS_LAT = 6.6e-6, 0.6e-6, 5.0e-6, 25e-6  # S5
_ETH_STEP = 60.4e-6  # S8 (calibration)


def _nvlink(rate: float, src: str) -> Link:
    return Link(_NVL_STEP, rate, NVLINK_EFF, f"{src}; efficiency S3; alpha S5")


def _nvls(rate: float, src: str) -> Link:
    return Link(_NVLS_LAT, rate, NVLS_EFF, f"NVLink SHARP at {src}; efficiency S3; alpha S5")


def _ib(gbps: float, src: str) -> Link:
    return Link(_IB_STEP, gbps * _GB / 8, IB_EFF, f"{gbps:g} Gb/s per NIC ({src}); "
                                                   "efficiency S4; alpha S5")


def _eth(gbps: float, src: str) -> Link:
    return Link(_ETH_STEP, gbps * _GB / 8, ETH_EFF, f"{gbps:g} GbE per NIC ({src}); "
                                                    "efficiency and alpha S8 (calibration)")


_H100 = dict(ranks_per_node=8, intra=_nvlink(450 * _GB, "S1"), gamma_s_per_byte=1 / (1000 * _GB),
             alpha_call_s=_CALL, in_network=_nvls(450 * _GB, "S1"))
_PCIE = Link(10e-6, 25 * _GB, 1.0, "PCIe Gen4 x16: 32 GB/s spec, 25 GB/s achieved (assumed)")

CLUSTERS: dict[str, Cluster] = {c.name: c for c in (
    Cluster("dgx-h100-ib400", inter=_ib(400, "S2"), nics_per_node=8,
            source="DGX H100: 8 H100 on NVLink 4 (S1), 8x NDR 400 Gb/s (S2)", **_H100),
    Cluster("dgx-h100-ib200", inter=_ib(200, "HDR"), nics_per_node=8,
            source="as dgx-h100-ib400 with HDR InfiniBand, 200 Gb/s per NIC", **_H100),
    Cluster("dgx-b200-ib400", 8, _nvlink(900 * _GB, "S6"), _ib(400, "S2"), 3 / (8000 * _GB), 8,
            "DGX B200: 8 B200 on NVLink 5 (S6), 8x ConnectX-7 400 Gb/s (S2)", _CALL,
            in_network=_nvls(900 * _GB, "S6")),
    Cluster("gb200-nvl72", 72, _nvlink(900 * _GB, "S9"), _ib(400, "S9"), 3 / (8000 * _GB), 72,
            "GB200 NVL72: one 72-GPU NVLink 5 domain (S9) with NVLink SHARP; 400 Gb/s per GPU "
            "between racks", _CALL, in_network=_nvls(900 * _GB, "S9")),
    Cluster("dgx-a100-ib200", 8, _nvlink(300 * _GB, "S7"), _ib(200, "S7"), 3 / (2000 * _GB), 8,
            "DGX A100: 8 A100 on NVLink 3, 8x HDR 200 Gb/s (S7); no NVLink SHARP", _CALL),
    Cluster("gcp-a3-mega", inter=_eth(200, "S8"), nics_per_node=8,
            source="GCP A3 Mega: 8 H100 (S1), 8x 200 Gb/s GPUDirect-TCPXO Ethernet (S8)",
            **_H100),
    Cluster("ethernet-400g", inter=replace(_ib(400, "RoCE, S2"), source="400 GbE RoCE per NIC "
                                           "(RDMA: S4's efficiency, S5's alpha)"),
            nics_per_node=8, source="8 H100 (S1) with 8x 400 GbE RoCE NICs", **_H100),
    Cluster("ethernet-100g", 8, _PCIE, _eth(100, "one per node"), 1 / (1000 * _GB), 1,
            "8 GPUs on PCIe Gen4, ONE 100 GbE NIC per node shared by its 8 ranks", _CALL),
    Cluster("ethernet-25g", 8, _PCIE, _eth(25, "one per node"), 1 / (1000 * _GB), 1,
            "8 GPUs on PCIe Gen4, ONE 25 GbE NIC per node shared by its 8 ranks", _CALL),
)}


def cluster(name: str) -> Cluster:
    """The named cluster; ``ConfigError`` listing the valid names otherwise."""
    if name not in CLUSTERS:
        raise ConfigError(f"unknown profile {name!r}; valid profiles: {', '.join(CLUSTERS)}")
    return CLUSTERS[name]
