"""What ``--ps-mode`` adds to the one training loop: its checks, its group, its engine.

1. ``check_ps_flags``: every flag the parameter server cannot honour is refused
   in one line (``ConfigError``, the same on every rank, before any message);
2. ``make_ps_group``: the roles, the transport with the run's emulated links and
   the codec (``ps.PSGroup``) — where a reducer stands in a run;
3. ``make_ps_engine``: a worker's ``engine.PSEngine``; a server's ``ps.PSServer``
   with its key range (from the model's seed, or the checkpoint on resume), the
   loop's SGD on it (sync) or the look-ahead rule (async/ssp), and the push budget.
"""

from __future__ import annotations

from collections.abc import Collection
from types import SimpleNamespace
from typing import Any

import numpy as np

from mpicomm.core.errors import ConfigError
from mpicomm.engine import PSEngine, ps_codec
from mpicomm.nn import MLP, num_params
from mpicomm.ps import PSGroup, PSServer, layout
from mpicomm.ps.lookahead import LookAheadMomentum
from mpicomm.train.checkpoint import PS_SERVER_PARAMS
from mpicomm.train.config import TrainConfig
from mpicomm.train.sgd import SGD

__all__ = ["check_ps_flags", "make_ps_group", "make_ps_engine"]

PS_DEFAULT_BUCKET_MB = 25.0  # TrainConfig's default: --bucket-mb left alone


def check_ps_flags(cfg: TrainConfig, ranks: int, *, single_run: bool = True,
                   given: Collection[str] = ()) -> None:
    """Raise ``ConfigError`` for a flag ``--ps-mode`` cannot honour on ``ranks`` ranks (no MPI).

    ``single_run`` False (a run of compare, whose engine flags are shared by every
    strategy compared): only what the parameter server cannot run at all. ``given``:
    the flags the command line set (``train.checks.check``).
    """
    if not cfg.ps_mode:
        return
    layout(ranks, cfg.servers, num_params(cfg.layers))  # at least one worker, keys per server
    ps_codec(cfg.compress)  # fp16 / int8 only
    if not single_run:
        return
    if cfg.bucket_mb != PS_DEFAULT_BUCKET_MB or "bucket_mb" in given:
        raise ConfigError("--bucket-mb has no effect under --ps-mode: a worker pushes one "
                          "range to each server per step")
    if cfg.validate is not None:
        raise ConfigError("--validate/--no-validate has no effect under --ps-mode: the "
                          "servers' protocol fixes every message's size")
    if not cfg.overlap or "overlap" in given:  # --overlap typed: as ineffective
        flag = "--overlap" if cfg.overlap else "--no-overlap"
        raise ConfigError(f"{flag} has no effect under --ps-mode: a worker pushes after "
                          "backward, with no communication thread to turn off")


def make_ps_group(cfg: TrainConfig, comm: Any) -> PSGroup:
    """The parameter-server group of ``--ps-mode``, made with the run's links and codec."""
    check_ps_flags(cfg, comm.Get_size(), single_run=False)
    codec = ps_codec(cfg.compress)
    opts = cfg.reducer  # parsed once, MPICOMM_*_LINK read as for a reducer
    return PSGroup(comm, servers=cfg.servers, num_params=num_params(cfg.layers),
                   label=f"ps:{cfg.ps_mode}", ranks_per_node=opts.ranks_per_node,
                   inter_link=opts.inter_link, intra_link=opts.intra_link, codec=codec,
                   nics_per_node=cfg.nics_per_node, links_from=cfg.links_from)


def make_ps_engine(cfg: TrainConfig, group: PSGroup, model: Any) -> PSEngine | None:
    """A worker's ``PSEngine``; on a server, attach its ``PSServer`` (key range, SGD, mode)."""
    if group.is_worker:
        return PSEngine(group.client(np.dtype(cfg.dtype)), model.params, model.grads,
                        accumulate=cfg.accumulate)
    lo, hi = group.shard()
    velocity = held = None
    if cfg.resume:  # the workers checked the file in set-up; a sync run only
        with np.load(cfg.checkpoint, allow_pickle=False) as ck:
            held = ck["params"][lo:hi].astype(cfg.dtype)  # what the workers hold
            exact = ck[PS_SERVER_PARAMS] if PS_SERVER_PARAMS in ck.files else ck["params"]
            shard = exact[lo:hi].astype(cfg.dtype)  # compressed: the servers' own sum
            velocity = ck["momentum"][lo:hi].astype(cfg.dtype)
    else:
        shard = MLP(cfg.layers, seed=cfg.seed, dtype=cfg.dtype, xp=np).params[lo:hi].copy()

    def make_optimizer(p: np.ndarray, g: np.ndarray, v: np.ndarray) -> Any:
        sgd = SGD(np, p, g, v, [SimpleNamespace(lo=0, hi=p.size)], cfg.momentum,
                  cfg.weight_decay)  # the loop's update rule, on this shard
        return lambda lr: sgd.update(0, lr)

    mode, W = cfg.ps_algorithm, group.num_workers
    ahead = None
    if mode != "sync" and cfg.ps_momentum == "lookahead":
        ahead = LookAheadMomentum(shard, W, cfg.momentum, cfg.weight_decay)
    group.attach_server(PSServer(group.p2p, group.layout, shard, make_optimizer, mode,
                                 cfg.staleness, None if mode == "sync" else cfg.steps * W,
                                 ahead, velocity, group.codec, held))
    return None
