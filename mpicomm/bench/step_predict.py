"""``model --predict --model M``: samples/s and scaling efficiency of whole training steps.

    python -m mpicomm model --predict --model resnet50 --batch-size 64 --single-rate 1400 \\
        --ranks 8,64,512 --ranks-per-node 8 --inter-link 5us,25GB/s --intra-link 2us,150GB/s

No MPI traffic. Per rank count p and strategy (``predict.default_variants`` or
``--strategies``):

1. the workload (``mpicomm.workloads``): its tensors in backward order, its FLOPs;
2. compute: ``--single-rate`` (a measured one-device rate, samples/s) or the device model
   (``costmodel.device``) for ``--batch-size`` samples a rank;
3. the engine's buckets (``engine.buckets.plan_buckets``, ``--bucket-mb``: train's default
   25 MiB), each reduced by the strategy's one cost function on the cluster
   (``cluster_predict.cluster_time``) in the cluster's own forms (a named profile: NCCL's,
   pipelined, its per-call α) or, with ``--reducers mpicomm``, mpicomm's own reducers as the
   virtual clock runs them (``own_reducers_cluster``, which ``compare`` predicts a virtual
   run with); a ``ps`` with ``--ps-placement tensors|chunks`` or
   ``--ps-servers-on separate`` or ``--ps-node-reduce``: the placed parameter server
   (``costmodel.ps_placement``);
4. the step as the engine runs it (``costmodel.step.step_time``: overlap unless
   ``--no-overlap``); samples/s = p·batch/step, efficiency = step(1 rank)/step(p).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_predict import cluster_time, layout
from mpicomm.costmodel.ps_placement import ps_placed_time, server_loads
from mpicomm.costmodel.step import (
    ITEMSIZE,
    Compute,
    Step,
    device_compute,
    rate_compute,
    step_time,
)
from mpicomm.engine.buckets import plan_buckets
from mpicomm.workloads import Workload, check_model, workload

__all__ = ["StepOptions", "RpcRate", "check_options", "step_rows", "format_step_rows",
           "run_step_s", "own_reducers_cluster", "DEFAULT_BUCKET_MB", "REDUCERS"]

DEFAULT_BUCKET_MB = 25.0  # train's --bucket-mb default (DDP's 25 MiB; tests hold them equal)
# whose reduction forms a named profile is priced with: NCCL's (the profile's own: pipelined,
# its per-call α) or mpicomm's own step-by-step reducers (what a virtual run executes)
REDUCERS = ("nccl", "mpicomm")


def own_reducers_cluster(cluster: Cluster, gamma_s_per_byte: float, launch_s: float,
                         ranks_per_node: int | None = None) -> Cluster:
    """``cluster`` running mpicomm's own reducers, as the virtual clock charges them: one
    blocking exchange a step (not ``pipelined``), no per-call α (the clock charges none),
    each local add a kernel of ``launch_s`` at ``gamma_s_per_byte`` (the device's), on
    ``ranks_per_node`` (None: the cluster's). The one place this cluster is built:
    ``compare``'s prediction of a virtual run (``cli.compare.charged_cluster``) and
    ``model --predict --model --reducers mpicomm`` both call it."""
    return dataclasses.replace(cluster, gamma_s_per_byte=max(gamma_s_per_byte, 1e-300),
                               ranks_per_node=ranks_per_node or cluster.ranks_per_node,
                               pipelined=False, alpha_call_s=0.0, launch_s=launch_s)


@dataclass(frozen=True)
class RpcRate:
    """A parameter server's RPC transport that moves one message above ``above_bytes`` at
    no more than ``bytes_per_s``, whatever the link (a whole tensor is one message).

    A synchronous server answers a key's pulls only once every push of it has arrived, so a
    bucket holding such a tensor of b bytes takes at least 2·b/rate: the push, then the pull
    (``floors``). The validation's rule for TensorFlow 1.x's gRPC before its 2017 upgrade
    (experiments/validation/steps.json ``rpc``, with its source); ``None`` elsewhere.
    """
    above_bytes: float
    bytes_per_s: float

    def floors(self, largest: list[float]) -> list[float]:
        """Per bucket (its largest tensor's bytes), the fewest seconds its push-pull takes."""
        return [2 * b / self.bytes_per_s if b > self.above_bytes else 0.0 for b in largest]


@dataclass(frozen=True)
class StepOptions:
    """What a whole-step prediction is asked: ``model --predict --model``'s flags
    (``cli/predict_step.py``), a ``train --model`` run's settings (``run_step_s``) or a
    validation point's (experiments/validation/check_steps.py)."""
    model: str
    batch_size: int = 32  # samples a rank a step
    single_rate: float | None = None  # a measured one-device rate (samples/s), else the device
    bucket_mb: float = DEFAULT_BUCKET_MB
    overlap: bool = True  # reduce during backward (the engine's default)
    ps_placement: str = "even"  # even | tensors | chunks (costmodel.ps_placement)
    ps_servers_on: str = "workers"  # or "separate" CPU machines with their own NICs
    ps_node_reduce: bool = False  # all-reduce inside each node first, one push a node
    accelerator: str | None = None  # None: the cluster's own device, else the default one
    precision: str | None = None  # None: fp32
    weight_decay: float = 1e-4
    own_gamma: bool = False  # the cluster's γ was given (--gamma-rate): keep it
    rpc: RpcRate | None = None  # a ps's per-message transport rate (validation only)
    reducers: str | None = None  # None or "nccl": the cluster's own forms (a named profile:
    # NCCL's; link flags: mpicomm's); "mpicomm": mpicomm's own reducers (own_reducers_cluster)


def check_options(opts: StepOptions) -> Workload:
    """The workload, after refusing in one line what cannot take effect or is out of range."""
    w = workload(check_model(opts.model))
    if opts.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {opts.batch_size}")
    if opts.single_rate is not None:
        rate_compute(w, 1, opts.single_rate)  # refuses <= 0, nan, inf
        if opts.accelerator is not None and opts.reducers != "mpicomm":
            raise ConfigError(f"--accelerator {opts.accelerator} cannot take effect with "
                              f"--single-rate {opts.single_rate:g}: the measured rate is the "
                              "compute (with --reducers mpicomm it names the device whose "
                              "adds the reducers launch); drop one of them")
    if not 0 <= opts.bucket_mb < float("inf"):
        raise ConfigError(f"--bucket-mb must be >= 0, got {opts.bucket_mb}")
    return w


def _compute(w: Workload, opts: StepOptions, cluster: Cluster,
             bucket_sizes: list[int]) -> tuple[Compute, Cluster]:
    """The step's compute, and the cluster whose reductions' adds are the device's (γ = 3
    bytes moved a byte at its memory bandwidth, as the virtual clock charges them, unless
    --gamma-rate gives one); with ``reducers="mpicomm"`` the cluster running mpicomm's own
    reducers (``own_reducers_cluster``); a measured rate otherwise leaves the cluster's γ."""
    own = opts.reducers == "mpicomm"
    if opts.single_rate is not None and not own:
        return rate_compute(w, opts.batch_size, opts.single_rate), cluster
    dev = _device(opts, cluster)
    gamma = cluster.gamma_s_per_byte if opts.own_gamma else 3.0 / dev.memory_bytes_per_s
    if own:
        cluster = own_reducers_cluster(cluster, gamma, dev.launch_s)
    else:  # the cluster's own forms: an add a kernel only where they are mpicomm's
        cluster = dataclasses.replace(cluster, gamma_s_per_byte=gamma, launch_s=dev.launch_s
                                      if not cluster.pipelined else cluster.launch_s)
    if opts.single_rate is not None:
        return rate_compute(w, opts.batch_size, opts.single_rate), cluster
    return device_compute(w, opts.batch_size, dev, opts.precision or "fp32", bucket_sizes,
                          opts.weight_decay != 0), cluster


def _device(opts: StepOptions, cluster: Cluster):
    """The modelled device: ``--accelerator``, else the profile's own, else the default."""
    from mpicomm.costmodel.device import DEFAULT_ACCELERATOR, device

    own = getattr(cluster, "device", None)  # a profile's own device (a Device or its name)
    dev = device(opts.accelerator or getattr(own, "name", own) or DEFAULT_ACCELERATOR)
    if getattr(dev, "cpu_time", False):
        raise ConfigError("--accelerator host cannot take effect in model --predict --model "
                          "(nothing runs here): name a modelled device"
                          + ("" if opts.single_rate is not None else " or give --single-rate"))
    return dev


def _comm(variant, p: int, cluster: Cluster, opts: StepOptions, sizes: list[float]):
    """The seconds of one bucket's reduction for this strategy: the one cost function, or the
    placed parameter server when a placement, separate servers or a node reduction is asked
    for (``ps_placement.ps_placed_time`` on the busiest server's share of the bucket; with
    ``--ps-node-reduce`` the ring inside the node first, one worker per node after it)."""
    options = {**variant.options_at(p), "op": "mean"}  # the engine averages the gradient
    placed = variant.strategy == "ps" and (opts.ps_placement != "even" or opts.ps_node_reduce
                                           or opts.ps_servers_on == "separate")
    if not placed:
        return lambda nbytes: cluster_time(variant.strategy, p, nbytes, cluster, options)
    local, nodes = layout(p, cluster, options)
    loads = server_loads(sizes, int(options.get("servers") or 1), opts.ps_placement)
    total = sum(sizes)
    workers, per_node = (nodes, 1) if opts.ps_node_reduce else (p, local)
    inside = dataclasses.replace(cluster, ranks_per_node=local)

    def placed_time(nbytes: float) -> float:
        share = nbytes / total
        first = cluster_time("ring", local, nbytes, inside) if opts.ps_node_reduce else 0.0
        return first + ps_placed_time([x * share for x in loads], workers, per_node,
                                      cluster.link("intra"), cluster.link("inter"),
                                      cluster.gamma_s_per_byte, cluster.nics_per_node,
                                      opts.ps_servers_on == "separate", cluster.alpha_call_s)
    return placed_time


def step_rows(w: Workload, cluster: Cluster, ranks: list[int], variants,
              opts: StepOptions) -> list[dict]:
    """One row per rank count and strategy: step time, samples/s, scaling efficiency."""
    itemsize = ITEMSIZE[opts.precision or "fp32"]  # a value on the wire
    # train's gradients are float32 whatever --precision: its engine plans buckets on them
    plan = plan_buckets(w.flat_tensors(), ITEMSIZE["fp32"], opts.bucket_mb * 2**20)
    buckets = [(b.size * itemsize, b.ready_layer) for b in plan]
    sizes = [n * itemsize for _, _, n in w.tensors_backward()]
    compute, cluster = _compute(w, opts, cluster, [b.size for b in plan])
    forms = "nccl" if cluster.pipelined else "mpicomm"  # whose reduction forms were priced
    one = step_time(compute, buckets, lambda nbytes: 0.0, opts.overlap)
    floors = opts.rpc.floors(_largest(w, plan, itemsize)) if opts.rpc else None
    rows = []
    for p in ranks:
        for v in variants:
            comm = _comm(v, p, cluster, opts, sizes)
            if comm(float(buckets[0][0])) is None:
                continue
            step = step_time(compute, buckets, comm, opts.overlap,
                             floors if v.strategy == "ps" and p > 1 else None)
            local, nodes = layout(p, cluster, v.options_at(p))
            row = _row(v.label, p, nodes, local, w, opts.batch_size, compute, step, one)
            rows.append({**row, "reducers": forms})
    return rows


def _largest(w: Workload, plan, itemsize: int) -> list[float]:
    """Bytes of the largest tensor in each bucket of ``plan``."""
    spans = w.flat_tensors()
    return [max((hi - lo) * itemsize for _, lo, hi in spans if b.lo <= lo and hi <= b.hi)
            for b in plan]


def run_step_s(cfg, strategy: str, p: int, cluster: Cluster, options: dict,
               accelerator: str) -> float | None:
    """The predicted step of one ``train --model`` run of ``strategy`` on ``p`` ranks (``cfg``
    its ``TrainConfig``, ``cluster`` the one its virtual clock charges, ``accelerator`` its
    device): the row ``model --predict --model --reducers mpicomm`` gives for the same flags
    (mpicomm's own reducers, which the clock ran, on ``cluster``). None where the
    run is not what the predictor models: ZeRO, accumulation, --overlap-forward, a codec,
    float64 buffers, --flop-rate, --compute-scale, stragglers or jitter."""
    if (cfg.model is None or cfg.strategy == "zero" or cfg.accumulate != 1
            or cfg.overlap_forward or cfg.compress != "none" or cfg.dtype != "float32"
            or cfg.flop_rate is not None or cfg.compute_scale != 1 or cfg.straggler
            or cfg.jitter):
        return None
    rate = cfg.single_rate  # the layers from a measured rate: the device's adds stay
    opts = StepOptions(model=cfg.model, batch_size=cfg.batch_size, bucket_mb=cfg.bucket_mb,
                       overlap=cfg.overlap, precision=cfg.precision, single_rate=rate,
                       accelerator=accelerator, weight_decay=cfg.weight_decay,
                       reducers="mpicomm")  # what the clock ran, whatever the profile's own
    variant = SimpleNamespace(label=strategy, strategy=strategy,
                              options_at=lambda ranks: dict(options))  # as bench.predict.Variant
    rows = step_rows(workload(cfg.model), cluster, [p], [variant], opts)
    return rows[0]["step_ms"] / 1e3 if rows else None


def _row(label: str, p: int, nodes: int, local: int, w: Workload, batch: int,
         compute: Compute, step: Step, one: Step) -> dict:
    return {"strategy": label, "ranks": p, "nodes": nodes, "ranks_per_node": local,
            "model": w.name, "batch_size": batch, "compute": compute.source,
            "buckets": step.buckets, "step_ms": step.step_s * 1e3,
            "compute_ms": step.compute_s * 1e3, "comm_ms": step.comm_s * 1e3,
            "exposed_comm_ms": step.exposed_s * 1e3,
            "samples_per_sec": step.samples_per_s(batch, p),
            "scaling_efficiency": step.scaling_efficiency(one)}


def format_step_rows(rows: list[dict]) -> str:
    """The table: one line per rank count and strategy."""
    lines = [f"#{'ranks':>6} {'nodes':>5} {'strategy':>21} {'step ms':>9} {'exposed':>9} "
             f"{'samples/s':>11} {'eff':>5}"]
    for r in rows:
        lines.append(f"{r['ranks']:>7} {r['nodes']:>5} {r['strategy']:>21} {r['step_ms']:>9.2f} "
                     f"{r['exposed_comm_ms']:>9.2f} {r['samples_per_sec']:>11.1f} "
                     f"{r['scaling_efficiency']:>5.2f}")
    return "\n".join(lines)
