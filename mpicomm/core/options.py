"""One options record for every strategy, so one command line can switch strategies.

Every reducer receives the same ``ReducerOptions`` and ignores the fields it does
not use. Unknown names are refused with the list of valid ones, so a typo can
never silently run a different experiment.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from mpicomm.core.bounds import COMPUTE_SCALE, within
from mpicomm.core.errors import ConfigError, ConfigTypeError
from mpicomm.core.flags import is_given
from mpicomm.core.flops import PRECISIONS
from mpicomm.core.links import LinkSpec, link_from_env
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.core.units import parse_bytes

__all__ = ["ReducerOptions", "ReducerFields", "check_strategy_options", "CUDA_AWARE_ON_CPU",
           "HIERARCHICAL_VARIANTS", "env_flag", "CODECS", "parse_compress", "MAX_CHANNELS",
           "CLOCKS"]

HIERARCHICAL_VARIANTS = ("reduce_scatter", "leader")
CLOCKS = ("wall", "virtual")

MAX_CHANNELS = 64  # ring: most channels (each takes two message tags)

# gradient compression (mpicomm.codecs): the spellings of ReducerOptions.compress
CODECS = ("none", "fp16", "int8", "topk:RATIO", "topk:RATIO:noef")


def parse_compress(text: object) -> tuple[str, float | None, bool]:
    """Return (codec, ratio, error_feedback) of a ``compress`` string, or raise ``ConfigError``.

    ``none``, ``fp16``, ``int8``, ``topk:RATIO`` (0 < RATIO <= 1, with error
    feedback) or ``topk:RATIO:noef`` (without).
    """
    parts = str(text).strip().lower().split(":") if isinstance(text, str) else [None]
    head = parts[0]
    if head in ("none", "fp16", "int8") and len(parts) == 1:
        return head, None, False
    if head == "topk" and len(parts) in (2, 3) and parts[-1] != "" and (
            len(parts) == 2 or parts[2] in ("ef", "noef")):
        try:
            ratio = float(parts[1])
        except ValueError:
            ratio = float("nan")
        if 0 < ratio <= 1:
            return "topk", ratio, len(parts) == 2 or parts[2] == "ef"
        raise ConfigError(f"compress {text!r}: the codec is top-k; its RATIO (the fraction of "
                          f"elements sent) must be 0 < RATIO <= 1, got {parts[1]!r}; valid "
                          f"codecs: {', '.join(CODECS)} (e.g. topk:0.01)")
    raise ConfigError(f"unknown compress codec {text!r}; valid codecs: {', '.join(CODECS)} "
                      f"(0 < RATIO <= 1, e.g. topk:0.01)")


def env_flag(name: str) -> bool | None:
    """Return the boolean in environment variable ``name``; None when unset or empty."""
    value = os.environ.get(name, "").strip().lower()
    if value == "":
        return None
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name}={value!r}: expected 0 or 1")


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise ConfigError(f"crossover_bytes: {exc}") from None


def _bool_or_none(name: str, value) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigTypeError(f"{name} must be True, False or None, got {value!r}")


@dataclass(frozen=True)
class ReducerFields:
    """The reducer options' fields, declared once (help: the trailing comments).

    ``ReducerOptions`` adds their checks; ``train.config.TrainConfig`` inherits them,
    so a training run holds the reducer options; train, compare and bench generate
    their flags from these lines (``core.flags.add_flags``).
    """

    ranks_per_node: int | None = None   # hierarchical: simulated node size K (default: ask
                                        # MPI, or MPICOMM_RANKS_PER_NODE)
    variant: str = "reduce_scatter"     # hierarchical variant: reduce_scatter | leader
    servers: int = 1                    # ps: parameter servers S (key ranges)
    dedicated: bool = False             # ps: the last S ranks only serve
    validate: bool | None = None        # every call checks the ranks' length, dtype, op (True)
                                        # or only the first (False); default MPICOMM_VALIDATE,
                                        # else True
    cuda_aware: bool | None = None      # CuPy buffers: device pointers to MPI (True) or staged
                                        # through host memory (False); default
                                        # MPICOMM_CUDA_AWARE, else ask MPI
    crossover_bytes: int | None = field(default=None, metadata={"flag_type": parse_bytes})
                                        # auto: message size (8, 4K, 1M) from which the ring
                                        # is used (default: the cost model's)
    inter_link: str | LinkSpec | None = None  # emulated link between nodes LATENCY,BANDWIDTH,
                                        # e.g. 20us,1GB/s: latency 0-10 s, bandwidth 1 B/s-1
                                        # PB/s (MPICOMM_INTER_LINK; docs/links.md; native
                                        # cannot be emulated)
    intra_link: str | LinkSpec | None = None  # emulated link inside a node, the same form and
                                        # ranges (MPICOMM_INTRA_LINK)
    compress: str = "none"              # gradient compression on the wire: none | fp16 | int8
                                        # | topk:RATIO[:noef] (docs/compression.md)
    channels: int = 1                   # ring: K rotated rings over K slices, so K ranks cross
                                        # each node boundary (docs/tree_and_channels.md)
    clock: str | None = None            # wall | virtual (compute = CPU time, messages by the
                                        # link model; docs/virtual_clock.md); default: virtual
                                        # with emulated nodes (--ranks-per-node and a link)
    compute_scale: float = 1.0          # virtual clock: multiplies every compute charge, the
                                        # device model's or the host's CPU time (1e-12 to 1e6)
    accelerator: str | None = None      # virtual clock: the modelled device whose roofline
                                        # charges compute: k80 p100 v100 a100 h100 h200 b200
                                        # gb200, or host (this CPU's time); default: the
                                        # --profile's, else
                                        # h100 (docs/virtual_clock.md)
    precision: str = "fp32"             # virtual clock: fp32 | fp16 | bf16: the device's FLOP
                                        # rate and the bytes a gradient value takes
    links_from: str | None = None       # virtual clock: charge the link classes no --inter-link
                                        # / --intra-link gives as this host measured them: a
                                        # `mpicomm model --json` file, or this-machine
                                        # (experiments/results/this_machine.json)
    nics_per_node: int | None = None    # virtual clock: network interfaces per node, shared by
                                        # the node's ranks that cross at once (default: one
                                        # per rank; docs/virtual_clock.md)


@dataclass(frozen=True)
class ReducerOptions(ReducerFields):
    """Options shared by all strategies (each uses the ones it needs).

    Attributes:
        ranks_per_node: hierarchical: None asks MPI (shared-memory split), an int
            simulates nodes of that many consecutive ranks; ``MPICOMM_RANKS_PER_NODE``
            sets it when None.
        variant: hierarchical: ``"reduce_scatter"`` (2-D, bandwidth-optimal) or
            ``"leader"`` (reduce to node leader, ring among leaders, bcast).
        servers: ps: number of servers S; the buffer is split in S key ranges.
        dedicated: ps: True puts the servers on their own ranks (the last S),
            which only serve; False (default) colocates them with workers.
        validate: False (default, or ``MPICOMM_VALIDATE=0``) checks that all ranks pass
            the same length, dtype and op once per distinct layout (one small Allgather
            the first time a layout is seen), as DDP checks its buckets once; True (or
            ``MPICOMM_VALIDATE=1``) checks on every call (~4 µs at 2 ranks here).
        cuda_aware: CuPy buffers: True hands device pointers to MPI, False stages
            through pinned host memory, None takes ``MPICOMM_CUDA_AWARE`` if set,
            else asks MPI (``MPIX_Query_cuda_support``).
        crossover_bytes: auto: message size from which the bandwidth-optimal
            algorithm is used; None derives it from the cost model.
        inter_link: emulate the links between nodes (``Topology``'s nodes, real
            or ``ranks_per_node``): ``"20us,1GB/s"`` (see ``mpicomm.core.links``);
            None takes ``MPICOMM_INTER_LINK`` if set, else no emulation. Stored
            parsed, as a ``LinkSpec``. ``native`` cannot be emulated.
        intra_link: the same for links inside a node (``MPICOMM_INTRA_LINK``).
        compress: gradient compression on the wire (``mpicomm.codecs``): ``"none"``,
            ``"fp16"``, ``"int8"``, ``"topk:RATIO"`` or ``"topk:RATIO:noef"``; stored
            normalised. Only ``mpicomm.make_reducer`` (``mpicomm.codecs``) builds
            compressed reducers.
        channels: ring: K >= 1 rotated rings, each over 1/K of the buffer, so K
            different ranks cross every node boundary (nodes as ``ranks_per_node``
            says; ``mpicomm.reducers.multiring``); 1 (default) is the plain ring.
            At most ``MAX_CHANNELS``; no compressed variant (K > 1 with
            ``compress`` is refused).
        clock: ``"virtual"`` holds the virtual clock while the reducer lives (installed
            if none runs, taken down when its last holder closes; ``mpicomm.p2p``:
            compute by the device model of ``accelerator``
            (x ``compute_scale``), messages by the reducer's own
            ``Cluster`` of ``inter_link`` / ``intra_link`` / ``nics_per_node``);
            ``"wall"`` is refused while a virtual clock runs; None (default) leaves the
            process's clock.
        compute_scale: virtual clock: multiplies the compute's CPU time (> 0).
        compute_scale: virtual clock: multiplies every compute charge (> 0).
        accelerator: virtual clock: the modelled device (``costmodel.device``: ``"h100"``,
            ...; ``"host"`` charges this CPU's time); None: the profile's, else h100.
        precision: virtual clock: ``"fp32"``, ``"fp16"`` or ``"bf16"``: the device's FLOP
            rate and the bytes a floating-point value takes in compute and on the wire.
        links_from: virtual clock: a ``mpicomm model --json`` file (or ``"this-machine"``)
            whose measured one-way times per size and reduction γ charge the link
            classes ``inter_link``/``intra_link`` leave unset
            (``mpicomm.costmodel.calibrate.host_links``; docs/virtual_clock.md).
        nics_per_node: virtual clock: c network interfaces per node; the k ranks of a node
            that cross node boundaries at once (the algorithm's ``crossing_ranks``) share
            them, β across nodes x ⌈k/c⌉. None (default): one interface per rank.
    """

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranks_per_node", resolve_ranks_per_node(self.ranks_per_node))
        if self.variant not in HIERARCHICAL_VARIANTS:
            raise ConfigError(
                f"unknown hierarchical variant {self.variant!r}; "
                f"valid: {', '.join(HIERARCHICAL_VARIANTS)}"
            )
        if isinstance(self.servers, bool) or not isinstance(self.servers, int) or self.servers < 1:
            raise ConfigError(f"servers must be a positive int, got {self.servers!r}")
        if not isinstance(self.dedicated, bool):
            raise ConfigTypeError(f"dedicated must be a bool, got {self.dedicated!r}")
        _bool_or_none("validate", self.validate)
        _bool_or_none("cuda_aware", self.cuda_aware)
        if self.validate is None:
            env = env_flag("MPICOMM_VALIDATE")
            object.__setattr__(self, "validate", False if env is None else env)
        if self.cuda_aware is None:  # still None when unset: ask MPI at the first GPU call
            object.__setattr__(self, "cuda_aware", env_flag("MPICOMM_CUDA_AWARE"))
        if isinstance(self.crossover_bytes, str):  # "1M": a size, as on the command line
            object.__setattr__(self, "crossover_bytes", _size(self.crossover_bytes))
        c = self.crossover_bytes
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 0):
            raise ConfigError(f"crossover_bytes must be an int >= 0, got {self.crossover_bytes!r}")
        for name in ("inter_link", "intra_link"):
            spec = link_from_env(getattr(self, name), name, f"MPICOMM_{name.upper()}")
            object.__setattr__(self, name, spec)
        codec, ratio, ef = parse_compress(self.compress)
        spelled = codec if ratio is None else f"topk:{ratio:g}" + ("" if ef else ":noef")
        object.__setattr__(self, "compress", spelled)
        c = self.nics_per_node
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise ConfigError(f"nics_per_node must be an int >= 1, got {c!r}")
        k = self.channels
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_CHANNELS:
            raise ConfigError(f"channels must be an int from 1 to {MAX_CHANNELS}, got {k!r}")
        if k > 1 and spelled != "none":
            raise ConfigError(f"channels={k} with compress={spelled!r}: the multi-channel ring "
                              f"has no compressed variant; use channels=1 or compress='none'")
        if self.clock is not None and self.clock not in CLOCKS:
            raise ConfigError(f"unknown clock {self.clock!r}; valid: {', '.join(CLOCKS)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; valid: "
                              f"{', '.join(PRECISIONS)}")
        if self.accelerator is not None and not isinstance(self.accelerator, str):
            raise ConfigError(f"accelerator must be a device name, got {self.accelerator!r}")
        cs = self.compute_scale
        if not within(cs, COMPUTE_SCALE):  # results stay finite (core/bounds.py)
            raise ConfigError(f"compute_scale must be a number from {COMPUTE_SCALE[0]:g} to "
                              f"{COMPUTE_SCALE[1]:g}, got {cs!r}")

    @property
    def emulated(self) -> bool:
        """True when some link class is emulated."""
        return self.inter_link is not None or self.intra_link is not None

    @classmethod
    def from_kwargs(cls, who: str, **kwargs) -> ReducerOptions:
        """Build options, refusing unknown names with the list of valid ones."""
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(kwargs) - set(valid))
        if unknown:
            raise ConfigTypeError(
                f"{who}: unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; valid options: {', '.join(valid)}"
            )
        return cls(**kwargs)


# --cuda-aware given for a run on the CPU (train, compare, bench, model refuse it alike)
CUDA_AWARE_ON_CPU = ("--cuda-aware/--no-cuda-aware: how CuPy buffers reach MPI; it has no effect "
                     "on the CPU (add --device gpu or drop it)")


# a strategy's own reducer options and the strategies that use them (zero: its own refusals)
OPTION_USERS = (("servers", "--servers", ("ps", "zero")),
                ("dedicated", "--dedicated", ("ps", "zero")),
                ("variant", "--variant", ("hierarchical",)),
                ("crossover_bytes", "--crossover-bytes", ("auto",)),
                ("channels", "--channels", ("ring", "zero")))


def check_strategy_options(values: object, names: list[str], flag: str = "--strategies") -> None:
    """Raise ``ConfigError`` for a strategy's option that none of ``names`` uses: ``values``
    (a config or parsed flags) holds a value other than ``ReducerFields``' default, or the
    command line gave it (``core.flags.is_given``: ``--servers 1`` beside ring too)
    (``--servers 2`` beside ``--strategy ring`` ran the ring alone, the flag dropped).
    ``flag``: how the command names its strategies, for the message."""
    default = ReducerFields.__dataclass_fields__
    for key, option, users in OPTION_USERS:
        value = getattr(values, key)
        if is_given(values, key, value != default[key].default) and not set(names) & set(users):
            shown = option if isinstance(value, bool) else f"{option} {value}"
            strategies = ", ".join(u for u in users if u != "zero")
            raise ConfigError(f"{shown} has no effect with {flag} {','.join(names)}: it sets an "
                              f"option of {strategies} only")
