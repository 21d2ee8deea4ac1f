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
    NVLink Ring/LL 0.6 us (per intra step); NET Ring/LL 2.7 us (per inter step: the least
    a network hop costs in NCCL's model; the tree's 5.0 us and the other protocols' hops
    are NCCL's own, ``NCCL_PROTOCOLS`` S11); NVLS NVLink 25 us (switch reduction).
    (Until 2026-12-01 the larger, NET Tree/LL 5.0 us, was taken here, and it floored every
    NCCL ring's network hop at the tree's: NCCL's model charges a ring 2.7 us. The 2019
    Summit rings of docs/validation.md showed it; NCCL's constant is what is used.)
S6  NVIDIA B200: NVLink 5, 1.8 TB/s per GPU -> 900 GB/s one way; HBM3e 8 TB/s.
S7  DGX A100 datasheet: NVLink 3 600 GB/s per GPU -> 300 GB/s one way; 8x ConnectX-6
    HDR 200 Gb/s (25 GB/s); HBM2e 2.0 TB/s.
S10 AWS p5.48xlarge: 8 H100, 32x 100 Gb/s EFA v2 (4 per GPU: 400 Gb/s per GPU), through
    AWS's NCCL network plugin (github.com/aws/aws-ofi-nccl, master 2daf7d3, 2026-08):
    src/platform-aws.cpp declares for "p5/p5e" ``.latency = 75.0`` (us), which NCCL adds to
    every network hop of its tuning model, twice for the Simple protocol (S11:
    ``interLat += graphs[a]->latencyInter; if (p == NCCL_PROTO_SIMPLE) interLat +=
    graphs[a]->latencyInter``) -> ``NET_PLUGIN_LATENCY``; the profile's own α per inter
    step is NCCL's NET Tree/LL 5.0 us + 75 us. Bandwidth: the plugin's tuner
    (src/tuner/nccl_ofi_model.cpp) takes 12.5 GiB/s per 100 Gb/s rail, above the line
    rate, so the line rate is taken (efficiency 1.0).
S11 NCCL src/graph/tuning.cc (NVIDIA/nccl master, commit 5067397, 2026-06): the per-protocol
    tuning model ``NCCL_PROTOCOLS`` below: baseLatencies, hwLatencies (NVLINK, NET) per
    algorithm and protocol, the bandwidth refinements (ring LL x0.5, ring LL128 x0.92, tree
    allreduce x0.92 then LL x1/3.8, LL128 x120/128 across nodes or 7/9 in one node), the
    ring Simple "plateau effect" (latency x1.4 across nodes) and ``treeCorrectionFactor``;
    ``getNetOverhead``: a ring that crosses nodes pays at least 1.0 us per step on an Intel
    host, 2.0 us on an AMD one (x3 for Simple) -> ``net_overhead`` by the host CPU of S12;
    ``llMaxBws``: the LL protocol's bus bandwidth cap, by GPU generation in one node
    (Ampere 87.7, Hopper 141, Blackwell 282 GB/s) and by host CPU across nodes (Intel
    39.0 on 2 nodes, 20.4 on more; AMD 22.5 and 19.0) -> ``ll_max_busbw``.
S12 Host CPUs (datasheets): DGX H100 2x Intel Xeon Platinum 8480C; DGX B200 2x Intel Xeon
    Platinum 8570; DGX A100 2x AMD EPYC 7742; AWS p5.48xlarge 3rd-gen AMD EPYC; GCP A3 Mega
    Intel Sapphire Rapids; GB200 NVL72 Grace (Arm: NCCL's default 1.0); Summit 2x IBM POWER9
    (S13; not AMD: NCCL's default 1.0 us and the Intel row of ``llMaxBws``).
S13 OLCF Summit User Guide (github.com/olcf/olcf-user-docs, systems/summit_user_guide.rst):
    "two IBM POWER9 processors and six NVIDIA Volta V100 accelerators" per node; NVLink
    "Each link has a peak bandwidth of 25 GB/s (in each direction), and since there are 2
    links between processors, data can be transferred from GPU-to-GPU and CPU-to-GPU at a
    peak rate of 50 GB/s"; "a dual-rail EDR InfiniBand network providing a node injection
    bandwidth of 23 GB/s ... Non-blocking Fat Tree" -> 2 NICs of 100 Gb/s (EDR, 12.5 GB/s),
    efficiency 23/25; V100 HBM2 "up to 900 GB/s". NCCL's LL cap for Volta in one node:
    ``llMaxBws`` Volta-N1 39.0 GB/s (S11).
S9  NVIDIA GB200 NVL72: 72 Blackwell GPUs in one NVLink domain (NVLink 5, 1.8 TB/s per GPU),
    each compute tray's 4 GPUs with 4x ConnectX-7 400 Gb/s: one NIC per GPU.
S8  GCP A3 Mega (8x H100, 8x 200 Gb/s NICs, GPUDirect-TCPXO), nccl-tests table in
    github.com/lessizzmore/create-a3mega-ztan-fork file ztan-NCCL-test-result, 16 GPUs:
    8 B in 135.8 us -> per inter step (135.8 - 8.4 - 2*7*4.0)/2 = 35.7 us through the tree
    formula with NCCL's Simple constants (S11: base 8.4 us, NVLink hop 4.0 us; the only
    protocol A3 Mega runs, S14); 8 GiB at algbw 180.71 GB/s on 8x25 GB/s -> efficiency
    0.90. Calibration rows. (Until 2026-12-03 the 8 B row was read through the LL tree,
    6.6 and 0.6 us, giving 60.4 us: A3 Mega does not run LL, S14.) The generic Ethernet
    profiles (ethernet-100g, -25g) run all of NCCL's protocols, so at 8 B their NCCL picks
    LL: for them the same row is read through the LL tree, (135.8 - 6.6 - 2*7*0.6)/2 =
    60.4 us per inter step, the α with which a profile that runs LL reproduces the row.
S14 Google's nccl-tests recipe for A3 Mega (github.com/AI-Hypercomputer/gpu-recipes,
    src/helm-charts/a3mega/nccl-tests/run_test.sh, commit d9e8da3): ``NCCL_ALGO="Ring,Tree"``,
    ``NCCL_PROTO=Simple``, ``NCCL_NVLS_ENABLE="0"`` (the same in GCP's TCPXO environment
    profile that S8's run passes as ``-x ${HOST_VARS}``) -> ``NCCL_CONFIG``: gcp-a3-mega runs
    ring and tree with the Simple protocol only, and no NVLink SHARP (``in_network`` None).
S15 NCCL src/graph/tuning.cc (S11's commit): ``nvlsEfficiency`` Hopper 0.85, Blackwell 0.74
    (the share of the NVLink bandwidth NVLS reaches) -> a Blackwell switch reduction is
    S3's Hopper measurement x 0.74/0.85 (``NVLS_EFF_BLACKWELL``); ring Simple's plateau
    factor is 1.9 below compute capability 8.0 (Volta: Summit), 1.4 from it.

S16 NCCL 2.4's own latency figures (NVIDIA/nccl tag v2.4.2-1, src/init.cu,
    ``ncclTreeThreshold``, the model NCCL 2.4 chose between ring and tree with; NCCL's tuning
    model, src/graph/tuning.cc, first appears in 2.5.6): ``ringlatinter = 6`` us per rank,
    ``ringlat = ringlatinter*(nranks-1)``; ``treelatinter = 15``, ``treelatintra = 4``,
    ``treelat = treelatinter*log2(nnodes)+treelatintra*(nranks/nnodes-1)`` (log2 rounded down),
    whole-allreduce latencies with no per-call term. Per hop of the model's formulas (a ring
    crosses 2(p-1) hops, a tree 2((L-1) + log2 m), log2 rounded up there: the same for a
    power-of-two node count): ring 3.0 us, tree 2.0 us in a node and 7.5 us between nodes,
    base 0 -> ``NCCL_RELEASE_PROTOCOLS["2.4"]``. NCCL 2.4 has LL and
    Simple (LL128 came with 2.5: v2.4.2-1 src/enqueue.cu builds LL and Simple kernels only);
    their bandwidth shares are S11's. A run on 2.4 (``Cluster.nccl``) takes these; NCCL 2.3's
    source (v2.3.7-1 src/init.cu) holds no latency figure, so a 2.3 run, like every run on 2.5
    or later, takes S11's current tuning model (its constants are NVIDIA's latest calibration
    of that model; the releases' own are in docs/validation.md).
S17 nccl-tests run as ONE process driving G GPUs (``-g G``): per call the host thread
    launches one kernel per GPU in turn (NCCL src/group.cc ``doLaunches``, v2.15.5-1: one loop
    over the group's communicators, ``cudaSetDevice`` then ``ncclLaunchKernel``), and
    all_reduce_perf launches its iterations back to back before one wait (nccl-tests
    src/common.cu ``BenchTime``, 2022-11: ``for (iter...) startColl(...)``, then
    ``completeColl``, time = elapsed / iters), so a call takes at least G back-to-back kernel
    launches: G x the device's launch cost (costmodel/device.py E2: 3.0 us) ->
    ``launch_floor``. NVIDIA on the same effect (nccl-tests issue #333, AddyLaddy): "higher
    latency ... due to using multiple GPUs per node (-g 8) instead of one GPU per process ...
    due to the CUDA latency overheads of single process jobs". One GPU per process (G = 1):
    3.0 us, below every NCCL base latency, so never binding.

γ: an in-place add reads two bytes and writes one per byte: HBM rate / 3 (H100 3.35 TB/s ->
~1 TB/s; B200 8 TB/s -> 2.7 TB/s; A100 2.0 TB/s -> 0.67 TB/s; V100 0.9 TB/s -> 0.3 TB/s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mpicomm.core.errors import ConfigError
from mpicomm.core.links import parse_link
from mpicomm.costmodel.cluster import (
    DEFAULT_GAMMA_S_PER_BYTE,
    DEFAULT_INTER,
    DEFAULT_INTRA,
    Cluster,
    Link,
)
from mpicomm.costmodel.device import LAUNCH_S, device

__all__ = ["CLUSTERS", "cluster", "build_cluster", "LINKS_NAME", "profile_fields", "MEASURED",
           "cluster_of", "NVLINK_EFF", "IB_EFF",
           "NVLS_EFF", "ETH_EFF", "Protocol",
           "NCCL_PROTOCOLS", "TREE_CORRECTION", "nccl_protocols", "net_plugin_latency",
           "net_overhead", "ll_max_busbw", "DEVICE_OF", "NCCL_CONFIG", "ring_simple_plateau",
           "NVLS_EFF_BLACKWELL", "NCCL_RELEASE_PROTOCOLS", "nccl_release", "launch_floor"]

_GB = 1e9
NVLINK_EFF = 370 / 450  # S3
NVLS_EFF = 275 / 450  # S3
NVLS_EFF_BLACKWELL = NVLS_EFF * 0.74 / 0.85  # S3 x S15 (NCCL's Blackwell/Hopper NVLS share)
IB_EFF = 47 / 50  # S4
ETH_EFF = 0.90  # S8 (calibration)
_CALL, _NVL_STEP, _IB_STEP, _NVLS_LAT = 6.6e-6, 0.6e-6, 2.7e-6, 25e-6  # S5
_ETH_STEP = 60.4e-6  # S8 (calibration) read through the LL tree: profiles that run LL
_TCPXO_STEP = 35.7e-6  # S8 (calibration) read through the Simple tree: A3 Mega (S14)
_EFA_PLUGIN = 75e-6  # S10: the network plugin's declared latency
_EFA_STEP = _IB_STEP + _EFA_PLUGIN  # S5 + S10
SUMMIT_EDR_EFF = 23 / 25  # S13: 23 GB/s node injection over 2x EDR 12.5 GB/s


def _nvlink(rate: float, src: str) -> Link:
    return Link(_NVL_STEP, rate, NVLINK_EFF, f"{src}; efficiency S3; alpha S5")


def _nvls(rate: float, src: str, eff: float = NVLS_EFF, eff_src: str = "S3") -> Link:
    return Link(_NVLS_LAT, rate, eff, f"NVLink SHARP at {src}; efficiency {eff_src}; alpha S5")


def _nvls_blackwell(src: str) -> Link:
    return _nvls(900 * _GB, src, NVLS_EFF_BLACKWELL, "S3 x S15")


def _ib(gbps: float, src: str) -> Link:
    return Link(_IB_STEP, gbps * _GB / 8, IB_EFF, f"{gbps:g} Gb/s per NIC ({src}); "
                                                   "efficiency S4; alpha S5")


def _eth(gbps: float, src: str, step: float = _ETH_STEP) -> Link:
    return Link(step, gbps * _GB / 8, ETH_EFF, f"{gbps:g} GbE per NIC ({src}); "
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
            in_network=_nvls_blackwell("S6")),
    Cluster("gb200-nvl72", 72, _nvlink(900 * _GB, "S9"), _ib(400, "S9"), 3 / (8000 * _GB), 72,
            "GB200 NVL72: one 72-GPU NVLink 5 domain (S9) with NVLink SHARP; 400 Gb/s per GPU "
            "between racks", _CALL, in_network=_nvls_blackwell("S9")),
    Cluster("dgx-a100-ib200", 8, _nvlink(300 * _GB, "S7"), _ib(200, "S7"), 3 / (2000 * _GB), 8,
            "DGX A100: 8 A100 on NVLink 3, 8x HDR 200 Gb/s (S7); no NVLink SHARP", _CALL),
    Cluster("gcp-a3-mega", inter=_eth(200, "S8, S14", _TCPXO_STEP), nics_per_node=8,
            source="GCP A3 Mega: 8 H100 (S1), 8x 200 Gb/s GPUDirect-TCPXO Ethernet (S8); "
            "NCCL ring and tree, Simple, no NVLink SHARP (S14)",
            **{**_H100, "in_network": None}),
    Cluster("aws-p5-efa", inter=Link(_EFA_STEP, 400 * _GB / 8, 1.0, "4x 100 Gb/s EFA per GPU "
                                     "(S10); alpha S5 + S10's plugin latency"),
            nics_per_node=8, source="AWS p5.48xlarge: 8 H100 (S1), 32x 100 Gb/s EFA v2 (S10)",
            **_H100),
    Cluster("summit-v100-edr", 6, _nvlink(50 * _GB, "S13"),
            Link(_IB_STEP, 100 * _GB / 8, SUMMIT_EDR_EFF, "EDR 100 Gb/s per rail (S13); "
                 "efficiency S13's 23 GB/s node injection; alpha S5"), 3 / (900 * _GB), 2,
            "OLCF Summit: 6 V100 on NVLink 2 (50 GB/s per direction), 2 POWER9, dual-rail "
            "EDR InfiniBand (S13); no NVLink SHARP", _CALL),
    Cluster("ethernet-400g", inter=replace(_ib(400, "RoCE, S2"), source="400 GbE RoCE per NIC "
                                           "(RDMA: S4's efficiency, S5's alpha)"),
            nics_per_node=8, source="8 H100 (S1) with 8x 400 GbE RoCE NICs", **_H100),
    Cluster("ethernet-100g", 8, _PCIE, _eth(100, "one per node"), 1 / (1000 * _GB), 1,
            "8 GPUs on PCIe Gen4, ONE 100 GbE NIC per node shared by its 8 ranks", _CALL),
    Cluster("ethernet-25g", 8, _PCIE, _eth(25, "one per node"), 1 / (1000 * _GB), 1,
            "8 GPUs on PCIe Gen4, ONE 25 GbE NIC per node shared by its 8 ranks", _CALL),
)}


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol's tuning constants (S11), per algorithm: (ring, tree) pairs, seconds.

    ``base``: per-call latency; ``nvlink``/``net``: per intra/inter hop; ``bw``: the share
    of the link bandwidth the protocol achieves (β is divided by it).
    """

    name: str
    base: tuple[float, float]
    nvlink: tuple[float, float]
    net: tuple[float, float]
    bw: tuple[float, float, float]  # ring, tree across nodes, tree in one node


_US = 1e-6
NCCL_PROTOCOLS = (  # S11: baseLatencies, hwLatencies[NVLINK], hwLatencies[NET], refinements
    Protocol("LL", (6.6 * _US, 6.8 * _US), (0.6 * _US, 0.6 * _US), (2.7 * _US, 5.0 * _US),
             (0.5, 0.92 / 3.8, 0.92 / 3.8)),
    Protocol("LL128", (14.0 * _US, 14.0 * _US), (1.9 * _US, 1.25 * _US), (4.0 * _US, 8.5 * _US),
             (0.92, 0.92 * 120 / 128, 0.92 * 7 / 9)),
    Protocol("Simple", (8.4 * _US, 8.4 * _US), (3.4 * _US, 4.0 * _US), (14.0 * _US, 14.0 * _US),
             (1.0, 0.92, 0.92)),
)
# S16: NCCL 2.4's own figures, per hop (ring 6 us per rank = 3 us a hop; tree 15 us per
# log2(nodes) = 7.5 us a network hop, 4 us per rank in a node = 2 us a hop), no per-call base;
# LL and Simple only, with S11's bandwidth shares
_LL, _SIMPLE = NCCL_PROTOCOLS[0], NCCL_PROTOCOLS[2]
_HOPS_2_4 = dict(base=(0.0, 0.0), nvlink=(3.0 * _US, 2.0 * _US), net=(3.0 * _US, 7.5 * _US))
NCCL_RELEASE_PROTOCOLS = {"2.4": (replace(_LL, **_HOPS_2_4), replace(_SIMPLE, **_HOPS_2_4))}
NVLS_SWITCH_S, NVLSTREE_NET_S = 25e-6, 20.9e-6  # S11: NVLINK NVLS Simple; NET NVLSTree Simple
RING_SIMPLE_PLATEAU = 1.4  # S11: ring Simple latency across nodes (compute capability >= 8.0)
RING_SIMPLE_PLATEAU_VOLTA = 1.9  # S15: the same below compute capability 8.0
NCCL_CONFIG = {"gcp-a3-mega": ("Simple",)}  # S14: the protocols a profile's NCCL is set to run
# S11 treeCorrectionFactor[LL, LL128, Simple][log2(n / 64)], 64 B to 256 MiB; 1.0 beyond
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9, .9),
}


# the accelerator each named cluster brings (``Cluster.device``; costmodel/device.py's
# datasheets, the GPUs of S1, S6, S7, S9, S13): the PCIe clusters' GPUs are unnamed (None:
# ``--accelerator`` or the default device)
DEVICE_OF = {"dgx-h100-ib400": "h100", "dgx-h100-ib200": "h100", "dgx-b200-ib400": "b200",
             "gb200-nvl72": "gb200", "dgx-a100-ib200": "a100", "gcp-a3-mega": "h100",
             "aws-p5-efa": "h100", "summit-v100-edr": "v100", "ethernet-400g": "h100",
             "ethernet-100g": None, "ethernet-25g": None}
CLUSTERS = {name: replace(c, device=device(DEVICE_OF[name]) if DEVICE_OF[name] else None)
            for name, c in CLUSTERS.items()}


NET_PLUGIN_LATENCY = {"aws-p5-efa": _EFA_PLUGIN}  # S10; NCCL's own InfiniBand plugin: 0
AMD_HOSTS = frozenset({"dgx-a100-ib200", "aws-p5-efa"})  # S12; the others Intel or Arm
GPU_GENERATION = {"dgx-a100-ib200": "ampere", "dgx-b200-ib400": "blackwell",
                  "gb200-nvl72": "blackwell", "summit-v100-edr": "volta"}  # others Hopper
_LL_MAX_ONE_NODE = {"volta": 39.0e9, "ampere": 87.7e9, "hopper": 141.0e9,
                    "blackwell": 282.0e9}  # S11
_LL_MAX_NODES = {False: (39.0e9, 20.4e9), True: (22.5e9, 19.0e9)}  # S11: (2, more) by AMD


def net_overhead(c: Cluster) -> float:
    """NCCL's least cost of one ring step once the ring crosses nodes (x3 for Simple)."""
    return (2.0 if c.name in AMD_HOSTS else 1.0) * _US


def ll_max_busbw(c: Cluster, nodes: int) -> float:
    """NCCL's cap on the LL protocol's bus bandwidth (B/s) for this cluster and node count."""
    if nodes <= 1:
        return _LL_MAX_ONE_NODE[GPU_GENERATION.get(c.name, "hopper")]
    return _LL_MAX_NODES[c.name in AMD_HOSTS][0 if nodes == 2 else 1]


def net_plugin_latency(c: Cluster) -> float:
    """The network plugin's declared latency NCCL adds per network hop (twice for Simple)."""
    return NET_PLUGIN_LATENCY.get(c.name, 0.0)


def nccl_protocols(c: Cluster) -> tuple[Protocol, ...] | None:
    """NCCL's protocols for a named GPU profile (all of ``CLUSTERS`` run NCCL); None otherwise.

    A cluster built elsewhere (``build_cluster`` of link flags, a test's) keeps its own single α per
    hop; a profile changed by ``dataclasses.replace`` (a NIC count, a rate) keeps its name.
    """
    if c.name not in CLUSTERS or not c.pipelined:
        return None
    allowed = NCCL_CONFIG.get(c.name)
    table = NCCL_RELEASE_PROTOCOLS.get(nccl_release(c.nccl), NCCL_PROTOCOLS)
    return tuple(p for p in table if allowed is None or p.name in allowed)


def nccl_release(version: str) -> str:
    """The release key of ``NCCL_RELEASE_PROTOCOLS`` a version string names ("2.4.2" and
    "2.4" -> "2.4"); "" for none. Only releases with their own figures are keys (S16)."""
    parts = str(version or "").split(".")
    key = ".".join(parts[:2]) if len(parts) >= 2 else ""
    return key if key in NCCL_RELEASE_PROTOCOLS else ""


def launch_floor(c: Cluster, gpus_per_process: int) -> float:
    """The least seconds a call takes when one process drives ``gpus_per_process`` GPUs
    (nccl-tests ``-g G``): G back-to-back kernel launches (S17), at the cluster's device's
    launch cost (device.py E2 where the cluster names no device)."""
    return max(1, int(gpus_per_process)) * getattr(c.device, "launch_s", LAUNCH_S)


def ring_simple_plateau(c: Cluster) -> float:
    """NCCL's factor on ring Simple's latency across nodes (S11, S15: 1.9 on Volta)."""
    volta = GPU_GENERATION.get(c.name) == "volta"
    return RING_SIMPLE_PLATEAU_VOLTA if volta else RING_SIMPLE_PLATEAU


def cluster(name: str) -> Cluster:
    """The named cluster; ``ConfigError`` listing the valid names otherwise."""
    if not isinstance(name, str) or name not in CLUSTERS:
        raise ConfigError(f"unknown profile {name!r}; valid profiles: {', '.join(CLUSTERS)}")
    return CLUSTERS[name]


LINKS_NAME = "links"  # the name of a cluster built from link flags (no --profile)


def build_cluster(profile: str | None = None, *, ranks_per_node: int | None = None,
                  inter: Any = None, intra: Any = None, nics_per_node: int | None = None,
                  links_from: str | None = None, channels: int | None = None,
                  gamma_s_per_byte: float | None = None) -> Cluster:
    """The cluster a run's flags describe: the one place flags become a ``Cluster``.

    With ``profile`` (``--profile NAME``): that named cluster, each field a flag gives
    (``inter``/``intra`` links, ranks and NICs per node, channels, γ) replacing the profile's
    one at a time. Without: mpicomm's own reducers (``pipelined`` False) on the links given
    (``"20us,1GB/s"`` or ``Link``), ``DEFAULT_INTRA``/``DEFAULT_INTER`` for a class none
    gives, or this host's measured links for such a class with ``links_from``; ``nics_per_node``
    defaults to the interfaces that calibration measured between its nodes (``interfaces_per_node``,
    ``costmodel.measure``), else one NIC per rank (``ranks_per_node``), as the virtual clock's
    per-rank interfaces, so the predictor, the clock and every command agree; one channel; each
    local add a kernel of the default device's launch (``device.LAUNCH_S``: the virtual
    clock's device model charges it, ``core.flops.add``).

    Raises ``ConfigError`` for an unknown profile, a bad link or a count < 1.
    """
    inter, intra = parse_link(inter, "inter_link"), parse_link(intra, "intra_link")
    for what, v in (("ranks_per_node", ranks_per_node), ("nics_per_node", nics_per_node),
                    ("channels", channels)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{what} must be an int >= 1, got {v!r}")
    if gamma_s_per_byte is not None and not 0 <= gamma_s_per_byte < float("inf"):
        raise ConfigError(f"gamma must be finite and >= 0 seconds per byte, got "
                          f"{gamma_s_per_byte!r}")
    if profile is not None:
        changes = {k: v for k, v in (("inter", inter), ("intra", intra),
                                     ("ranks_per_node", ranks_per_node),
                                     ("nics_per_node", nics_per_node), ("channels", channels),
                                     ("gamma_s_per_byte", gamma_s_per_byte)) if v is not None}
        return replace(cluster(profile), **changes)
    if links_from and (inter is None or intra is None):
        from mpicomm.costmodel.calibrate import host_links  # MPI, only for measured links

        measured_intra, measured_inter = host_links(links_from)
        inter, intra = inter or measured_inter, intra or measured_intra
    rpn = ranks_per_node or 1
    given = [f"{k} {v}" for k, v in (("inter", inter), ("intra", intra)) if v is not None]
    measured_nics = getattr(inter, "interfaces", None)  # a calibration's (``host_links``)
    return Cluster(LINKS_NAME, rpn, intra or DEFAULT_INTRA, inter or DEFAULT_INTER,
                   DEFAULT_GAMMA_S_PER_BYTE if gamma_s_per_byte is None else gamma_s_per_byte,
                   nics_per_node or measured_nics or rpn,
                   "links from the command line: " + (", ".join(given) or "defaults"),
                   channels=channels or 1, pipelined=False, launch_s=LAUNCH_S)


MEASURED = "this-machine"  # the profile of this host's measured links (``--links-from``)


def profile_fields(name: str) -> dict:
    """The cluster flags ``--profile NAME`` sets (``core.flags.CLUSTER_FLAGS``), as values of
    the reducer options: links (``Link``, efficiency kept), ranks and NICs per node, the
    default ring's channels (one per NIC) and, where the profile has a ``device``, its
    ``accelerator`` (``--accelerator``); ``this-machine``: this host's measured links.
    ``ConfigError`` for an unknown name, listing the valid ones."""
    if name == MEASURED:
        return {"links_from": MEASURED}
    if not isinstance(name, str) or name not in CLUSTERS:
        raise ConfigError(f"unknown profile {name!r}; valid profiles: "
                          f"{', '.join([*CLUSTERS, MEASURED])}")
    c = CLUSTERS[name]
    fields = {"inter_link": c.inter, "intra_link": c.intra, "ranks_per_node": c.ranks_per_node,
              "nics_per_node": c.nics_per_node, "channels": c.channel_count}
    if c.device is not None:  # the device model's hook: a profile brings its accelerator
        fields["accelerator"] = getattr(c.device, "name", c.device)
    return fields


def cluster_of(flags: Any, ranks: int) -> Cluster:
    """The cluster a run's flags (a namespace or config with ``CLUSTER_FLAGS``) model on a
    job of ``ranks`` ranks (no ranks per node given: one node of them all)."""
    from mpicomm.core.topology import resolve_ranks_per_node

    name = getattr(flags, "profile", None)
    rpn = resolve_ranks_per_node(getattr(flags, "ranks_per_node", None))
    channels = getattr(flags, "channels", None)
    return build_cluster(None if name == MEASURED else name,
                         ranks_per_node=rpn or (None if name not in (None, MEASURED)
                                                else max(1, ranks)),
                         inter=getattr(flags, "inter_link", None),
                         intra=getattr(flags, "intra_link", None),
                         nics_per_node=getattr(flags, "nics_per_node", None),
                         links_from=getattr(flags, "links_from", None),
                         channels=None if channels in (None, 1) else channels)
