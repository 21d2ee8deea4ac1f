"""Training checkpoints: written atomically by worker 0, checked against the run on resume."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mpicomm.core.options import parse_compress
from mpicomm.core.outputs import replace_atomically
from mpicomm.train.config import TrainConfig
from mpicomm.train.model import num_params

__all__ = ["CheckpointError", "CHECKPOINT_FORMAT", "save_checkpoint", "load_checkpoint",
           "PS_SERVER_PARAMS", "codec_state_arrays", "restore_codec_state", "rebucket_residuals",
           "require_feedback"]

CHECKPOINT_FORMAT = "mpicomm-train-checkpoint-v1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not match this run."""


def save_checkpoint(path: str, **arrays: Any) -> None:
    """Write ``arrays`` to ``path`` atomically: a temporary file in the same folder, renamed
    over it, removed if anything fails (``core.outputs.replace_atomically``)."""
    # a file object, so np.savez does not append ".npz"
    replace_atomically(path, lambda f: np.savez(f, format=CHECKPOINT_FORMAT, **arrays),
                       binary=True)


def load_checkpoint(path: str, cfg: TrainConfig, global_batch: int, data_source: str,
                    data_crc: int | None = None, steps_per_epoch: int | None = None) -> dict:
    """Read a checkpoint and check it belongs to this run (model, dtype, seed, data, batch).

    ``data_crc``: the data's ``Dataset.fingerprint()``, checked against the one saved
    (``data_crc32``; older checkpoints hold none): a file rewritten in place is other data.
    Every field is checked for type, shape and range first (``check_fields``), and, given
    ``steps_per_epoch``, the step against the data position (``check_position``).
    """
    if not os.path.exists(path):
        raise CheckpointError(f"--resume: checkpoint {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as f:
            ck = {k: f[k] for k in f.files}
    except Exception as exc:  # noqa: BLE001 - truncated, not a zip, pickled objects...
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not an mpicomm checkpoint "
            f"({type(exc).__name__}: {exc})"
        ) from None
    need = ("format", "layers", "dtype", "seed", "global_batch", "data_source", "step",
            "epoch", "cursor", "params", "momentum")
    missing = [k for k in need if k not in ck]
    if missing or ck["format"].shape != () or str(ck["format"]) != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"checkpoint {path} is not an mpicomm training checkpoint "
            f"(missing {', '.join(missing) or 'nothing'}; format {ck.get('format')!s})"
        )
    check_fields(path, ck, cfg.dtype)
    layers = tuple(int(w) for w in ck["layers"])
    want = ",".join(map(str, cfg.layers))
    if layers != cfg.layers:
        raise CheckpointError(
            f"checkpoint {path} holds a model with --layers {','.join(map(str, layers))} "
            f"({num_params(layers)} params); this run has --layers {want} "
            f"({num_params(cfg.layers)} params)"
        )
    n = num_params(layers)
    if ck["params"].shape != (n,) or ck["momentum"].shape != (n,):
        raise CheckpointError(
            f"checkpoint {path} is corrupt: params {ck['params'].shape}, momentum "
            f"{ck['momentum'].shape}, expected ({n},) for --layers {want}"
        )
    for key, mine in (("dtype", cfg.dtype), ("seed", cfg.seed), ("global_batch", global_batch),
                      ("data_source", data_source)):
        theirs = ck[key].item()
        if theirs != mine:
            raise CheckpointError(
                f"checkpoint {path} was made with {key} {theirs!r}, this run has {mine!r}; "
                "resume with the same settings"
            )
    if data_crc is not None and "data_crc32" in ck and int(ck["data_crc32"]) != data_crc:
        raise CheckpointError(
            f"checkpoint {path} was made with other data than {data_source} holds now (CRC-32 "
            f"{int(ck['data_crc32']):08x}, now {data_crc:08x}): its data position would read "
            "other rows; resume with the data it was made with")
    if steps_per_epoch is not None:
        check_position(path, ck, steps_per_epoch)
    return ck


INTEGERS = ("seed", "global_batch", "step", "epoch", "cursor")  # whole numbers, 0-d
TEXTS = ("dtype", "data_source")  # strings, 0-d
STATE_ARRAYS = ("params", "momentum", "ps_server_params")  # the run's dtype, finite


def _field(path: str, key: str, what: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {path}: field {key} {what}; the file is corrupt or "
                           "not written by mpicomm train")


def check_fields(path: str, ck: dict, dtype: str) -> None:
    """Raise ``CheckpointError`` (one line naming ``path`` and the field) unless every field
    of ``ck`` has its type, shape and range: whole numbers ≥ 0 for the counters (a step of
    2.7 or −5 would resume at another data position), strings for the names, a vector of
    widths for ``layers``, and finite ``dtype`` vectors for the optimizer state (int64
    params would reset the model; float32 ones in a float64 run lose precision)."""
    for key in INTEGERS:
        a = ck[key]
        if a.shape != () or a.dtype.kind not in "iu":
            raise _field(path, key, f"is {_kind(a)}, expected one whole number")
        if int(a) < 0:
            raise _field(path, key, f"is {int(a)}, expected 0 or more")
    for key in TEXTS:
        if ck[key].shape != () or ck[key].dtype.kind != "U":
            raise _field(path, key, f"is {_kind(ck[key])}, expected a string")
    layers = ck["layers"]
    if layers.ndim != 1 or layers.dtype.kind not in "iu" or len(layers) < 2 or \
            (layers < 1).any():
        raise _field(path, "layers", f"is {_kind(layers)}, expected 2 or more widths ≥ 1")
    for key in (*STATE_ARRAYS, *(k for k in ck if k.startswith(CODEC_PREFIX))):
        if key not in ck:
            continue
        a = ck[key]
        if a.dtype.kind != "f" or (key in STATE_ARRAYS and a.dtype != np.dtype(dtype)):
            raise _field(path, key, f"is {_kind(a)}, this run has --dtype {dtype}")
        if not np.isfinite(a).all():
            i = int(np.flatnonzero(~np.isfinite(a.ravel()))[0])
            raise _field(path, key, f"holds {a.ravel()[i]} at index {i}, expected finite "
                                    "values")


def check_position(path: str, ck: dict, steps_per_epoch: int) -> None:
    """Raise ``CheckpointError`` unless ``step`` is the data position (epoch, cursor) at
    ``steps_per_epoch`` global batches an epoch: each optimizer step reads one global batch,
    so a step that disagrees would resume at other rows (or, 1e12, train no step)."""
    step, epoch, cursor = int(ck["step"]), int(ck["epoch"]), int(ck["cursor"])
    if cursor > steps_per_epoch:
        raise _field(path, "cursor", f"is {cursor}, beyond an epoch of {steps_per_epoch} "
                                     "global batches")
    if step != epoch * steps_per_epoch + cursor:
        raise _field(path, "step", f"is {step}, but its data position (epoch {epoch}, "
                                   f"{cursor} global batches in, {steps_per_epoch} an epoch) "
                                   f"is step {epoch * steps_per_epoch + cursor}")


def _kind(a: np.ndarray) -> str:
    """``a`` in words: its dtype and shape, and the value when it is one number."""
    if a.shape == () and a.dtype.kind in "iufb":
        return f"{a.dtype} {a.item()!r}"
    return f"{a.dtype} of shape {a.shape}"


PS_SERVER_PARAMS = "ps_server_params"  # compressed ps:sync: the servers' exact parameters
CODEC_PREFIX = "codec_state__"  # checkpoint keys of the reducer's codec error-feedback arrays


def codec_state_arrays(reducer: Any, comm: Any) -> dict[str, np.ndarray]:
    """Gather every rank's codec state (``codec_state()``) to rank 0 as checkpoint arrays.

    Error feedback (top-k residuals) is part of the optimizer's state, and each rank
    keeps its own (the part of its gradient it has not sent yet): without every rank's
    residuals a resumed run differs from one that went straight through. Collective
    over ``comm`` when the reducer keeps codec state (the same answer on every rank:
    the same ``compress``); rank 0 gets ``codec_state__r{rank}__{key}`` arrays, the
    others ``{}``. Keys and shapes agree across ranks (the same buckets were reduced).
    """
    get = getattr(reducer, "codec_state", None)
    state = get() if get is not None else {}
    keys = sorted(state)
    if not keys:
        return {}
    parts = [np.ascontiguousarray(state[k]).ravel() for k in keys]
    mine = np.concatenate(parts)
    size, rank = comm.Get_size(), comm.Get_rank()
    every = np.empty((size, mine.size), dtype=mine.dtype) if rank == 0 else None
    comm.Gather(mine, every, root=0)
    if rank != 0:
        return {}
    out, offsets = {}, np.cumsum([0] + [p.size for p in parts])
    for r in range(size):
        for k, lo, hi in zip(keys, offsets[:-1], offsets[1:], strict=True):
            out[f"{CODEC_PREFIX}r{r}__{k}"] = every[r, lo:hi].reshape(np.shape(state[k]))
    return out


def restore_codec_state(ck: dict, rank: int, size: int) -> dict[str, np.ndarray] | None:
    """Return rank ``rank``'s codec state saved in checkpoint ``ck`` (None when it holds none).

    Raises ``CheckpointError`` when the checkpoint holds the state of another number
    of ranks than this run's ``size``: each rank's residuals are its own unsent
    gradient, which a different number of ranks cannot take over.
    """
    ranks = {k[len(CODEC_PREFIX):].split("__", 1)[0] for k in ck if k.startswith(CODEC_PREFIX)}
    if ranks and ranks != {f"r{r}" for r in range(size)}:
        raise CheckpointError(
            f"checkpoint holds the top-k error-feedback residuals of {len(ranks)} ranks; this run "
            f"has {size}: each rank's residuals are its own unsent gradient, so resume top-k "
            f"on {len(ranks)} ranks")
    head = f"{CODEC_PREFIX}r{rank}__"
    state = {k[len(head):]: v for k, v in ck.items() if k.startswith(head)}
    return state or None


def require_feedback(compress: str, path: str) -> None:
    """Raise ``CheckpointError`` unless ``--compress`` keeps the top-k residuals ``path`` holds.

    Without error feedback (another codec, or ``topk:RATIO:noef``) the residuals, the
    gradient each rank has not sent yet, would be dropped without a word.
    """
    name, _, feedback = parse_compress(compress)
    if name != "topk" or not feedback:
        raise CheckpointError(
            f"checkpoint {path} holds top-k error-feedback residuals; this run has --compress "
            f"{compress}, which keeps none: resume with the --compress topk:RATIO the "
            "checkpoint was made with")


def rebucket_residuals(state: dict[str, np.ndarray], buckets: Any,
                       n: int) -> dict[str, np.ndarray]:
    """Carry top-k residuals saved under one bucket layout over to ``buckets`` (``--bucket-mb``).

    A residual is per element (what was not sent yet of each gradient value), and the
    engine's buckets are contiguous ranges laid from the top of the ``n``-value flat
    gradient down, bucket 0 first (``engine.buckets``): the saved sizes alone give the
    saved layout. So the residuals join into one ``n``-value vector and split again
    by ``buckets``; with an unchanged layout, each comes back as it was (bit for bit).
    """
    try:
        sizes = [state[str(i)].size for i in range(len(state))]
    except KeyError:
        raise CheckpointError(
            f"checkpoint holds top-k residuals under keys {sorted(state)}, not the engine's "
            "bucket indices 0..b-1") from None
    if sum(sizes) != n:
        raise CheckpointError(
            f"checkpoint holds top-k residuals of {sum(sizes)} values; the model has {n}")
    full, hi = np.empty(n, dtype=state["0"].dtype), n
    for i, size in enumerate(sizes):  # bucket 0 ends at the top of the buffer
        full[hi - size : hi] = state[str(i)].ravel()
        hi -= size
    return {str(b.index): full[b.lo : b.hi].copy() for b in buckets}
