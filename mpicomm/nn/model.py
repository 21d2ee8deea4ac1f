"""The model contract the training loop drives: the unsplit MLP or one part of a split one.

A part (a pipeline stage, a tensor shard: ``mpicomm.parallel.parts``) holds its share of
the parameters in its own flat buffers and runs its share of forward and backward,
exchanging activations with the other parts of its replica inside ``forward``. To the
loop, the engine and the optimizer it is a model like the unsplit one: flat ``params``
and ``grads``, ``tensors`` and ``spans`` in that buffer (what the engine buckets), and
``backward()`` yielding each local layer once its gradient is final.

What a split adds, the unsplit model answers trivially: the seconds waited for the other
parts (``take_comm``), the span of the step's schedule (``take_span``), and the whole
model's flat arrays (``gather``: collective over the replica's parts; ``scatter``: this
part's share of one), which checkpoints, the parameter checksum and evaluation use, so
that a checkpoint of one layout resumes in any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

__all__ = ["Model"]


class Model(Protocol):
    """What the loop, the engines and the record read of a model or a model's part."""

    params: Any                          # flat parameters (this part's)
    grads: Any                           # flat gradients, the same layout
    tensors: Sequence[tuple[int, int, int]]  # (local layer, lo, hi) of each weight and bias
    spans: Sequence[slice]               # spans[i]: local layer i in params and grads
    num_params: int                      # the whole model's parameter count

    def forward(self, x: Any, y: Any,
                before_layer: Callable[[int], None] | None = None) -> Any:
        """The mean loss of the batch (0 on a part that has no loss); keep state for backward."""

    def backward(self) -> Iterator[int]:
        """Fill ``grads``; yield each local layer, last first, once its gradient is final."""

    def evaluate(self, x: Any, y: Any, batch: int = 1024) -> tuple[float, int]:
        """(sum of per-sample losses, correct predictions) of the whole model over x, y."""

    def take_comm(self) -> float:
        """Seconds waited for the other parts since the last call (0 unsplit), and reset."""

    def take_span(self) -> float:
        """Seconds of the steps' forward/backward schedules since the last call, and reset."""

    def gather(self, local: Any) -> Any:
        """The whole model's flat array from every part's ``local`` (collective over parts)."""

    def scatter(self, full: Any, out: Any) -> None:
        """Write this part's share of the whole model's flat array ``full`` into ``out``."""
