"""What ``--pipeline-stages P`` and ``--tensor-parallel T`` add to the one training loop.

    mpiexec -n 4 python -m mpicomm train --pipeline-stages 4 --micro-batches 8 --schedule 1f1b
    mpiexec -n 4 python -m mpicomm train --tensor-parallel 2      # 2 replicas x 2 shards

1. ``check_parallel_flags``: what a split model cannot run is refused in one line
   (``ConfigError``, the same on every rank, before any message); everything else
   the loop honours as for the unsplit model (docs/parallelism.md says why each
   refusal is one);
2. ``make_group``: ranks = replicas × parts (``parallel.groups``); rank r is part
   r % K of replica r // K; the group's reducer, over the part's replicas, is the
   engine's reducer (data parallelism across replicas, any ``--strategy``);
3. ``make_part``: the part (``parallel.parts``) the loop trains as its model;
4. ``record_fields``: the family's columns beside the loop's record: the pipeline
   bubble (in schedule slots and measured with the clock), bytes per stage boundary,
   micro-batches held; tensor-parallel bytes against the formula; both: the
   model-parallel and the replicas' communication apart.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from mpicomm.core.errors import ConfigError
from mpicomm.core.topology import resolve_ranks_per_node
from mpicomm.parallel.groups import ParallelGroup
from mpicomm.parallel.parts import make_part as _make_part
from mpicomm.parallel.pipeline import SCHEDULES, bubble_formula, schedule, simulate, split_layers
from mpicomm.parallel.tensor import tp_bytes_formula
from mpicomm.train import metrics
from mpicomm.train.config import TrainConfig
from mpicomm.train.summary import warm_steps

__all__ = ["check_parallel_flags", "is_model_parallel", "make_group", "make_part", "label",
           "record_fields", "idle_shares"]

NAN = float("nan")


def is_model_parallel(cfg: TrainConfig) -> bool:
    """True for a pipeline or tensor-parallel run."""
    return cfg.pipeline_stages > 1 or cfg.tensor_parallel > 1


def check_parallel_flags(cfg: TrainConfig, ranks: int | None = None, *,
                         given: Collection[str] = ()) -> None:
    """Raise ``ConfigError`` for a model-parallel flag that cannot take effect (no MPI)."""
    P, M, T = cfg.pipeline_stages, cfg.micro_batches, cfg.tensor_parallel
    if P < 1 or M < 1 or T < 1:
        raise ConfigError("--pipeline-stages, --micro-batches and --tensor-parallel must be "
                          f">= 1, got {P}, {M}, {T}")
    if cfg.schedule not in SCHEDULES:
        raise ConfigError(f"--schedule must be one of {', '.join(SCHEDULES)}, got "
                          f"{cfg.schedule!r}")
    if P == 1 and (M != 1 or cfg.schedule != "1f1b"):
        raise ConfigError("--micro-batches and --schedule need --pipeline-stages P >= 2")
    if not is_model_parallel(cfg):
        return
    _check_shape(cfg, ranks)
    _check_replica_nodes(cfg, ranks, max(P, T))
    _check_refused(cfg, ranks, given)


def _check_shape(cfg: TrainConfig, ranks: int | None) -> None:
    """The model, the batch and the ranks must split into the parts."""
    P, M, T = cfg.pipeline_stages, cfg.micro_batches, cfg.tensor_parallel
    linears, K = len(cfg.layers) - 1, max(P, T)
    if P > 1 and T > 1:
        raise ConfigError("--pipeline-stages with --tensor-parallel is not supported (choose "
                          "one; data parallelism combines with either)")
    if P > linears:
        raise ConfigError(f"--pipeline-stages {P} for a model of {linears} layers: each stage "
                          "needs at least one layer")
    if T > 1 and linears < 2:
        raise ConfigError(f"--tensor-parallel {T} needs a pair of linear layers: --layers "
                          f"{','.join(map(str, cfg.layers))} has {linears}")
    if T > 1 and min(cfg.layers[1:-1:2]) < T:
        raise ConfigError(f"--tensor-parallel {T} needs every layer pair's hidden width >= "
                          f"{T}: here {list(cfg.layers[1:-1:2])}")
    if cfg.batch_size % M:
        raise ConfigError(f"--batch-size {cfg.batch_size} does not split into --micro-batches "
                          f"{M} of equal rows")
    if ranks is not None and ranks % K:
        raise ConfigError(f"{ranks} ranks do not split into groups of {K} "
                          f"({'stages' if P > 1 else 'tensor shards'})")


# flags a split model cannot honour, and why (docs/parallelism.md: "What a split run honours")
_REFUSED = (
    ("--ps-mode", lambda c: bool(c.ps_mode),
     "the parameter servers hold key ranges of the whole model, not of a part"),
    ("--dedicated", lambda c: c.dedicated, "every rank holds a part: none can only serve"),
    ("--device gpu", lambda c: c.device != "cpu",
     "the stages and shards compute and exchange NumPy arrays"),
    ("--checkpoint with --compress topk", lambda c: bool(c.checkpoint) and
     c.compress.startswith("topk"), "each part's error-feedback residuals have its own "
     "size, and a checkpoint holds the whole model"),
)


def _check_refused(cfg: TrainConfig, ranks: int | None, given: Collection[str]) -> None:
    K = max(cfg.pipeline_stages, cfg.tensor_parallel)
    family = "--pipeline-stages" if cfg.pipeline_stages > 1 else "--tensor-parallel"
    for flag, bad, why in _REFUSED:
        if bad(cfg):
            raise ConfigError(f"{flag} is not supported with {family} ({why})")
    for flag, bad in (("--compress", cfg.compress != "none" or "compress" in given),
                      ("--channels", cfg.channels != 1 or "channels" in given)):
        if ranks == K and bad:
            raise ConfigError(f"{flag} has no effect with one replica ({ranks} ranks = {K} "
                              "parts): it shapes the all-reduce across replicas only")


def _check_replica_nodes(cfg: TrainConfig, ranks: int | None, K: int) -> None:
    """Refuse simulated nodes on which a part's replicas sit unevenly.

    The replicas' reducer models nodes as equal runs of its ranks (``groups.replica_nodes``).
    Part j's replicas are world ranks j, j+K, j+2K, ...: nodes of n ranks hold n/K of them
    each when K divides n, one each when n <= K, and otherwise runs of unequal length (6 ranks,
    nodes of 3, K = 2: part 1's replicas on nodes 0, 1, 1), which the reducer would model as
    other nodes than they are.
    """
    n = resolve_ranks_per_node(cfg.ranks_per_node)
    if ranks is None or n is None or ranks == K or n <= K or n % K == 0:
        return
    parts = "stages" if cfg.pipeline_stages > 1 else "tensor shards"
    raise ConfigError(f"--ranks-per-node {n} with {K} {parts} per replica: a part's replicas "
                      "would sit unevenly on the nodes, which their all-reduce cannot model; "
                      f"use nodes of at most {K} ranks or of a multiple of {K}")


def make_group(cfg: TrainConfig, comm: Any, strategy: str) -> ParallelGroup:
    """The replicas × parts of ``comm`` (collective); the reducer over replicas: ``strategy``."""
    return ParallelGroup(comm, max(cfg.pipeline_stages, cfg.tensor_parallel),
                         strategy=strategy, options=cfg.reducer_options())


def make_part(cfg: TrainConfig, group: ParallelGroup) -> Any:
    """This rank's stage or shard of the model, initialised as the unsplit loop's."""
    pipeline = (cfg.micro_batches, cfg.schedule) if cfg.pipeline_stages > 1 else None
    return _make_part(group, cfg.layers, seed=cfg.seed, dtype=cfg.dtype,
                      rows=cfg.batch_size, pipeline=pipeline)


def label(cfg: TrainConfig, group: ParallelGroup) -> str:
    """The run's name: ``ppP:SCHEDULE`` or ``tpT``, ``dpR x`` it with R > 1 replicas."""
    name = f"pp{group.parts}:{cfg.schedule}" if cfg.pipeline_stages > 1 else f"tp{group.parts}"
    return name if group.replicas == 1 else f"dp{group.replicas}x{name}"


def record_fields(cfg: TrainConfig, comm: Any, group: ParallelGroup, part: Any,
                  times: np.ndarray, velocity: Any) -> dict[str, Any]:
    """The family's columns (collective over ``comm``). ``times``: the loop's per-step
    columns (``loop.TIME_COLUMNS``) of this rank."""
    n = len(times)
    timed = times[warm_steps(n):]
    exposed, opt, mp, span = (timed[:, k].sum() for k in (2, 3, 5, 6))
    row = np.array([group.part, group.replica, timed[:, 0].sum(), mp, exposed - mp, opt,
                    group.counts.bytes_sent, part.params.nbytes, velocity.nbytes, span])
    rows = metrics.gather_rows(comm, row)
    per = len(rows) * max(len(timed), 1)
    out = {"model_parallel_comm_s": rows[:, 3].sum() / per,
           "dp_allreduce_s": rows[:, 4].sum() / per,
           "model_parallel_bytes_per_step": float(rows[:, 6].max() / max(n, 1)),
           "param_bytes": int(rows[:, 7].max())}
    if cfg.pipeline_stages > 1:
        out.update(_pipeline_fields(cfg, comm, group, part, rows, max(n, 1)))
    else:
        out["tensor_parallel"] = group.parts
        held = part.tp.activation_bytes(cfg.batch_size)
        out["activation_bytes"] = int(metrics.max_over_ranks(comm, np.array([held]))[0])
        out["tp_bytes_formula_per_step"] = tp_bytes_formula(
            cfg.layers, group.parts, cfg.batch_size, np.dtype(cfg.dtype).itemsize)
    return out


def _pipeline_fields(cfg: TrainConfig, comm: Any, g: ParallelGroup, part: Any,
                     rows: np.ndarray, n: int) -> dict:
    """Bubble (slots and clock), bytes per boundary, micro-batches and bytes held per stage."""
    idle = idle_shares(rows[:, 0], rows[:, 1], rows[:, 3], rows[:, 9], g.parts)
    P, M, st = g.parts, cfg.micro_batches, part.stage
    extra = metrics.gather_rows(comm, np.array([st.sent_fwd, st.sent_bwd, st.slots_made,
                                                st.slots_made * st.slot_bytes]))
    r0 = rows[:, 1] == 0
    e0 = extra[r0][np.argsort(rows[r0, 0])]  # replica 0's stages, in stage order
    sim = simulate(schedule(cfg.schedule, P, M))
    return {
        "pipeline_stages": P, "micro_batches": M, "schedule": cfg.schedule,
        "bubble_slots": sim.bubble, "bubble_formula": bubble_formula(P, M),
        "bubble_measured": float(idle.min(axis=0).mean()) if idle.size else NAN,
        "idle_share_by_stage": [float(x) for x in idle.mean(axis=1)],
        "boundary_bytes_per_step": [float(e0[s, 0] + e0[s + 1, 1]) / n for s in range(P - 1)],
        "peak_microbatches_by_stage": [int(x) for x in e0[:, 2]],
        "peak_microbatches_slots": sim.peak_held,
        "activation_bytes_peak_by_stage": [int(x) for x in e0[:, 3]],
        "activation_bytes": int(extra[:, 3].max()),
        "layers_by_stage": [list(ab) for ab in split_layers(len(cfg.layers) - 1, P)],
    }


def idle_shares(part: np.ndarray, replica: np.ndarray, wait: np.ndarray, span: np.ndarray,
                P: int) -> np.ndarray:
    """Each stage's idle share of its replica's pipeline span: ``[stage, replica]``.

    The span of a step is stage 0's (its first F to its last B: it contains every
    stage's actions); stage s works ``span_s − idle_s`` of it (its F and B, waits
    for messages left out) and idles the rest. Returns 1 − busy/span; the pipeline's
    bubble is the busiest stage's share (its fill and drain), the other stages idle
    more by their lighter load (stage 0 computes no input gradient). Only durations
    of one rank's clock are compared, so any clock serves.
    """
    R = int(replica.max()) + 1
    busy, total = np.zeros((P, R)), np.zeros((P, R))
    for s, r, w, t in zip(part.astype(int), replica.astype(int), wait, span, strict=True):
        busy[s, r], total[s, r] = t - w, t
    ref = total[0]  # stage 0's span, per replica
    if not np.all(ref > 0):
        return np.zeros((P, 0))
    return 1.0 - busy / ref
