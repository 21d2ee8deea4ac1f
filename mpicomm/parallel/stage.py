"""One pipeline stage: its layers' forward and backward per micro-batch, messages through p2p.

    stage = Stage(transport, s, P, weights, grads, widths, micro_rows=mb, micro=M, last_relu=...)
    loss = stage.run(schedule(kind, P, M)[s], x, y)     # one step's F and B; grads accumulated

Stage s holds linear layers [a, b) of the MLP as ``(W, b)`` views into its own
flat parameter buffer (and ``(dW, db)`` into its gradient buffer). One step:

1. zero the gradients; for each action of the stage's schedule, in order:
2. F(m): take an activation slot (reused from a free list: the slots ever made
   are the stage's peak of micro-batches held); its input is micro-batch m of x
   (stage 0) or received from stage s−1 (blocking ``recv``, the wait is idle
   time); run Linear → ReLU per layer, keeping each layer's input; send the
   output to stage s+1 (``isend``: never blocks, so no two stages wait on each
   other's sends). The last stage instead computes the micro-batch's softmax
   cross-entropy and writes dloss/dlogits, scaled by 1/(M·rows), over the logits;
3. B(m): receive the output's gradient from stage s+1 (the last stage has it),
   wait for the send of the output it is written over (MPI: a send buffer is not
   touched until its send completes; it has, since the gradient came back), mask it
   with the ReLU, and per layer, last first, add xᵀ·dy to dW and Σ dy to
   db and form dx = dy·Wᵀ; stage s > 0 sends dx (written over the slot's input,
   no longer needed) to stage s−1; the slot goes back to the free list;
4. wait for every send of the step.

Steps 2–4 are the stage's *span* of the step (``span_s``): its forward/backward
work (``span_s − idle_s``) and its waits for messages (``idle_s``). Stage 0's span
contains every stage's: its F(0) is the step's first action, its B(M−1) the last.
Zeroing the gradients (step 1), the replicas' all-reduce and the optimizer are
outside it, as the textbook bubble (P−1)/(M+P−1) leaves them out.

The step's loss (last stage) is the mean over micro-batches of their mean loss:
the unsplit model's loss on the whole batch. Cost: see ``parallel.pipeline``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.nn import ops

__all__ = ["Stage"]


class _Slot:
    """One micro-batch's activations on this stage: ``h[j]`` is layer j's input, ``h[-1]`` out."""

    __slots__ = ("h", "pending")

    def __init__(self, widths: list[int], rows: int, dtype: Any, first: bool) -> None:
        self.h: list[Any] = [None if (first and j == 0) else np.empty((rows, w), dtype=dtype)
                             for j, w in enumerate(widths)]
        self.pending: list = []  # sends still in flight from this slot's buffers


class Stage:
    """The layers of one pipeline stage, run micro-batch by micro-batch (see module docstring).

    Args:
        p2p: transport over the pipeline's ranks (rank s is stage s); counts every byte.
        s, stages: this stage and the number of stages.
        weights: ``[(W, b), ...]`` of the stage's layers; ``grads``: ``[(dW, db), ...]``.
        relu_last: apply ReLU after the stage's last layer (every stage but the last).
        micro_rows: rows per micro-batch; micro: micro-batches per step.
        criterion: the loss at ``micro_rows`` rows (the loop's ``SoftmaxCrossEntropy``):
            ``forward(z, y)`` → mean loss, then ``backward()`` writes dloss/dz over z.

    Attributes:
        slots_made: activation slots allocated (the peak of micro-batches held).
        slot_bytes: bytes of one slot's activations (its input included, except on stage 0).
        idle_s: seconds spent waiting for a message since the last ``take_idle()``.
        span_s: seconds from each step's first action to the end of its last (sends
            completed), summed since the last ``take_span()``.
        sent_fwd, sent_bwd: bytes sent to the next stage (activations) and the
            previous one (their gradients) since creation.
    """

    def __init__(self, p2p: Any, s: int, stages: int, weights: list, grads: list, *,
                 relu_last: bool, micro_rows: int, micro: int, criterion: Any) -> None:
        self.p2p, self.s, self.P, self.criterion = p2p, s, stages, criterion
        self.weights, self.grads, self.relu_last = weights, grads, relu_last
        self.rows, self.M = micro_rows, micro
        self.dtype = weights[0][0].dtype
        self.widths = [weights[0][0].shape[0]] + [W.shape[1] for W, _ in weights]
        self._free: list[_Slot] = []
        self._slot: dict[int, _Slot] = {}
        self.slots_made = 0
        first = s == 0
        self.slot_bytes = sum(self.rows * w * self.dtype.itemsize
                              for j, w in enumerate(self.widths) if not (first and j == 0))
        self._tmp = [(np.empty_like(dW), np.empty_like(db)) for dW, db in grads]  # made once
        self._dx = [np.empty((self.rows, w), dtype=self.dtype) for w in self.widths]
        self._mask = [np.empty((self.rows, w), dtype=self.dtype) for w in self.widths]
        self._grad_in = np.empty((self.rows, self.widths[-1]), dtype=self.dtype)
        self.idle_s = self.span_s = 0.0
        self.sent_fwd = self.sent_bwd = 0  # bytes handed to the transport, each direction
        self._loss = 0.0
        self._y: Any = None

    # --------------------------------------------------------------- a step
    def run(self, actions: list[tuple[str, int]], x: Any, y: Any) -> float:
        """Run one step's ``actions``; return the step's loss (0 except on the last stage)."""
        for dW, db in self.grads:                                               # 1.
            dW.fill(0)
            db.fill(0)
        self._loss, self._y = 0.0, y
        t0 = clock.now()
        for op, m in actions:
            if op == "F":
                self._forward(m, x)                                             # 2.
            else:
                self._backward(m)                                               # 3.
        for slot in self._free:                                                 # 4.
            self._wait(slot)
        self.span_s += clock.now() - t0
        return self._loss

    def _take(self, m: int) -> _Slot:
        if self._free:
            slot = self._free.pop()
            self._wait(slot)
        else:
            slot = _Slot(self.widths, self.rows, self.dtype, self.s == 0)
            self.slots_made += 1
        self._slot[m] = slot
        return slot

    def _wait(self, slot: _Slot) -> None:
        if slot.pending:
            t = clock.now()
            self.p2p.waitall(slot.pending)
            self.idle_s += clock.now() - t
            slot.pending.clear()

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        t = clock.now()
        self.p2p.recv(buf, source, tag)
        self.idle_s += clock.now() - t

    def _forward(self, m: int, x: Any) -> None:
        slot = self._take(m)
        h = slot.h
        if self.s == 0:
            h[0] = x[m * self.rows : (m + 1) * self.rows]
        else:
            self._recv(h[0], self.s - 1, m)
        last = len(self.weights) - 1
        for j, (W, b) in enumerate(self.weights):
            ops.dense(np, h[j], W, b, h[j + 1])
            if j < last or self.relu_last:
                ops.relu(np, h[j + 1])
        if self.s < self.P - 1:
            slot.pending.append(self.p2p.isend(h[-1], self.s + 1, m))
            self.sent_fwd += h[-1].nbytes
        else:
            y = self._y[m * self.rows : (m + 1) * self.rows]
            self._loss += float(self.criterion.forward(h[-1], y)) / self.M
            self.criterion.backward()  # dloss/dlogits of the micro-batch, over the logits;
            h[-1] *= 1.0 / self.M       # of the whole step: 1/M of it

    def _backward(self, m: int) -> None:
        slot = self._slot.pop(m)
        h = slot.h
        dy = h[-1]
        if self.s < self.P - 1:  # the gradient of our output, masked by our last ReLU
            self._recv(self._grad_in, self.s + 1, m)
            self._wait(slot)  # dy is the output sent forward: its send must be complete (MPI)
            ops.relu_backward(np, dy, self._grad_in, self._mask[-1], dy)
        for j in range(len(self.weights) - 1, -1, -1):
            (W, _), (dW, db), (tW, tb) = self.weights[j], self.grads[j], self._tmp[j]
            # dx: into scratch for our layer below; over our (spent) input for the stage below
            dx = self._dx[j] if j > 0 else (h[0] if self.s > 0 else None)
            ops.dense_backward(np, h[j], W, dy, tW, tb, dx)
            dW += tW  # micro-batches add up: dW is the step's
            db += tb
            if j > 0:  # the layer below is ours: through its ReLU
                dy = ops.relu_backward(np, h[j], self._dx[j], self._mask[j], h[j])
            elif self.s > 0:  # the stage below's output gradient, written over our input
                slot.pending.append(self.p2p.isend(h[0], self.s - 1, m))
                self.sent_bwd += h[0].nbytes
        self._free.append(slot)

    def take_idle(self) -> float:
        """Return the seconds waited for messages since the last call, and reset."""
        out, self.idle_s = self.idle_s, 0.0
        return out

    def take_span(self) -> float:
        """Return the seconds of the steps' spans (steps 2–4) since the last call, and reset."""
        out, self.span_s = self.span_s, 0.0
        return out
