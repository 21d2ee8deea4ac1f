"""What an unsplit model answers of the part contract (``nn.model.Model``), written once.

A pipeline stage or a tensor shard waits for the other parts of its replica and holds a
share of the whole model; a model that is not split waits for none and is its own whole.
The MLP (``nn.mlp``) and a workload's model (``workloads.model``) both inherit this; it
lives in ``core`` because ``workloads`` sits below ``nn``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["UnsplitModel"]


class UnsplitModel:
    """``take_comm``, ``take_span``, ``gather`` and ``scatter`` of a model in one piece
    (the subclass sets ``xp``, its array module)."""

    xp: Any

    def take_comm(self) -> float:
        """Seconds waited for other parts: none."""
        return 0.0

    def take_span(self) -> float:
        """Seconds of a split schedule: none."""
        return 0.0

    def gather(self, local: Any) -> Any:
        """The whole model's flat array: ``local`` itself."""
        return local

    def scatter(self, full: Any, out: Any) -> None:
        """Copy the whole model's flat array ``full`` into ``out``."""
        out[...] = self.xp.asarray(full)
