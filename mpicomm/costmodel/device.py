"""The modelled accelerator (``Device``): what one rank's compute costs under the virtual clock.

A kernel that does ``flops`` floating-point operations and moves ``nbytes`` through memory
takes, on a device (a roofline, Williams, Waterman & Patterson, CACM 52(4), 2009):

    seconds = max(flops / (peak[precision] · efficiency), nbytes / memory_bytes_per_s)
              + kernels · launch_s

``mpicomm.core.flops`` charges every matmul, elementwise update, loss, codec and reduction
this way (docs/virtual_clock.md). ``host`` is not a model: it charges this machine's CPU
time, as the clock did before devices (``cpu_time=True``, no rates).

Sources (cited by the profiles below):

D1  NVIDIA Tesla K80 datasheet (2014): 8.73 TFLOP/s single precision with GPU Boost and
    480 GB/s for the board's TWO GK210 GPUs -> one GPU (one rank): 4.37 TFLOP/s, 240 GB/s.
    Kepler has no fp16 or bf16 arithmetic (the datasheet gives single and double only).
D2  NVIDIA Tesla P100 (SXM2) datasheet (2016): single 10.6, half 21.2 TFLOP/s; HBM2
    732 GB/s. No bf16.
D3  NVIDIA Tesla V100 (SXM2) datasheet (2017): single 15.7 TFLOP/s, tensor (fp16)
    125 TFLOP/s; HBM2 900 GB/s. No bf16.
D4  NVIDIA A100 datasheet (SXM4 80GB, 2020): FP32 19.5 TFLOP/s; FP16 and BF16 tensor core
    312 TFLOP/s dense (624 with sparsity); HBM2e 2,039 GB/s; PCIe Gen4 64 GB/s (both
    directions together) -> 32 GB/s one way.
D5  NVIDIA H100 datasheet (SXM5, 2022): FP32 67 TFLOP/s; FP16 and BF16 tensor core
    1,979 TFLOP/s with sparsity -> 989.5 dense; HBM3 3.35 TB/s; PCIe Gen5 128 GB/s (both
    directions) -> 64 GB/s one way.
D6  NVIDIA H200 datasheet (SXM, 2023): the H100's compute (FP32 67, FP16/BF16 1,979 sparse
    -> 989.5 TFLOP/s dense); HBM3e 4.8 TB/s; PCIe Gen5 128 GB/s -> 64 GB/s one way.
D8  NVIDIA B200 (HGX B200, 1,000 W): NVIDIA's HGX B200 specification table, per GPU:
    FP16/BF16 tensor core 4.5 petaFLOPS "with sparsity" -> 2.25 dense; HBM3e "up to 8 TB/s"
    (NVIDIA product page, preliminary, 2024; as reproduced in the stored copy read here);
    FP32 80 TFLOP/s and FP16/BF16 2,250 dense for "the HGX variant of B200 ... at 1,000 W"
    (G. Lockwood, glennklockwood.com/garden/processors/B200, from NVIDIA's Blackwell
    technical brief). Host link: PCIe Gen5 x16 (the shipped B200 systems' host interface,
    e.g. MLPerf Inference v6.0 "NVIDIA B200-SXM-180GB" system description:
    "accelerator_host_interconnect": "PCIe Gen5 x16") -> D5's 64 GB/s one way.
D9  NVIDIA GB200 (one Blackwell GPU of a GB200 superchip, NVL72): NVIDIA's GB200 NVL72
    specification table, per superchip of 2 GPUs: FP16/BF16 tensor core 10 petaFLOPS with
    sparsity -> 2.5 dense per GPU; HBM3e 16 TB/s -> 8 TB/s per GPU; the GPUs reach the Grace
    CPU over NVLink-C2C, 900 GB/s (both directions) -> 450 GB/s one way; FP32 90 TFLOP/s and
    FP16/BF16 2,500 dense for "the GB200 variant of B200 when configured to 1,200 W" (D8's
    Lockwood page).
D7  PCI Express 3.0 x16: 8 GT/s x 16 lanes, 128b/130b -> 15.75 GB/s one way (PCI-SIG
    PCIe Base Specification 3.0); the K80, P100 and V100 hosts' link.
E1  Achieved share of peak FLOP/s: Narayanan et al., "Efficient Large-Scale Language Model
    Training on GPU Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473): 163 TFLOP/s per
    A100 of 312 (52%), measured end to end. Taken for every device and precision: one
    published figure, not fitted per device.
E2  Launch cost: an empty kernel launched back to back without synchronisation, about
    334,000 launches a second -> 3.0 us a kernel (M. Boyer, "CUDA Kernel Overhead",
    www.cs.virginia.edu/~mwb7w/cuda_support/kernel_overhead.html). A framework's own
    per-op overhead (PyTorch eager, ~10-20 us) is not the device's and is not modelled.
Memory bandwidth is the datasheet's peak, not derated: no published achieved fraction is
taken for every device here (STREAM-like kernels reach roughly 80-90% of it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mpicomm.core.errors import ConfigError

__all__ = ["Device", "DEVICES", "PRECISIONS", "ITEMSIZE", "DEFAULT_ACCELERATOR", "HOST",
           "device", "install", "EFFICIENCY", "LAUNCH_S"]

PRECISIONS = ("fp32", "fp16", "bf16")
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}  # bytes a value takes at each precision
EFFICIENCY = 163 / 312  # E1
LAUNCH_S = 3.0e-6  # E2
HOST = "host"
DEFAULT_ACCELERATOR = "h100"  # the named clusters' GPU (costmodel.profiles: dgx-h100-*)
_T, _G = 1e12, 1e9
_PCIE3, _PCIE4, _PCIE5 = 15.75 * _G, 32 * _G, 64 * _G  # D7, D4, D5


@dataclass(frozen=True)
class Device:
    """One accelerator as the virtual clock charges it (module docstring).

    Attributes:
        name: the ``--accelerator`` name.
        peak_flops: ((precision, FLOP/s), ...) from the datasheet; a precision absent here
            has no arithmetic on this device and is refused.
        efficiency: achieved share of ``peak_flops`` (0 < e <= 1).
        memory_bytes_per_s: device-memory bandwidth, bytes/s.
        launch_s: seconds charged per kernel.
        copy_bytes_per_s: host <-> device copy bandwidth, one direction, bytes/s.
        source: where each figure comes from.
        cpu_time: True only for ``host``: compute is this machine's CPU time, no rates.
    """

    name: str
    peak_flops: tuple[tuple[str, float], ...] = ()
    efficiency: float = EFFICIENCY
    memory_bytes_per_s: float = math.nan
    launch_s: float = LAUNCH_S
    copy_bytes_per_s: float = math.nan
    source: str = ""
    cpu_time: bool = False

    def __post_init__(self) -> None:
        if self.cpu_time:
            return
        rates = {"memory bandwidth": self.memory_bytes_per_s,
                 "copy bandwidth": self.copy_bytes_per_s,
                 **{f"{p} FLOP/s": r for p, r in self.peak_flops}}
        for what, rate in rates.items():
            if not _positive(rate):
                raise ConfigError(f"device {self.name}: {what} must be a number > 0 and "
                                  f"finite, got {rate!r}")
        if not (_positive(self.efficiency) and self.efficiency <= 1):
            raise ConfigError(f"device {self.name}: efficiency must be in (0, 1], got "
                              f"{self.efficiency!r}")
        if not (isinstance(self.launch_s, (int, float)) and 0 <= self.launch_s < math.inf):
            raise ConfigError(f"device {self.name}: launch cost must be >= 0 seconds and "
                              f"finite, got {self.launch_s!r}")
        bad = [p for p, _ in self.peak_flops if p not in PRECISIONS]
        if bad or "fp32" not in self.precisions:
            raise ConfigError(f"device {self.name}: precisions must include fp32 and be among "
                              f"{', '.join(PRECISIONS)}, got {', '.join(self.precisions)}")

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions this device has arithmetic for."""
        return tuple(p for p, _ in self.peak_flops)

    def flop_rate(self, precision: str = "fp32") -> float:
        """Achieved FLOP/s at ``precision`` (peak x efficiency); ``ConfigError`` if it has none."""
        self.check_precision(precision)
        return dict(self.peak_flops)[precision] * self.efficiency

    def check_precision(self, precision: str) -> None:
        """``ConfigError`` in one line unless this device computes at ``precision``."""
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        if self.cpu_time:
            if precision != "fp32":
                raise ConfigError(f"--precision {precision} cannot take effect with "
                                  "--accelerator host: host charges this CPU's own float32 "
                                  "time; name a modelled device (e.g. --accelerator h100)")
            return
        if precision not in self.precisions:
            raise ConfigError(f"--precision {precision}: {self.name} has no {precision} "
                              f"arithmetic ({self.source.split(';')[0]}); valid for "
                              f"{self.name}: {', '.join(self.precisions)}")

    def seconds(self, flops: float, nbytes: float, kernels: int = 1,
                precision: str = "fp32", flop_rate: float | None = None) -> float:
        """The roofline time of ``kernels`` kernels doing ``flops`` and moving ``nbytes``.

        ``flop_rate``: an achieved FLOP/s that replaces this device's (``--flop-rate``)."""
        rate = self.flop_rate(precision) if flop_rate is None else flop_rate
        return max(flops / rate, nbytes / self.memory_bytes_per_s) + kernels * self.launch_s

    def describe(self, precision: str = "fp32") -> dict:
        """The figures the clock charges, for a run's first line and its JSON."""
        if self.cpu_time:
            return {"name": self.name, "charges": "this host's CPU time"}
        return {"name": self.name, "precision": precision,
                "flop_rate": self.flop_rate(precision),
                "memory_bytes_per_s": self.memory_bytes_per_s, "launch_s": self.launch_s,
                "copy_bytes_per_s": self.copy_bytes_per_s, "source": self.source}


def _positive(x: object) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and 0 < x < math.inf


def _gpu(name: str, fp32: float, half: float | None, bf16: float | None, mem: float,
         copy: float, src: str) -> Device:
    flops = [("fp32", fp32 * _T)] + [(p, r * _T) for p, r in (("fp16", half), ("bf16", bf16))
                                     if r is not None]
    return Device(name, tuple(flops), EFFICIENCY, mem * _G, LAUNCH_S, copy,
                  f"{src}; efficiency E1; launch E2")


DEVICES: dict[str, Device] = {d.name: d for d in (
    _gpu("k80", 8.73 / 2, None, None, 480 / 2, _PCIE3, "D1 (one of the board's two GPUs); D7"),
    _gpu("p100", 10.6, 21.2, None, 732, _PCIE3, "D2; D7"),
    _gpu("v100", 15.7, 125, None, 900, _PCIE3, "D3; D7"),
    _gpu("a100", 19.5, 312, 312, 2039, _PCIE4, "D4"),
    _gpu("h100", 67, 1979 / 2, 1979 / 2, 3350, _PCIE5, "D5"),
    _gpu("h200", 67, 1979 / 2, 1979 / 2, 4800, _PCIE5, "D6"),
    _gpu("b200", 80, 4500 / 2, 4500 / 2, 8000, _PCIE5, "D8"),
    _gpu("gb200", 90, 5000 / 2, 5000 / 2, 8000, 450 * _G, "D9 (NVLink-C2C to the Grace host)"),
    Device(HOST, source="this machine's CPU time (time.thread_time)", cpu_time=True),
)}


def device(name: str) -> Device:
    """The named device (case-insensitive); ``ConfigError`` listing the valid names otherwise."""
    key = name.lower() if isinstance(name, str) else name
    if key not in DEVICES:
        raise ConfigError(f"unknown accelerator {name!r}; valid: {', '.join(DEVICES)}")
    return DEVICES[key]


def install(accelerator: str | None = None, precision: str = "fp32",
            flop_rate: float | None = None) -> Device | None:
    """Install the compute model of this process (``core.flops.use``) and return its device.

    ``accelerator``: ``--accelerator``, which a ``--profile`` with a device sets when the
    flag is not given (``profiles.profile_fields``); without it the virtual clock models
    ``DEFAULT_ACCELERATOR``. Under the wall clock
    nothing is modelled (None), and an ``--accelerator``, ``--precision`` other than fp32 or
    ``--flop-rate`` is refused in one line (``ConfigError``), as are unknown names."""
    from mpicomm.core import clock, flops

    chosen = device(accelerator) if accelerator is not None else None
    if clock.virtual() is None:
        flops.use(chosen, precision, flop_rate)  # refuses what cannot take effect
        return None
    if chosen is None:
        chosen = device(DEFAULT_ACCELERATOR)
    flops.use(chosen, precision, flop_rate)
    return chosen
