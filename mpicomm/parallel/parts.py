"""A split model's parts as models: a pipeline stage or a tensor shard the loop trains as is.

    part = make_part(group, layers, seed=0, dtype="float64", pipeline=(M, "1f1b"), rows=B)
    loss = part.forward(x, y)            # this part's share; messages to the other parts inside
    for i in part.backward(): ...        # local layers, last first: grads[part.spans[i]] final

Each part keeps the ``nn.model.Model`` contract, so the one training loop, its engines
(buckets, overlap, accumulation, ZeRO) and its optimizer drive a part exactly as the
unsplit MLP; the engine's reducer is the group's reducer over the part's replicas.

1. the whole model is initialised from the seed (``nn.MLP``, as the unsplit loop) and
   the part keeps its share in its own flat buffers;
2. ``forward`` runs the part's whole step: a stage's schedule of F and B over the
   micro-batches (``parallel.stage``), a shard's forward and backward with their
   all-reduces (``parallel.tensor``); the step's gradient is then final, so
   ``backward`` yields the local layers at once (the replicas' all-reduce starts after
   the schedule: it does not overlap the pipeline's drain);
3. the seconds waited for the other parts are ``take_comm`` (the record's
   model-parallel communication), a stage's schedule span ``take_span`` (the bubble);
4. ``gather`` rebuilds the whole model's flat array from every part's (collective over
   the replica's parts), ``scatter`` cuts a part's share from one: checkpoints hold the
   whole model, so any layout resumes any other's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mpicomm.nn import MLP, SoftmaxCrossEntropy, layer_tensors
from mpicomm.parallel.groups import ParallelGroup
from mpicomm.parallel.pipeline import schedule, split_layers
from mpicomm.parallel.stage import Stage
from mpicomm.parallel.tensor import TensorParallel, place_shard, shard_cuts, shard_of

__all__ = ["PipelinePart", "TensorPart", "make_part"]


class _Part:
    """What both kinds share: the whole model (for evaluation), the contract's plumbing."""

    def __init__(self, group: ParallelGroup, layers: tuple[int, ...], dtype: Any) -> None:
        self.group, self.layers, self.dtype = group, layers, np.dtype(dtype)
        self.num_params = sum(i * o + o for i, o in zip(layers[:-1], layers[1:], strict=True))
        self._whole: MLP | None = None  # built at the first evaluation
        self._loss = 0.0

    def backward(self) -> Iterator[int]:
        """Yield the local layers, last first: the step's gradients are final (step 2)."""
        yield from range(len(self.spans) - 1, -1, -1)

    def evaluate(self, x: Any, y: Any, batch: int = 1024) -> tuple[float, int]:
        """The whole model's (loss sum, correct) over x, y (collective over the parts)."""
        whole = self.gather(self.params)
        if self._whole is None:
            self._whole = MLP(self.layers, dtype=self.dtype)
        self._whole.params[...] = whole
        return self._whole.evaluate(x, y, batch)

    def _criterion(self, rows: int) -> SoftmaxCrossEntropy:
        """The unsplit model's loss at ``rows`` rows."""
        return SoftmaxCrossEntropy(np, rows, self.layers[-1], self.dtype)


class PipelinePart(_Part):
    """Pipeline stage ``group.part``: a contiguous run of the MLP's layers (``Stage``)."""

    def __init__(self, group: ParallelGroup, layers: tuple[int, ...], full: np.ndarray, *,
                 micro: int, kind: str, rows: int) -> None:
        super().__init__(group, layers, full.dtype)
        s, P = group.part, group.parts
        self.first, self.stop = split_layers(len(layers) - 1, P)[s]
        mine = [t for t in layer_tensors(layers) if self.first <= t[0] < self.stop]
        self.lo, self.hi = mine[0][1], mine[-1][2]
        self.params = full[self.lo : self.hi].copy()
        self.grads = np.zeros_like(self.params)
        self.tensors = [(i - self.first, a - self.lo, b - self.lo) for i, a, b in mine]
        self.spans = [slice(self.tensors[2 * j][1], self.tensors[2 * j + 1][2])
                      for j in range(self.stop - self.first)]
        weights = [(self.params[w[1]:w[2]].reshape(layers[i + self.first], -1),
                    self.params[b[1]:b[2]]) for i, (w, b) in
                   enumerate(zip(self.tensors[::2], self.tensors[1::2], strict=True))]
        grads = [(self.grads[w[1]:w[2]].reshape(W.shape), self.grads[b[1]:b[2]])
                 for (W, _), w, b in zip(weights, self.tensors[::2], self.tensors[1::2],
                                         strict=True)]
        self.actions = schedule(kind, P, micro)[s]
        self.stage = Stage(group.p2p, s, P, weights, grads, relu_last=s < P - 1,
                           micro_rows=rows // micro, micro=micro,
                           criterion=self._criterion(rows // micro))

    def forward(self, x: Any, y: Any, before_layer: Callable[[int], None] | None = None) -> Any:
        """Run the stage's schedule for the step; return its loss (0 but on the last stage)."""
        if before_layer is not None:  # the deferred updates land before the schedule
            for i in range(len(self.spans)):
                before_layer(i)
        return self.stage.run(self.actions, x, y)

    def take_comm(self) -> float:
        """Seconds this stage waited for the others' messages since the last call."""
        return self.stage.take_idle()

    def take_span(self) -> float:
        """Seconds of the steps' schedules since the last call."""
        return self.stage.take_span()

    def gather(self, local: Any) -> np.ndarray:
        """The whole model's flat array: the stages' runs end to end."""
        return np.concatenate(self.group.gather_parts(local))

    def scatter(self, full: Any, out: Any) -> None:
        """This stage's run of the whole model's flat array."""
        out[...] = full[self.lo : self.hi]


class TensorPart(_Part):
    """Tensor shard ``group.part``: every layer pair cut Megatron-style (``TensorParallel``)."""

    def __init__(self, group: ParallelGroup, layers: tuple[int, ...], full: np.ndarray, *,
                 rows: int) -> None:
        super().__init__(group, layers, full.dtype)
        self.tp = TensorParallel(group.p2p, group.parts, group.part, layers, full,
                                 criterion=self._criterion(rows))
        self.params, self.grads = self.tp.params, self.tp.grads
        self.tensors, self.spans, off = [], [], 0
        for j, (W, b) in enumerate(zip(self.tp.W, self.tp.b, strict=True)):
            self.tensors += [(j, off, off + W.size), (j, off + W.size, off + W.size + b.size)]
            self.spans.append(slice(off, off + W.size + b.size))
            off += W.size + b.size
        self._span = 0.0

    def forward(self, x: Any, y: Any, before_layer: Callable[[int], None] | None = None) -> Any:
        """Run the shard's forward and backward for the step; return the loss."""
        if before_layer is not None:
            for i in range(len(self.spans)):
                before_layer(i)
        return self.tp.step(x, y)

    def take_comm(self) -> float:
        """Seconds of this shard's all-reduces since the last call."""
        return self.tp.take_comm()

    def take_span(self) -> float:
        """A shard has no schedule: 0."""
        return 0.0

    def gather(self, local: Any) -> np.ndarray:
        """The whole model's flat array, each shard's cut put back in place."""
        whole = np.empty(self.num_params, dtype=local.dtype)
        for t, piece in enumerate(self.group.gather_parts(local)):
            place_shard(self.layers, shard_cuts(self.layers, self.group.parts, t)[0], piece,
                        whole)
        return whole

    def scatter(self, full: Any, out: Any) -> None:
        """This shard's cut of the whole model's flat array."""
        shard_of(self.layers, self.tp.cuts, full, out)


def make_part(group: ParallelGroup, layers: tuple[int, ...], *, seed: int, dtype: Any,
              rows: int, pipeline: tuple[int, str] | None) -> PipelinePart | TensorPart:
    """This rank's part of the MLP ``layers`` initialised from ``seed`` (step 1): a stage of a
    pipeline of ``pipeline = (micro-batches, schedule)``, else a tensor shard; ``rows``: the
    replica's batch."""
    full = MLP(layers, seed=seed, dtype=dtype).params
    if pipeline is not None:
        micro, kind = pipeline
        return PipelinePart(group, layers, full, micro=micro, kind=kind, rows=rows)
    return TensorPart(group, layers, full, rows=rows)
