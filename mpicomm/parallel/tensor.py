"""Tensor parallelism, Megatron-style: each pair of layers split over T ranks, two all-reduces.

    tp = TensorParallel(p2p, T, t, layers, full_params)   # this rank's shard of every pair
    loss = tp.step(x, y)                                   # forward + backward; tp.grads filled

The MLP's linear layers are taken in pairs (0, 1), (2, 3), ...; a last unpaired
layer is replicated (every rank computes it whole). In pair (A, B) with hidden
width h, rank t holds the columns c_t of A (``chunk_bounds(h, T)``) and the same
rows of B (Shoeybi et al., Megatron-LM, 2019):

1. forward, column-parallel A: a_t = ReLU(x·A[:, c_t] + b_A[c_t]) — the input x
   is whole on every rank, no message;
2. forward, row-parallel B: p_t = a_t·B[c_t, :]; all-reduce Σ_t p_t over the T
   ranks (ring, through the p2p transport) and add b_B: every rank has the
   pair's whole output (then the next ReLU);
3. backward, B: dB[c_t, :] = a_tᵀ·dy, db_B = Σ dy (the same on every rank),
   da_t = dy·B[c_t, :]ᵀ masked by a_t > 0 — local;
4. backward, A: dA[:, c_t] = xᵀ·da_t, db_A[c_t] = Σ da_t; the input's gradient
   dx = Σ_t da_t·A[:, c_t]ᵀ is one all-reduce — skipped for the first pair,
   whose input is the data.

Cost per step (B rows, b bytes per element, pair k with input width i_k and
output width o_k, ring all-reduce):

    T_tp = Σ_k [2·2(T−1)·α + 2(T−1)/T·B·(o_k + i_k)·b·β]   (i_0 term left out)

and each rank does 1/T of the pairs' multiply-adds and holds 1/T of their
parameters, gradients and momentum.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mpicomm.core import clock, flops, tags
from mpicomm.nn import ops
from mpicomm.reducers.ring import (
    PIECE_BYTES,
    chunk_bounds,
    piece_scratch,
    ring_allgather,
    ring_reduce_scatter,
)

__all__ = ["TensorParallel", "layer_kinds", "tp_bytes_formula", "shard_cuts", "shard_of",
           "place_shard"]


def layer_kinds(linears: int) -> list[str]:
    """Return "col", "row" or "rep" (replicated: the last, unpaired layer) for each linear."""
    kinds = ["col" if j % 2 == 0 else "row" for j in range(linears)]
    if linears % 2:
        kinds[-1] = "rep"
    return kinds


def tp_bytes_formula(layers: tuple[int, ...], T: int, rows: int, itemsize: int) -> float:
    """Bytes one rank sends per step by the cost formula: 2(T−1)/T · B · (o_k + i_k) · b."""
    total = 0
    for j, kind in enumerate(layer_kinds(len(layers) - 1)):
        if kind == "row":
            total += layers[j + 1] + (layers[j - 1] if j > 1 else 0)
    return 2 * (T - 1) / T * rows * total * itemsize


def shard_cuts(layers: tuple[int, ...], T: int, t: int) -> tuple[list[tuple], int]:
    """Shard t's cut of every layer: ``(rows, cols, bias, offset)`` of the W rows and columns
    and the bias slice it keeps, and the offset of its W in the shard's flat buffer; and the
    shard's parameter count."""
    cuts, n = [], 0
    for j, kind in enumerate(layer_kinds(len(layers) - 1)):
        fi, fo = layers[j], layers[j + 1]
        rows, cols, bias = slice(0, fi), slice(0, fo), slice(0, fo)
        if kind != "rep":
            h = chunk_bounds(fo if kind == "col" else fi, T)
            mine = slice(h[t], h[t + 1])
            rows, cols, bias = (rows, mine, mine) if kind == "col" else (mine, cols, bias)
        size = (rows.stop - rows.start) * (cols.stop - cols.start) + bias.stop - bias.start
        cuts.append((rows, cols, bias, n))
        n += size
    return cuts, n


def _layer_views(layers: tuple[int, ...], cuts: list[tuple], local: Any,
                 full: Any) -> Iterator[tuple]:
    """Per layer: (W kept, its place in the whole W, bias kept, its place in the whole b)."""
    lo = 0
    for j, (rows, cols, bias, off) in enumerate(cuts):
        fi, fo = layers[j], layers[j + 1]
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        mid = off + shape[0] * shape[1]
        whole_W = full[lo : lo + fi * fo].reshape(fi, fo)
        whole_b = full[lo + fi * fo : lo + fi * fo + fo]
        yield (local[off:mid].reshape(shape), (whole_W, rows, cols),
               local[mid : mid + bias.stop - bias.start], (whole_b, bias))
        lo += fi * fo + fo


def shard_of(layers: tuple[int, ...], cuts: list[tuple], full: Any, local: Any) -> None:
    """Write the shard cut by ``cuts`` of the whole model's flat ``full`` into ``local``."""
    for W, (Wf, rows, cols), b, (bf, bias) in _layer_views(layers, cuts, local, full):
        W[...] = Wf[rows, cols]
        b[...] = bf[bias]


def place_shard(layers: tuple[int, ...], cuts: list[tuple], local: Any, full: Any) -> None:
    """Write a shard's flat buffer ``local`` (cut by ``cuts``) into the whole model's ``full``."""
    for W, (Wf, rows, cols), b, (bf, bias) in _layer_views(layers, cuts, local, full):
        Wf[rows, cols] = W
        bf[bias] = b


class _RingSum:
    """Sum a flat buffer in place over the T ranks of ``p2p``: ring reduce-scatter, allgather."""

    def __init__(self, p2p: Any, T: int, t: int) -> None:
        self.p2p, self.ring, self.pos = p2p, list(range(T)), t
        self.seconds = 0.0  # spent in the sums since the last reset
        self._bounds: dict[int, list[int]] = {}
        self._store: dict = {}

    def __call__(self, flat: Any) -> None:
        if len(self.ring) == 1:
            return
        t0 = clock.now()
        bounds = self._bounds.get(flat.size)
        if bounds is None:
            bounds = self._bounds[flat.size] = chunk_bounds(flat.size, len(self.ring))
        largest = max(bounds[i + 1] - bounds[i] for i in range(len(self.ring)))
        piece = max(PIECE_BYTES // flat.itemsize, 1)
        scratch = piece_scratch(self._store, flat, min(largest, piece))
        ring_reduce_scatter(self.p2p, self.ring, self.pos, flat, bounds, scratch, tag=tags.TP_RS,
                            largest=largest)
        ring_allgather(self.p2p, self.ring, self.pos, flat, bounds, tag=tags.TP_AG)
        self.seconds += clock.now() - t0


class TensorParallel:
    """This rank's shard of an MLP split Megatron-style over T ranks (see module docstring).

    Args:
        p2p: transport over the T ranks (rank t holds shard t); counts every byte.
        T, t: ranks and this rank.
        layers: the MLP's widths (features, hidden..., classes).
        full: the unsplit model's flat parameters ``[W0, b0, W1, b1, ...]`` (read once).
        criterion: the loss at the batch's rows (the loop's ``SoftmaxCrossEntropy``).

    Attributes:
        params, grads: this rank's flat parameter and gradient buffers (its shards).
    """

    def __init__(self, p2p: Any, T: int, t: int, layers: tuple[int, ...], full: Any, *,
                 criterion: Any) -> None:
        self.layers, self.kinds = layers, layer_kinds(len(layers) - 1)
        self.criterion = criterion
        self.sum = _RingSum(p2p, T, t)
        cuts, n = shard_cuts(layers, T, t)
        self.params = np.empty(n, dtype=full.dtype)
        self.grads = np.zeros(n, dtype=full.dtype)
        self.cuts = cuts
        self.W, self.b, self.dW, self.db = [], [], [], []
        for rows, cols, bias, off in cuts:
            shape = (rows.stop - rows.start, cols.stop - cols.start)
            mid = off + shape[0] * shape[1]
            end = mid + bias.stop - bias.start
            self.W.append(self.params[off:mid].reshape(shape))
            self.b.append(self.params[mid:end])
            self.dW.append(self.grads[off:mid].reshape(shape))
            self.db.append(self.grads[mid:end])
        shard_of(layers, cuts, full, self.params)
        self._bufs: dict[int, list] = {}

    def _acts(self, rows: int) -> list:
        """Each layer's output (this rank's part of it) and a ReLU mask like it, reused."""
        bufs = self._bufs.get(rows)
        if bufs is None:
            bufs = self._bufs[rows] = [[np.empty((rows, W.shape[1]), dtype=W.dtype)
                                        for W in self.W] for _ in range(2)]
        return bufs

    def activation_bytes(self, rows: int) -> int:
        """Bytes of the layer outputs this rank keeps for backward at ``rows`` rows."""
        return sum(a.nbytes for a in self._acts(rows)[0])

    def step(self, x: Any, y: Any) -> float:
        """Run forward and backward on batch (x, y); return the loss; fill ``grads``."""
        h, masks = self._acts(x.shape[0])
        last = len(self.W) - 1
        inp = [x] + h[:-1]                     # layer j's input
        for j, kind in enumerate(self.kinds):  # 1., 2.
            if kind == "row":
                flops.matmul(np, inp[j], self.W[j], h[j])
                self.sum(h[j].reshape(-1))     # the pair's one forward all-reduce
                h[j] += self.b[j]
            else:
                ops.dense(np, inp[j], self.W[j], self.b[j], h[j])
            if j < last:
                ops.relu(np, h[j])
        loss = float(self.criterion.forward(h[last], y))
        dy = self.criterion.backward()         # dloss/dlogits, over the logits
        for j in range(last, -1, -1):          # 3., 4.
            if j == 0:
                ops.dense_backward(np, inp[0], self.W[0], dy, self.dW[0], self.db[0])
                break
            below, mask = inp[j], masks[j - 1]  # layer j−1's output: becomes its gradient
            np.greater(below, 0, out=mask)     # its ReLU's mask, before it is written over
            ops.dense_backward(np, inp[j], self.W[j], dy, self.dW[j], self.db[j], below)
            if self.kinds[j] == "col":         # the pair's one backward all-reduce
                self.sum(below.reshape(-1))
            below *= mask
            dy = below
        return loss

    def take_comm(self) -> float:
        """Return the seconds spent in this rank's all-reduces since the last call, and reset."""
        out, self.sum.seconds = self.sum.seconds, 0.0
        return out
